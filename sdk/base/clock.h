/*
 * clock.h - the SDK's clocks: monotonic time for every duration and deadline,
 * wall-clock time only for the timestamps written into events, and the ISO
 * 8601 form of the latter. Any thread; perf__now_ns is async-signal-safe.
 */
#ifndef PERF_CLOCK_H
#define PERF_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t perf__now_ns(void);

/* CLOCK_REALTIME in nanoseconds since the Unix epoch. */
int64_t perf__wall_ns(void);

/* The wall-clock time of monotonic instant `mono_ns` (now's offset applied). */
int64_t perf__mono_to_wall_ns(int64_t mono_ns);

/* "2026-11-21T09:00:00.123Z" into buf (at least 32 bytes). */
void perf__format_iso8601(int64_t wall_ns, char *buf, size_t len);

#endif
