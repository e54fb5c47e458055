/*
 * hang_monitor.h - detects a watched loop (loop_registry.h) staying busy
 * longer than its threshold, samples its thread while the hang lasts, and
 * records one event when it ends; every loop on its own.
 *
 * A loop's thread only stores into its perf__loop_t (busy/idle/heartbeat:
 * a clock read and two atomic stores, no system call, no /proc); the
 * monitor thread polls every loop, sleeping until the moment the first
 * busy period would become a hang.
 */
#ifndef PERF_HANG_MONITOR_H
#define PERF_HANG_MONITOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "perf_sdk.h"
#include "sdk/base/stats.h"
#include "sdk/pipeline/config.h"
#include "sdk/pipeline/loop_stats.h"
#include "sdk/pipeline/recorder.h"

/* What the watched loop publishes. `word` = (epoch << 1) | busy: every
   perf_sdk_loop_busy / heartbeat starts a new epoch (a new unit of work).
   When a unit that lasted at least the hang threshold ends, its end time
   is stored with its epoch in long_unit_end, before `word` changes: the
   monitor finds the exact end of the unit that hung however many short
   units ran before it looked (only a unit that long can be a hang, and the
   next one takes a whole threshold to finish). */
typedef struct perf__loop_s {
  /* The registry's (loop_registry.h): the loop's generation, even while
     its owner is not changing it, odd while it is (every register,
     unregister or change of thread adds 2); its name (bytewise: read while
     written) and the threshold asked for (0: the config's). Aligned: each
     loop's marks touch its own cache lines only. */
  _Alignas(64) atomic_uint gen;
  _Atomic char name[PERF_SDK_MAX_LOOP_NAME_BYTES + 1];
  atomic_int threshold_ms_asked;
  atomic_int watched_tid; /* the loop's thread; 0: a free registry slot */
  char watched_name[16];  /* set with watched_tid, by the watched thread itself */
  atomic_uint_fast64_t word;
  atomic_int_fast64_t busy_since_ns;  /* monotonic start of the current unit of work */
  atomic_int_fast64_t threshold_ns;   /* hang_threshold_ms, set at init */
  atomic_uint_fast64_t long_unit_end; /* unit_end.h: (epoch:24 << 40) | end in us:40 */
  atomic_int paused;
  /* Loops running inside the current unit of work (perf_sdk_loop_nested_
     begin/end): their marks do not end it. The watched thread's own. */
  atomic_int nested;
  /* The current unit's label (perf_sdk_loop_busy_label): written by the
     watched thread only, under a sequence count (odd while it writes);
     label_epoch is the unit it names (other units have no label). */
  atomic_uint label_seq;
  atomic_uint_fast64_t label_epoch;
  _Atomic char label[PERF_MAX_LABEL_BYTES + 1]; /* bytewise: read while written */
  /* The loop's statistics since it was set up: the units of work that
     ended (outside a pause) by duration bucket (loop_stats.h) and their
     time. Added to by the marking thread when a unit ends (relaxed
     fetch-adds, no lock, no system call); the monitor sends what they
     grew by each batch period. */
  atomic_uint_fast64_t units[PERF__LOOP_STATS_BUCKETS];
  atomic_uint_fast64_t busy_total_ns;
  /* units and busy_total_ns as of the loop's last change of generation
     (taken while gen is odd): where the old name's counts end and the new
     one's begin, however late the monitor looks. */
  atomic_uint_fast64_t base_units[PERF__LOOP_STATS_BUCKETS];
  atomic_uint_fast64_t base_busy_ns;
} perf__loop_t;

/* The marks. Inside a nested loop (nested > 0) they change nothing: the
   unit of work that runs the nested loop goes on (one relaxed load). */
void perf__loop_busy(perf__loop_t *loop);
/* perf__loop_busy naming the new unit (label NULL or "": none). */
void perf__loop_busy_label(perf__loop_t *loop, const char *label);
void perf__loop_idle(perf__loop_t *loop);
void perf__loop_heartbeat(perf__loop_t *loop);

typedef struct perf__hang_monitor_s perf__hang_monitor_t;

/* Start the monitor thread ("perf-hang-mon", a perf__worker: its tid is in
   the SDK's registry). Everything passed must outlive the monitor. Every
   batch period (batch_max_delay_ms) and when it stops, it hands the
   recorder each loop's stats of the period, by the loop's name, and their
   sum (perf__recorder_loop_stats): time watched (from the loop's first
   busy mark, not paused, stops of the process taken out), time busy and
   units by duration; nothing for a loop that was not watched and ended no
   unit. */
int perf__hang_monitor_start(const perf__config_t *cfg, perf__recorder_t *recorder,
                             perf__stats_t *stats, perf__hang_monitor_t **out);

/* Wait until the monitor has looked at the loop once after this call (a
   hang whose unit of work ended before the call is recorded by then:
   perf_sdk_flush writes it), or until the monotonic deadline_ns, or until
   the monitor stops. The look may wait for a capture in flight. */
void perf__hang_monitor_look(perf__hang_monitor_t *m, int64_t deadline_ns);

/* Look at the loops now, without waiting for it: a loop just registered
   is watched from now on, not from the monitor's next wake (which the
   other loops' thresholds set). */
void perf__hang_monitor_nudge(perf__hang_monitor_t *m);

/* Stop the thread; a hang in progress is recorded (ended now, or when its
   unit of work ended if that already happened). Waits until the monotonic
   deadline_ns (0: no limit); PERF_E_TIMEOUT when the thread was still
   capturing then: it is left running and everything passed to start must
   stay alive. */
int perf__hang_monitor_stop(perf__hang_monitor_t *m, int64_t deadline_ns);

#endif
