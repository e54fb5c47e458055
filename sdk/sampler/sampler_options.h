/*
 * sampler_options.h - validation and environment overrides of
 * perf_sampler_options_t, shared by every platform's sampler.
 */
#ifndef PERF_SAMPLER_OPTIONS_H
#define PERF_SAMPLER_OPTIONS_H

#include "perf_sdk.h"

/* Override fields from PERF_SDK_SAMPLE_SIGNAL, PERF_SDK_UNWIND_MODE,
   PERF_SDK_SAMPLE_TIMEOUT_MS and PERF_SDK_STACK_COPY_BYTES. A malformed
   value is logged (naming the variable) and ignored. */
void perf__sampler_options_apply_env(perf_sampler_options_t *opts);

/* 0, or PERF_E_INVALID_CONFIG with a log message naming the bad field and
   its allowed range. */
int perf__sampler_options_validate(const perf_sampler_options_t *opts);

#endif
