/*
 * hang_marker.h - a hang in progress, kept on disk so that a process killed
 * while hung (kill -9, OOM killer, watchdog) is reported as a fatal hang by
 * the next process that starts with the same data directory.
 *
 * Each process writes its own `hang-<pid>.marker` in data_dir and holds an
 * exclusive flock on it while it lives; every update replaces the file
 * whole (temporary file, lock, rename), so a reader sees an old or a new
 * marker, never a torn one. A marker nobody holds a lock on belongs to a
 * dead process: perf__hang_marker_collect claims it, turns it into a
 * fatal_hang event and deletes it, so it is reported once.
 *
 * Writer thread only.
 */
#ifndef PERF_HANG_MARKER_H
#define PERF_HANG_MARKER_H

#include <stddef.h>

#include "sdk/pipeline/event.h"

typedef struct perf__hang_marker_s {
  int fd; /* the locked marker of this process, -1 when there is none */
} perf__hang_marker_t;

#define PERF__HANG_MARKER_INIT                                                                     \
  { -1 }

/* Write (or replace) this process's marker for the hang `ev` (in progress,
   duration so far). Returns 0 or a negative perf_error_t (logged). */
int perf__hang_marker_write(perf__hang_marker_t *m, const char *data_dir, const perf__event_t *ev);

/* The hang ended: delete this process's marker. */
void perf__hang_marker_clear(perf__hang_marker_t *m, const char *data_dir);

/* Claim the markers of dead processes in data_dir: each becomes a
   PERF__EVENT_FATAL_HANG event in *out (malloc'd array of *count events,
   each freed with perf__event_free, the array with free). A marker that
   cannot be parsed is deleted and logged. Returns 0 or a negative
   perf_error_t. */
int perf__hang_marker_collect(const char *data_dir, perf__event_t ***out, size_t *count);

#endif
