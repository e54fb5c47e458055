/*
 * writer.h - the event writer thread: takes finished events from a bounded
 * queue and writes them to the sink, keeps this process's hang marker up to
 * date, and at start reports the fatal hangs of dead processes. All of the
 * SDK's file I/O happens on this thread, never on an app thread or in a
 * monitor's sampling path.
 */
#ifndef PERF_WRITER_H
#define PERF_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "perf_sdk.h"
#include "sdk/base/stats.h"
#include "sdk/pipeline/config.h"
#include "sdk/pipeline/event.h"
#include "sdk/pipeline/loop_stats.h"

typedef struct perf__writer_s perf__writer_t;

/* Start the thread ("perf-writer", a perf__worker). cfg and stats must
   outlive the writer. The writer maps the loaded modules and opens the
   spool first, then pays the first capture of thread `watched` (the hang
   monitor's thread; perf__writer_prepare_capture). */
int perf__writer_start(const perf__config_t *cfg, perf__stats_t *stats, pid_t watched,
                       perf__writer_t **out);

/* Thread tid is watched from now on: the writer captures it once and keeps
   nothing (perf__capture_prepare), before anything else it has to do, so
   that what a thread's first capture costs (tens of milliseconds: libdw,
   the unwind rules of the modules on its stack) is paid neither by the
   first sample of its first hang, nor on the hang monitor, whose sleeps
   must go on telling stops of the process (stopped_time.h), nor on an app
   thread. Never blocks on I/O; only the latest tid matters. */
void perf__writer_prepare_capture(perf__writer_t *w, pid_t tid);

/* Hand over `ev` (the writer owns it from now on, whatever the result).
   Never blocks on I/O. PERF_E_QUEUE_FULL when the queue is full (or the
   writer is stopping): the event is freed, not counted here (the caller
   counts the drop). */
int perf__writer_submit(perf__writer_t *w, perf__event_t *ev);

/* The hang in progress changed: `progress` is a copy of it to persist as
   this process's hang marker, or NULL when the hang ended (delete the
   marker). The writer owns `progress`; only the latest post matters. */
void perf__writer_post_hang(perf__writer_t *w, perf__event_t *progress);

/* The watched loops' stats of a period (each loop's and their sum): summed
   into a one-slot mailbox (never refused, never blocks on I/O), which the
   writer empties into the open batch (sdk/pipeline/batch_sink.h). Not
   rate limited, not queued behind events. */
void perf__writer_add_loop_stats(perf__writer_t *w, const perf__loop_stats_t *stats);

/* Write everything queued so far and put the open batch into the spool,
   then (http) wait for the uploader to empty the spool, until deadline_ns.
   0; PERF_E_DEADLINE when batches remain at deadline_ns (or the uploader's
   next try comes after it); PERF_E_SINK_FAILED when a batch could not be
   put into the spool since the last flush, or there is no spool. Not
   concurrent with perf__writer_stop. */
int perf__writer_flush(perf__writer_t *w, int64_t deadline_ns);

/* The wire path's counters (batches, spool) into the batch fields of *out;
   the last ones once the writer has stopped it. */
void perf__writer_batch_stats(perf__writer_t *w, perf_sdk_stats_t *out);

/* Tests only: while held, the writer takes nothing from the queue. */
void perf__writer_hold(perf__writer_t *w, bool hold);

/* Write what is queued until `deadline_ns` (monotonic), then stop the
   thread; events still queued then are dropped and counted. Returns 0, or
   PERF_E_DEADLINE when the thread was stuck in I/O past the deadline (it is
   then left to finish on its own and its memory is not freed). `last` (may
   be NULL) gets the wire path's final counters (batch fields only). */
int perf__writer_stop(perf__writer_t *w, int64_t deadline_ns, perf_sdk_stats_t *last);

#endif
