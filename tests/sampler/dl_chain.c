/*
 * dl_chain.c - a shared library the sampler test loads with dlopen after the
 * sampler has started, to check that new modules get unwind rules and names.
 * Built -O2 without frame pointers: only CFI can unwind its busy leaf.
 */
#include <stdatomic.h>

#define CHAIN __attribute__((noinline, noipa, used))

static CHAIN unsigned long dl_chain_leaf(atomic_int *stop, unsigned long x) {
  while (!atomic_load_explicit(stop, memory_order_relaxed))
    x = x * 6364136223846793005UL + 1;
  return x;
}
static CHAIN unsigned long dl_chain_middle(atomic_int *stop, unsigned long x) {
  return dl_chain_leaf(stop, x) + 1;
}
CHAIN unsigned long dl_chain_outer(atomic_int *stop, unsigned long x) {
  return dl_chain_middle(stop, x) + 1;
}
