/*
 * batch_sink.h - the wire path seen from the writer thread: events go into
 * the open batch (protobuf, deduplicated); a batch is closed when full or
 * batch_max_delay_ms after its first event, compressed, and put into the
 * disk spool; with PERF_SINK_HTTP the uploader thread sends the spool to
 * the collector. With PERF_SINK_FILE the spool is <sink_path>.batches and
 * nothing is sent (perf-dump reads it).
 *
 * Writer thread only, except perf__batch_sink_stats and
 * perf__batch_sink_wait_sent (any thread).
 */
#ifndef PERF_BATCH_SINK_H
#define PERF_BATCH_SINK_H

#include <stdint.h>

#include "perf_sdk.h"
#include "sdk/base/dir_handle.h"
#include "sdk/base/stats.h"
#include "sdk/pipeline/config.h"
#include "sdk/pipeline/event.h"
#include "sdk/wire/batch.h"

typedef struct perf__batch_sink_s perf__batch_sink_t;

/* Open the spool in `root` (perf__batch_sink_open_dir's, taken over),
   adopting what earlier runs left, and, for http, start the uploader.
   Returns 0 or a negative perf_error_t (logged). */
int perf__batch_sink_open(const perf__config_t *cfg, perf__stats_t *stats, perf__dir_t *root,
                          perf__batch_sink_t **out);

/* At perf_sdk_init, on the app's thread: the spool's directory
   (<data_dir>/spool, or <sink_path>.batches) is made (0700) and opened
   into *root, so that the spool reaches it by descriptor from then on
   (also after a chroot). PERF_E_SYSTEM, logged with the path and errno,
   when it cannot be made or written; PERF_E_INVALID_CONFIG when it, or
   data_dir (http), is another user's or writable by group or others
   without the sticky bit (sdk/base/dir_handle.h; logged with the reason);
   0 and no directory for PERF_SINK_NONE. For the http sink also the
   configured upload_helper: PERF_E_INVALID_CONFIG (logged) when it names
   no executable file. */
int perf__batch_sink_open_dir(const perf__config_t *cfg, perf__dir_t *root);

/* The most closed batches kept in their journals while the spool cannot
   take them (each at most 4 x batch_max_bytes on disk). */
#define PERF__PENDING_JOURNALS_MAX 16

/* Add an event to the open batch, closing it first when it is full.
   0, or a negative perf_error_t when the event was dropped (counted here). */
int perf__batch_sink_add(perf__batch_sink_t *s, const perf__event_t *ev);

/* Add the fatal hang held by a dead process's marker (a decoded one-event
   batch) with `reason`. As perf__batch_sink_add. */
int perf__batch_sink_add_fatal_hang(perf__batch_sink_t *s, const Perf__V1__Batch *marker,
                                    const char *reason);

/* Add the watched loop's stats of one period to the open batch (summed
   with what it holds; an empty batch opens with them: a stats-only batch)
   and to its journal. The stats are in the batch whatever the result: 0,
   or PERF_E_SYSTEM when they could not be journaled (counted as
   journal_write_failed). */
int perf__batch_sink_add_loop_stats(perf__batch_sink_t *s, const perf__batch_loops_t *stats);

/* How long a batch holding loop stats and no event stays open (unless
   batch_max_delay_ms is longer): 5 minutes. */
#define PERF__STATS_BATCH_DELAY_MS 300000

/* When the open batch must be closed (monotonic ns), 0 when none is open:
   batch_max_delay_ms after it opened, PERF__STATS_BATCH_DELAY_MS while it
   holds no event. */
int64_t perf__batch_sink_deadline(const perf__batch_sink_t *s);

/* Close the open batch now (if it has events or loop stats) and put it in
   the spool. */
void perf__batch_sink_close_batch(perf__batch_sink_t *s);

/* PERF_E_SYSTEM when a batch could not be put into the spool since the
   last call (perf_sdk_flush reports it), else 0. Any thread. */
int perf__batch_sink_take_failure(perf__batch_sink_t *s);

/* Wait until the uploader has sent the whole spool or deadline_ns passes:
   0 or PERF_E_TIMEOUT. Always 0 for the file sink. */
int perf__batch_sink_wait_sent(perf__batch_sink_t *s, int64_t deadline_ns);

/* The spool's and uploader's counters into the public stats. */
void perf__batch_sink_stats(perf__batch_sink_t *s, perf_sdk_stats_t *out);

/* Close the open batch, stop the uploader (what is not sent stays on disk),
   close the spool. The last stats are kept in *last (may be NULL). */
void perf__batch_sink_close(perf__batch_sink_t *s, perf_sdk_stats_t *last);

#endif
