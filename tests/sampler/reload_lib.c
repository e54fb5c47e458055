/*
 * reload_lib.c - the library test_module_reload rewrites at one path: built
 * twice without a build-id (-Wl,--build-id=none), as reload_a.so and, with
 * RELOAD_B, reload_b.so. reload_entry (the same name in both) calls the
 * version's own function, whose name and frame differ: A's keeps a small
 * frame, B's a 4 KiB one, so unwinding B's frame with A's rules (the CFA
 * offset) would lose its callers. Built with -fomit-frame-pointer: only
 * the CFI finds the caller.
 */
#include <string.h>

typedef void (*reload_cb)(void);

#ifdef RELOAD_B
__attribute__((noinline)) void reload_beta_frame(reload_cb cb) {
  volatile char big[4096];
  memset((char *)big, 1, sizeof big);
  cb();
  __asm__ volatile("" ::"r"(big[7]) : "memory");
}
#define OWN reload_beta_frame
#else
__attribute__((noinline)) void reload_alpha_frame(reload_cb cb) {
  volatile char small[8];
  small[0] = 1;
  cb();
  __asm__ volatile("" ::"r"(small[0]) : "memory");
}
#define OWN reload_alpha_frame
#endif

__attribute__((noinline)) void reload_entry(reload_cb cb) {
  OWN(cb);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
}
