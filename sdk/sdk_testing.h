/*
 * sdk_testing.h - seams for the test suite (tests link the static library).
 * Not part of the public API.
 */
#ifndef PERF_SDK_TESTING_H
#define PERF_SDK_TESTING_H

#include <stdbool.h>

/* Hold (true) or release the event writer: while held it takes nothing from
   the queue, so tests can fill it. PERF_E_NOT_INITIALIZED when not running. */
int perf__sdk_hold_writer(bool hold);

/* The continuous CPU profile of the SDKs started from now on: windows of
   window_ms (0: a minute) and window tables of `entries` (stack, thread,
   state) entries (0: the default, 2048). */
void perf__sdk_profile_testing(unsigned window_ms, unsigned entries);

#endif
