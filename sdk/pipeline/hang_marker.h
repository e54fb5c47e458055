/*
 * hang_marker.h - a hang in progress, kept on disk so that a process killed
 * while hung (kill -9, OOM killer, watchdog) is reported as a fatal hang by
 * the next process that starts with the same data directory.
 *
 * The marker holds the hang as a one-event batch in the wire encoding
 * (perf.v1.Batch, zstd): modules with their build-ids, module-relative
 * addresses and (with `symbolize`) function names, so the collector
 * symbolizes a fatal hang like any other event.
 *
 * Each process writes its own `hang-<pid>.marker` in data_dir and holds an
 * exclusive flock on it while it lives; every update replaces the file
 * whole (temporary file, lock, rename), so a reader sees an old or a new
 * marker, never a torn one. A marker nobody holds a lock on belongs to a
 * dead process: perf__hang_marker_collect claims it, decodes it and deletes
 * it, so it is reported once.
 *
 * Every file is reached from data_dir's descriptor (the writer's, opened
 * at init), never through a link; markers are created 0600 whatever the
 * umask.
 *
 * Writer thread only.
 */
#ifndef PERF_HANG_MARKER_H
#define PERF_HANG_MARKER_H

#include <stddef.h>

#include "sdk/base/owned_fds.h"
#include "sdk/pipeline/config.h"
#include "sdk/pipeline/event.h"
#include "sdk/pipeline/event_encode.h"
#include "sdk/wire/batch.h"

#include <stdbool.h>

#define PERF__HANG_MARKER_MAX_BYTES (4u << 20) /* a marker's batch, serialized */

typedef struct perf__hang_marker_s {
  perf__owned_fd_t file;          /* the locked marker of this process, .fd -1 when there is none */
  perf__batch_builder_t *builder; /* made at the first write */
  perf__event_encoder_t *encoder;
  bool warned; /* a failure was logged during this hang: the next ones are not */
} perf__hang_marker_t;

#define PERF__HANG_MARKER_INIT                                                                     \
  { PERF__OWNED_FD_NONE, NULL, NULL, false }

/* Write (or replace) this process's marker in data_dir (open at dirfd)
   for the hang `ev` (in progress, duration so far). Returns 0 or a
   negative perf_error_t (logged once per hang: the marker is rewritten at
   every sample). */
int perf__hang_marker_write(perf__hang_marker_t *m, const perf__config_t *cfg, int dirfd,
                            const perf__event_t *ev);

/* The hang ended: delete this process's marker (in dirfd; -1: only its
   descriptor is let go). */
void perf__hang_marker_clear(perf__hang_marker_t *m, int dirfd);

/* Free what the marker holds (its file, if any, stays). */
void perf__hang_marker_free(perf__hang_marker_t *m);

/* Claim the markers of dead processes in data_dir (open at dirfd; its
   path for the log): each becomes a decoded
   one-event batch in *out (a malloc'd array of *count batches, each freed
   with perf__v1__batch__free_unpacked(batch, NULL), the array with free).
   A marker that cannot be decoded is deleted and logged. Returns 0 or a
   negative perf_error_t. */
int perf__hang_marker_collect(int dirfd, const char *data_dir, Perf__V1__Batch ***out,
                              size_t *count);

#endif
