/*
 * config_env.h - the PERF_SDK_* names of the environment: the ones the SDK
 * reads, and what it says of the others (a misspelling such as
 * PERF_SDK_ENDPIONT). Runs on the thread calling perf_sdk_init.
 */
#ifndef PERF_CONFIG_ENV_H
#define PERF_CONFIG_ENV_H

#include <stdbool.h>
#include <stddef.h>

/* Look at every PERF_SDK_* variable of the environment that is neither one
   of the n names in `fields` (the configuration fields' variables) nor one
   another part of the SDK reads (PERF_SDK_DISABLED, the sampler's, ...).
   strict: the first one is PERF_E_INVALID_CONFIG, logged as an error.
   Otherwise each is a warning (none when quiet) and 0 is returned. Both
   name the variable, and the nearest known name when it is at most two
   edits away. */
int perf__config_env_names_check(const char *const *fields, size_t n, bool strict, bool quiet);

#endif
