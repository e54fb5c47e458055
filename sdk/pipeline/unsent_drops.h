/*
 * unsent_drops.h - drop counts that no written batch has carried yet, kept
 * in <spool dir>/drops across a restart: at shutdown, and after a batch
 * could not be written, the batch sink saves them; the next process adds
 * them to its first batch that gets into the spool, then removes the file.
 * A kill -9 loses only the drops counted since the last save. The files
 * are reached from the spool directory's descriptor, never through a link,
 * and written 0600 whatever the umask. Writer thread.
 *
 * Format (text, one line each): "perf-drops 1", then "<reason> <count>"
 * for rate_limited, queue_full, sink_failed, spool_quota, oversized.
 */
#ifndef PERF_PIPELINE_UNSENT_DROPS_H
#define PERF_PIPELINE_UNSENT_DROPS_H

#include <stdbool.h>

#include "sdk/wire/batch.h"

/* Add the counts saved in the directory dirfd (its path `dir`, for the
   log) to *d. true when a file was found (a malformed one is logged and
   ignored). */
bool perf__unsent_drops_load(int dirfd, const char *dir, perf__batch_drops_t *d);

/* Save *d in dirfd (drops.new, created afresh, then renamed to drops).
   0 or PERF_E_SYSTEM (logged). All zero: the file is removed instead. */
int perf__unsent_drops_save(int dirfd, const char *dir, const perf__batch_drops_t *d);

/* Remove the file (its counts went out with a batch). */
void perf__unsent_drops_clear(int dirfd);

#endif
