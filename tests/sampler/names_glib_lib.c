/*
 * names_glib_lib.c - a library of names_glib_app (-O2 -g) whose code runs
 * only in the app's last hang, after its 10 s idle gap: the SDK opens its
 * symbols and compiles its unwind rules for the first time then, after the
 * idle release has unloaded libdw and libelf.
 */
#define _GNU_SOURCE /* clock_gettime, select (built with its own options) */
#include <sys/select.h>
#include <time.h>

#include "names_glib_lib.h"

static long long lib_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

/* Inlined into names_glib_reload_settings: waits in select() for ms. */
static inline __attribute__((always_inline)) void wait_for_settings(int ms) {
  for (long long end = lib_now_ms() + ms, left = ms; left > 0; left = end - lib_now_ms()) {
    struct timeval tv = {(time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000};
    select(0, NULL, NULL, NULL, &tv);
  }
}

__attribute__((noinline)) int names_glib_reload_settings(int ms) {
  wait_for_settings(ms);
  __asm__ volatile("" ::: "memory"); /* no tail call: this frame stays */
  return ms;
}
