/*
 * strip_ra.h - perf__arch_strip_ra on x86_64 (see arch.h): return
 * addresses carry no signature. Inline: the handler's walk calls it at
 * every frame.
 */
#ifndef PERF_SAMPLER_ARCH_STRIP_RA_H
#define PERF_SAMPLER_ARCH_STRIP_RA_H

#include <stdint.h>

static inline uintptr_t perf__arch_strip_ra(uintptr_t ra) {
  return ra;
}

#endif
