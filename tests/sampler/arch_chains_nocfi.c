/*
 * arch_chains_nocfi.c - the "code without CFI" functions of
 * test_arch_chains.c: built with -fno-asynchronous-unwind-tables
 * -fno-unwind-tables (no .eh_frame entries) and with frame pointers, as
 * hand-written or JIT code reaches the sampler.
 */
#include <stdatomic.h>

__attribute__((noinline)) unsigned long nocfi_leaf(atomic_int *stop, unsigned long x) {
  while (!atomic_load_explicit(stop, memory_order_relaxed))
    x = x * 6364136223846793005ul + 1;
  return x;
}

__attribute__((noinline)) unsigned long nocfi_outer(atomic_int *stop, unsigned long x) {
  return nocfi_leaf(stop, x + 1) + 1;
}
