/*
 * preload.h - what the two files of libperfsdk-preload.so share: whether
 * the SDK runs (set once by the constructor, read by every interposed
 * wait) and the loop name and threshold the waits register with.
 */
#ifndef PERF_PRELOAD_H
#define PERF_PRELOAD_H

#include <stdbool.h>

/* The SDK was started by the constructor and runs: the waits watch loops.
   False before the constructor, when the SDK is disabled or refused its
   configuration, and in a process that is the SDK's own helper. */
bool perf__preload_on(void);

/* Resolve the interposed functions' next definitions (libc's) now, before
   any thread of the app waits: called by the constructor. */
void perf__preload_resolve_waits(void);

/* Start watching waits (after a successful perf_sdk_init). */
void perf__preload_set_on(void);

/* Waits a thread returns from, zero timeouts not counted, before its loop
   is registered. */
#define PERF__PRELOAD_WAITS_TO_REGISTER 3

#endif
