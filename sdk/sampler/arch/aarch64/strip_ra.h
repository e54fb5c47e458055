/*
 * strip_ra.h - perf__arch_strip_ra on aarch64 (see arch.h). Inline: the
 * handler's walk calls it at every frame.
 */
#ifndef PERF_SAMPLER_ARCH_STRIP_RA_H
#define PERF_SAMPLER_ARCH_STRIP_RA_H

#include <stdint.h>

static inline uintptr_t perf__arch_strip_ra(uintptr_t ra) {
  /* xpaclri strips the pointer authentication code from x30; it is a hint
     (a no-op) on CPUs without pointer authentication, whose return
     addresses carry no code. */
  register uintptr_t lr __asm__("x30") = ra;
  __asm__("hint #7" : "+r"(lr));
  return lr;
}

#endif
