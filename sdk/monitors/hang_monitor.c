/*
 * hang_monitor.c - the hang monitor thread (see hang_monitor.h).
 *
 * Every loop of the registry (loop_registry.h) in use is watched on its
 * own: its own threshold, hang, samples and stats; the thread sleeps until
 * the earliest moment any of them needs a look. A loop whose generation
 * changes (unregistered, registered again, its thread gone or replaced)
 * ends its hang in progress and sends its stats under the name it had.
 *
 * Per loop, not hanging: sleep until busy_since + threshold when it is busy
 * (the earliest moment it can become a hang), else half a threshold. At
 * that moment, if the same unit of work is still running, the hang starts:
 * capture at once, then every hang_sample_interval_ms up to
 * hang_max_samples, each time passing a copy through the recorder as this
 * process's hang marker. The hang ends when the loop goes idle, starts a new
 * unit of work, or is paused; its duration comes from the loop's own
 * timestamps, so it does not depend on when the monitor wakes up.
 *
 * Time the process was stopped (SIGSTOP, a debugger) is not busy time:
 * the monitor learns of a stop when it wakes late (stopped_time.h) and
 * takes it out of the unit's time, before the threshold and from the
 * duration. While a unit is in progress it never sleeps longer than a
 * quarter of the threshold, so at most that much of a stop goes unseen.
 *
 * Loop stats: the marking thread counts each unit of work as it ends
 * (count_unit); the monitor adds up the time it watched between its looks
 * and, each batch period, hands the recorder how much the counts grew
 * (post_stats).
 */
#include "sdk/monitors/hang_monitor.h"

#include <stdlib.h>
#include <string.h>

#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "sdk/base/threads.h"
#include "sdk/base/utf8.h"
#include "sdk/base/worker.h"
#include "sdk/monitors/loop_registry.h"
#include "sdk/monitors/stopped_time.h"
#include "sdk/monitors/unit_end.h"
#include "sdk/pipeline/capture.h"
#include "sdk/sampler/thread_state.h"

#define BUSY_BIT 1u
#define END_CHECK_NS 10000000 /* while hanging: how often to look for its end */

/* One loop as the monitor watches it (monitor thread only). */
typedef struct watch_s {
  bool watching; /* the slot is in use at generation gen */
  unsigned gen;
  char name[PERF_SDK_MAX_LOOP_NAME_BYTES + 1];
  /* the hang in progress */
  perf__event_t *hang;
  uint64_t hang_epoch;
  int64_t next_sample_ns;
  /* the loop's thread's CPU clock when the monitor first saw unit
     cpu_epoch (cpu_at: then): what tells a thread that was only waiting
     for a CPU from one that hangs (waiting_for_cpu) */
  uint64_t cpu_epoch;
  int64_t cpu_ns, cpu_at;
  /* loop stats: the counters as of the last post, time watched since */
  perf__loop_counts_t sent;
  uint64_t watched_ns;
} watch_t;

struct perf__hang_monitor_s {
  const perf__config_t *cfg;
  perf__loop_t *loops; /* the registry's table */
  perf__recorder_t *recorder;
  perf__stats_t *stats;
  perf__worker_t *worker; /* the thread, "perf-hang-mon" */
  watch_t watch[PERF_SDK_MAX_LOOPS];
  perf__stopped_time_t stopped; /* stops of the process (monitor thread only) */
  perf__loop_stats_t pending;   /* stats of the period not posted yet (forgotten loops') */
  int64_t last_look_ns;         /* the previous look, where watched time resumes */
  int64_t next_stats_ns;        /* when the period's stats go */
  int64_t next_gone_check_ns;   /* when to look for loops whose thread is gone */
  /* perf__hang_monitor_look: looks asked for and done (worker lock) */
  uint64_t looks_asked, looks_done;
};

static void monitor_main(perf__worker_t *worker, void *arg);
static uint64_t looks_asked(perf__hang_monitor_t *m);
static void sleep_unless_asked(perf__hang_monitor_t *m, uint64_t asked, int64_t wake_at);
static void mark_ended(perf__loop_t *loop, uint64_t epoch, int64_t now_ns);
static int64_t unit_end(const perf__loop_t *loop, uint64_t epoch, int64_t now_ns);
static void refresh(perf__hang_monitor_t *m, int64_t now, bool at_start);
static void forget(perf__hang_monitor_t *m, size_t i, int64_t now,
                   const perf__loop_counts_t *until);
static void adopt(perf__hang_monitor_t *m, size_t i, unsigned gen, const perf__loop_counts_t *from);
static bool read_base(const perf__loop_t *loop, unsigned gen, perf__loop_counts_t *out);
static int64_t step(perf__hang_monitor_t *m, size_t i, int64_t now);
static int64_t waiting_for_cpu(perf__hang_monitor_t *m, size_t i, int64_t threshold,
                               int64_t busy_for, int64_t now);
static void start_hang(perf__hang_monitor_t *m, size_t i, uint64_t epoch, int64_t busy_since,
                       int64_t now);
static void sample_hang(perf__hang_monitor_t *m, size_t i, int64_t now);
static void end_hang(perf__hang_monitor_t *m, size_t i, int64_t end_ns);
static void end_hang_at_stop(perf__hang_monitor_t *m, size_t i, int64_t now);
static int64_t busy_ns(const perf__hang_monitor_t *m, int64_t since_ns, int64_t until_ns);
static void count_unit(perf__loop_t *loop, int64_t now_ns);
static void read_counts(const perf__loop_t *loop, perf__loop_counts_t *out);
static void add_watched(perf__hang_monitor_t *m, int64_t now);
static void take_delta(perf__hang_monitor_t *m, size_t i, const perf__loop_counts_t *now);
static void post_stats(perf__hang_monitor_t *m);

void perf__loop_busy(perf__loop_t *loop) {
  if (atomic_load_explicit(&loop->nested, memory_order_relaxed)) return;
  int64_t now = perf__now_ns();
  uint64_t w = atomic_load_explicit(&loop->word, memory_order_relaxed);
  if (w & BUSY_BIT) mark_ended(loop, w >> 1, now); /* busy again without idle: a new unit */
  atomic_store_explicit(&loop->busy_since_ns, now, memory_order_relaxed);
  atomic_store_explicit(&loop->word, ((w >> 1) + 1) << 1 | BUSY_BIT, memory_order_release);
}

void perf__loop_busy_label(perf__loop_t *loop, const char *label) {
  if (atomic_load_explicit(&loop->nested, memory_order_relaxed)) return;
  if (label && label[0]) {
    /* The unit about to start: the next epoch (only this thread changes it). */
    uint64_t next = (atomic_load_explicit(&loop->word, memory_order_relaxed) >> 1) + 1;
    size_t n = perf__utf8_prefix(label, PERF_MAX_LABEL_BYTES);
    unsigned seq = atomic_load_explicit(&loop->label_seq, memory_order_relaxed);
    atomic_store_explicit(&loop->label_seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    for (size_t i = 0; i < n; i++) /* bytewise: the monitor may read concurrently */
      atomic_store_explicit(&loop->label[i], label[i], memory_order_relaxed);
    atomic_store_explicit(&loop->label[n], '\0', memory_order_relaxed);
    atomic_store_explicit(&loop->label_epoch, next, memory_order_relaxed);
    atomic_store_explicit(&loop->label_seq, seq + 2, memory_order_release);
  }
  perf__loop_busy(loop);
}

/* The label of unit `epoch` into out ("" when it has none, or when it could
   not be read whole in a few tries). */
static void unit_label(const perf__loop_t *loop, uint64_t epoch, char *out) {
  out[0] = '\0';
  for (int tries = 0; tries < 4; tries++) {
    unsigned seq = atomic_load_explicit(&loop->label_seq, memory_order_acquire);
    if (seq & 1) continue;
    uint64_t named = atomic_load_explicit(&loop->label_epoch, memory_order_relaxed);
    size_t i = 0;
    for (; i < PERF_MAX_LABEL_BYTES; i++) {
      out[i] = atomic_load_explicit(&loop->label[i], memory_order_relaxed);
      if (!out[i]) break;
    }
    out[i] = '\0';
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&loop->label_seq, memory_order_relaxed) != seq) continue;
    if (named != epoch) out[0] = '\0';
    return;
  }
  out[0] = '\0';
}

void perf__loop_idle(perf__loop_t *loop) {
  if (atomic_load_explicit(&loop->nested, memory_order_relaxed)) return;
  uint64_t w = atomic_load_explicit(&loop->word, memory_order_relaxed);
  if (w & BUSY_BIT) mark_ended(loop, w >> 1, perf__now_ns());
  atomic_store_explicit(&loop->word, w & ~(uint64_t)BUSY_BIT, memory_order_release);
}

void perf__loop_heartbeat(perf__loop_t *loop) {
  if (atomic_load_explicit(&loop->nested, memory_order_relaxed)) return;
  int64_t now = perf__now_ns();
  uint64_t w = atomic_load_explicit(&loop->word, memory_order_relaxed);
  if (w & BUSY_BIT) mark_ended(loop, w >> 1, now);
  atomic_store_explicit(&loop->busy_since_ns, now, memory_order_relaxed);
  atomic_store_explicit(&loop->word, ((w >> 1) + 1) << 1 | BUSY_BIT, memory_order_release);
}

int perf__hang_monitor_start(const perf__config_t *cfg, perf__recorder_t *recorder,
                             perf__stats_t *stats, perf__hang_monitor_t **out) {
  perf__hang_monitor_t *m = calloc(1, sizeof *m);
  if (!m) return PERF_E_NO_MEMORY;
  m->cfg = cfg;
  m->loops = perf__loops();
  m->recorder = recorder;
  m->stats = stats;
  m->last_look_ns = perf__now_ns();
  /* The counts so far are not this run's (a forked child's loop counted
     for its parent): read here, before init returns, so a unit that ends
     before the monitor thread first runs is still this run's. */
  refresh(m, m->last_look_ns, true);
  m->next_stats_ns = m->last_look_ns + (int64_t)cfg->batch_max_delay_ms * 1000000;
  int err = perf__worker_start("perf-hang-mon", monitor_main, m, &m->worker);
  if (err) {
    free(m);
    return err;
  }
  *out = m;
  return PERF_OK;
}

int perf__hang_monitor_stop(perf__hang_monitor_t *m, int64_t deadline_ns) {
  /* No I/O, but a capture may wait up to the sampler's timeout (see the
     cpu monitor's stop). */
  if (perf__worker_stop(m->worker, deadline_ns) != PERF_OK) return PERF_E_TIMEOUT;
  free(m);
  return PERF_OK;
}

static void monitor_main(perf__worker_t *worker, void *arg) {
  perf__hang_monitor_t *m = arg;
  perf__stopped_time_init(&m->stopped);
  const int64_t period = (int64_t)m->cfg->batch_max_delay_ms * 1000000;
  while (!perf__worker_stopping(worker)) {
    uint64_t asked = looks_asked(m);
    int64_t now = perf__now_ns();
    refresh(m, now, false);
    add_watched(m, now);
    if (now >= m->next_stats_ns) {
      post_stats(m);
      m->next_stats_ns = now + period;
    }
    int64_t wake_at = m->next_stats_ns;
    if (wake_at > m->next_gone_check_ns) wake_at = m->next_gone_check_ns;
    for (size_t i = 0; i < PERF_SDK_MAX_LOOPS; i++) {
      if (!m->watch[i].watching) continue;
      int64_t at = step(m, i, now);
      /* Stops matter inside a unit of work only (an idle loop has nothing
         to take them out of): the short sleeps only while it is busy. */
      perf__loop_t *loop = &m->loops[i];
      int64_t max_sleep = atomic_load_explicit(&loop->threshold_ns, memory_order_relaxed) / 4;
      bool busy = atomic_load_explicit(&loop->word, memory_order_relaxed) & BUSY_BIT;
      if (busy && at > now + max_sleep) at = now + max_sleep;
      if (at < wake_at) wake_at = at;
    }
    perf__stopped_time_before_sleep(&m->stopped);
    sleep_unless_asked(m, asked, wake_at);
    perf__stopped_time_after_sleep(&m->stopped, wake_at);
  }
  int64_t now = perf__now_ns();
  for (size_t i = 0; i < PERF_SDK_MAX_LOOPS; i++) /* shutting down */
    if (m->watch[i].hang) end_hang_at_stop(m, i, now);
  add_watched(m, perf__now_ns());
  post_stats(m); /* the last period's: the writer stops after the monitors */
}

void perf__hang_monitor_look(perf__hang_monitor_t *m, int64_t deadline_ns) {
  perf__worker_lock(m->worker);
  uint64_t ticket = ++m->looks_asked;
  perf__worker_notify_locked(m->worker);
  while (m->looks_done < ticket && !perf__worker_stopping(m->worker) &&
         perf__now_ns() < deadline_ns)
    perf__worker_wait(m->worker, deadline_ns);
  perf__worker_unlock(m->worker);
}

void perf__hang_monitor_nudge(perf__hang_monitor_t *m) {
  perf__worker_lock(m->worker);
  ++m->looks_asked;
  perf__worker_notify_locked(m->worker);
  perf__worker_unlock(m->worker);
}

/* The looks asked for so far; the look about to be taken answers them. */
static uint64_t looks_asked(perf__hang_monitor_t *m) {
  perf__worker_lock(m->worker);
  uint64_t asked = m->looks_asked;
  perf__worker_unlock(m->worker);
  return asked;
}

/* The look that read `asked` is done: answer it, then sleep until wake_at,
   or until another look is asked for, or stop. */
static void sleep_unless_asked(perf__hang_monitor_t *m, uint64_t asked, int64_t wake_at) {
  perf__worker_lock(m->worker);
  m->looks_done = asked;
  perf__worker_notify_locked(m->worker);
  while (m->looks_asked == asked && !perf__worker_stopping(m->worker) && perf__now_ns() < wake_at)
    perf__worker_wait(m->worker, wake_at);
  perf__worker_unlock(m->worker);
}

/* ---- the registry's loops ------------------------------------------------- */

/* Follow the registry: loops gone or changed are forgotten (their counts
   up to the change go under their old name), new ones adopted (theirs from
   the change on; at start, from now: the counts before are not this
   run's); once a second, loops whose thread is gone are freed. */
static void refresh(perf__hang_monitor_t *m, int64_t now, bool at_start) {
  bool gone_check = now >= m->next_gone_check_ns;
  if (gone_check) m->next_gone_check_ns = now + 1000000000;
  for (size_t i = 0; i < PERF_SDK_MAX_LOOPS; i++) {
    if (gone_check) perf__loop_drop_if_gone(i);
    perf__loop_t *loop = &m->loops[i];
    watch_t *w = &m->watch[i];
    unsigned gen = atomic_load_explicit(&loop->gen, memory_order_acquire);
    bool in_use = atomic_load_explicit(&loop->watched_tid, memory_order_acquire) != 0;
    if (gen & 1 || (w->watching && gen == w->gen)) continue; /* changing, or unchanged */
    if (!w->watching && !in_use) continue;
    perf__loop_counts_t base;
    if (at_start)
      read_counts(loop, &base);
    else if (!read_base(loop, gen, &base))
      continue; /* changed again meanwhile: next look */
    if (w->watching) forget(m, i, now, &base);
    if (in_use) adopt(m, i, gen, &base);
  }
}

/* Loop i changed: its hang ends, its counts up to `until` go under its old
   name. */
static void forget(perf__hang_monitor_t *m, size_t i, int64_t now,
                   const perf__loop_counts_t *until) {
  watch_t *w = &m->watch[i];
  if (w->hang) end_hang_at_stop(m, i, now);
  take_delta(m, i, until);
  w->watching = false;
}

static void adopt(perf__hang_monitor_t *m, size_t i, unsigned gen,
                  const perf__loop_counts_t *from) {
  watch_t *w = &m->watch[i];
  if (!perf__loop_read_name(&m->loops[i], gen, w->name)) return; /* changed: next look */
  w->watching = true;
  w->gen = gen;
  w->watched_ns = 0;
  w->sent = *from;
}

/* The counts noted at generation gen's change; false when it changed
   again meanwhile. */
static bool read_base(const perf__loop_t *loop, unsigned gen, perf__loop_counts_t *out) {
  out->watched_ns = 0;
  out->busy_ns = atomic_load_explicit(&loop->base_busy_ns, memory_order_relaxed);
  for (size_t b = 0; b < PERF__LOOP_STATS_BUCKETS; b++)
    out->units[b] = atomic_load_explicit(&loop->base_units[b], memory_order_relaxed);
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(&loop->gen, memory_order_relaxed) == gen;
}

/* One look at loop i; returns when to look at it again. */
static int64_t step(perf__hang_monitor_t *m, size_t i, int64_t now) {
  perf__loop_t *loop = &m->loops[i];
  watch_t *w = &m->watch[i];
  const int64_t threshold = atomic_load_explicit(&loop->threshold_ns, memory_order_relaxed);
  const int64_t interval = (int64_t)m->cfg->hang_sample_interval_ms * 1000000;
  /* paused first: perf_sdk_resume stores busy_since before clearing it, so
     a monitor that sees the resume also sees the restarted busy_since. */
  bool paused = atomic_load_explicit(&loop->paused, memory_order_acquire);
  uint64_t word = atomic_load_explicit(&loop->word, memory_order_acquire);
  int64_t busy_since = atomic_load_explicit(&loop->busy_since_ns, memory_order_relaxed);
  bool busy = word & BUSY_BIT;

  if (w->hang) {
    if (paused) {
      end_hang(m, i, now);
    } else if (!busy || word >> 1 != w->hang_epoch) {
      end_hang(m, i, unit_end(loop, w->hang_epoch, now));
    } else {
      if (now >= w->next_sample_ns && w->hang->sample_count < m->cfg->hang_max_samples)
        sample_hang(m, i, now);
      /* Look for the end every 10 ms: the end time itself comes from the
         loop (unit_end); looking often only matters for starting to watch
         for the next hang. */
      int64_t next =
          w->hang->sample_count < m->cfg->hang_max_samples ? w->next_sample_ns : now + interval;
      return next < now + END_CHECK_NS ? next : now + END_CHECK_NS;
    }
  }
  int64_t busy_for = busy ? busy_ns(m, busy_since, now) : 0;
  if (!paused && busy && w->cpu_epoch != word >> 1) {
    w->cpu_epoch = word >> 1;
    w->cpu_ns = perf__thread_cpu_ns(atomic_load(&loop->watched_tid));
    w->cpu_at = now;
  }
  if (!paused && busy && busy_for >= threshold) {
    int64_t again = waiting_for_cpu(m, i, threshold, busy_for, now);
    if (again) return again;
    start_hang(m, i, word >> 1, busy_since, now);
    return now + END_CHECK_NS < w->next_sample_ns ? now + END_CHECK_NS : w->next_sample_ns;
  }
  if (!paused && busy) return now + (threshold - busy_for);
  return now + threshold / 2;
}

/* Loop i is past its threshold in the unit the monitor noted (cpu_epoch).
   Runnable but hardly run since then (under 1/64 of the time on its CPU
   clock: a busy thread on a machine with 16 runnable threads a CPU still
   gets 1/16; a loop whose beat waits for its CPU, none): the thread is waiting for a CPU the
   machine's other work holds, not hung in the app's code; an idle loop whose heartbeat is due is
   just that (its beat waits for the CPU too). Returns when to look again (within an eighth of the
   threshold), or 0: a hang (the thread ran, or is blocked, off the CPU by its own doing: a lock,
   I/O). The hang, when it comes, still starts where the unit began. A note younger than a quarter
   of the threshold has measured too little: it is looked at again then. At four thresholds the hang
   starts whatever the thread's share (a loop starved that long is reported late, not never). One
   CPU-clock read, and one /proc read only when the thread hardly ran. */
static int64_t waiting_for_cpu(perf__hang_monitor_t *m, size_t i, int64_t threshold,
                               int64_t busy_for, int64_t now) {
  watch_t *w = &m->watch[i];
  pid_t tid = atomic_load(&m->loops[i].watched_tid);
  int64_t cpu = perf__thread_cpu_ns(tid);
  if (w->cpu_ns < 0 || cpu < 0 || busy_for >= 4 * threshold) return 0;
  int64_t step = threshold / 8 > 1000000 ? threshold / 8 : 1000000;
  if (now - w->cpu_at < threshold / 4) return now + step;
  if ((cpu - w->cpu_ns) * 64 >= now - w->cpu_at) return 0;
  perf__thread_state_t st;
  if (perf__thread_state_read(tid, &st) != PERF_OK || !st.running) return 0;
  return now + step;
}

static void start_hang(perf__hang_monitor_t *m, size_t i, uint64_t epoch, int64_t busy_since,
                       int64_t now) {
  watch_t *w = &m->watch[i];
  perf__loop_t *loop = &m->loops[i];
  perf__modules_t *mods = perf__modules_acquire();
  w->hang = perf__event_new(PERF__EVENT_HANG, mods);
  perf__modules_release(mods);
  if (!w->hang) return; /* out of memory: this hang goes unrecorded */
  PERF__COUNT(m->stats, hangs_detected, 1);
  w->hang_epoch = epoch;
  pid_t tid = atomic_load(&loop->watched_tid);
  w->hang->tid = tid;
  w->hang->start_mono_ns = busy_since;
  w->hang->start_wall_ns = perf__mono_to_wall_ns(busy_since);
  unit_label(loop, epoch, w->hang->label);
  memcpy(w->hang->loop, w->name, sizeof w->hang->loop);
  perf__event_set_thread(w->hang, tid, loop->watched_name, -1);
  w->next_sample_ns = now;
  sample_hang(m, i, now);
}

typedef struct {
  perf__hang_monitor_t *m;
  size_t i;
} hang_ref_t;

/* Still the same unit of work, not paused: the sample belongs to the hang. */
static bool hang_still_running(void *arg) {
  hang_ref_t *r = arg;
  perf__loop_t *loop = &r->m->loops[r->i];
  uint64_t word = atomic_load_explicit(&loop->word, memory_order_acquire);
  return (word & BUSY_BIT) && word >> 1 == r->m->watch[r->i].hang_epoch &&
         !atomic_load(&loop->paused);
}

static void sample_hang(perf__hang_monitor_t *m, size_t i, int64_t now) {
  watch_t *w = &m->watch[i];
  hang_ref_t ref = {m, i};
  perf__capture_sample_checked(w->hang, w->hang->tid, m->stats, hang_still_running, &ref);
  w->hang->duration_ns = busy_ns(m, w->hang->start_mono_ns, perf__now_ns());
  w->next_sample_ns = now + (int64_t)m->cfg->hang_sample_interval_ms * 1000000;
  /* The marker (for a process that dies hung) is written by the writer:
     the hang sampled last. */
  perf__event_t *progress = perf__event_clone(w->hang);
  if (progress) {
    perf__event_finish(progress);
    perf__recorder_progress(m->recorder, progress);
  }
}

static void end_hang(perf__hang_monitor_t *m, size_t i, int64_t end_ns) {
  perf__event_t *ev = m->watch[i].hang;
  m->watch[i].hang = NULL;
  ev->duration_ns = busy_ns(m, ev->start_mono_ns, end_ns);
  /* The marker goes (the process survived this hang), or describes
     another loop's hang still in progress. */
  perf__event_t *other = NULL;
  for (size_t j = 0; j < PERF_SDK_MAX_LOOPS && !other; j++)
    if (m->watch[j].hang) other = perf__event_clone(m->watch[j].hang);
  if (other) perf__event_finish(other);
  perf__recorder_progress(m->recorder, other);
  perf__recorder_record(m->recorder, ev);
}

/* The monitor stops, or the loop changed: the unit may have ended
   already. */
static void end_hang_at_stop(perf__hang_monitor_t *m, size_t i, int64_t now) {
  perf__loop_t *loop = &m->loops[i];
  uint64_t word = atomic_load_explicit(&loop->word, memory_order_acquire);
  uint64_t epoch = m->watch[i].hang_epoch;
  bool same_unit = (word & BUSY_BIT) && word >> 1 == epoch;
  end_hang(m, i, same_unit ? now : unit_end(loop, epoch, now));
}

/* A unit's time from since_ns to until_ns, less the stops of the process. */
static int64_t busy_ns(const perf__hang_monitor_t *m, int64_t since_ns, int64_t until_ns) {
  return until_ns - since_ns - perf__stopped_within(&m->stopped, since_ns, until_ns);
}

static void mark_ended(perf__loop_t *loop, uint64_t epoch, int64_t now_ns) {
  count_unit(loop, now_ns);
  int64_t began = atomic_load_explicit(&loop->busy_since_ns, memory_order_relaxed);
  if (now_ns - began < atomic_load_explicit(&loop->threshold_ns, memory_order_relaxed)) return;
  atomic_store_explicit(&loop->long_unit_end, perf__unit_end_pack(epoch, now_ns),
                        memory_order_relaxed);
}

/* When unit `epoch` ended, or now_ns if that is not known. The loop's
   thread may mark the end after the monitor read now_ns: such an end is
   returned as it is, a little after now_ns (unit_end.h). */
static int64_t unit_end(const perf__loop_t *loop, uint64_t epoch, int64_t now_ns) {
  uint64_t v = atomic_load_explicit(&loop->long_unit_end, memory_order_relaxed);
  int64_t end_ns;
  return perf__unit_end_read(v, epoch, now_ns, &end_ns) ? end_ns : now_ns;
}

/* ---- loop stats ------------------------------------------------------------ */

/* The unit of work in progress ends at now_ns: counted in its duration's
   bucket (marking thread; not while paused: that time is not watched). */
static void count_unit(perf__loop_t *loop, int64_t now_ns) {
  if (atomic_load_explicit(&loop->paused, memory_order_relaxed)) return;
  int64_t took = now_ns - atomic_load_explicit(&loop->busy_since_ns, memory_order_relaxed);
  if (took < 0) took = 0;
  atomic_fetch_add_explicit(&loop->units[perf__loop_stats_bucket(took)], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&loop->busy_total_ns, (uint64_t)took, memory_order_relaxed);
}

static void read_counts(const perf__loop_t *loop, perf__loop_counts_t *out) {
  out->watched_ns = 0;
  out->busy_ns = atomic_load_explicit(&loop->busy_total_ns, memory_order_relaxed);
  for (size_t i = 0; i < PERF__LOOP_STATS_BUCKETS; i++)
    out->units[i] = atomic_load_explicit(&loop->units[i], memory_order_relaxed);
}

/* The time since the previous look was watched, per loop, when the loop
   has had a busy mark (epoch > 0) and is not paused now, less the
   process's stops. */
static void add_watched(perf__hang_monitor_t *m, int64_t now) {
  int64_t from = m->last_look_ns;
  m->last_look_ns = now;
  if (now <= from) return;
  int64_t watched = now - from - perf__stopped_within(&m->stopped, from, now);
  if (watched <= 0) return;
  for (size_t i = 0; i < PERF_SDK_MAX_LOOPS; i++) {
    perf__loop_t *loop = &m->loops[i];
    if (!m->watch[i].watching || atomic_load_explicit(&loop->paused, memory_order_relaxed))
      continue;
    if ((atomic_load_explicit(&loop->word, memory_order_relaxed) >> 1) == 0) continue;
    m->watch[i].watched_ns += (uint64_t)watched;
  }
}

/* What loop i's counters grew by from its last post to `now`, with its
   time watched, into the pending stats (nothing when it has nothing). */
static void take_delta(perf__hang_monitor_t *m, size_t i, const perf__loop_counts_t *now) {
  watch_t *w = &m->watch[i];
  perf__loop_counts_t delta = {0};
  bool any = w->watched_ns > 0;
  delta.watched_ns = w->watched_ns;
  delta.busy_ns = now->busy_ns - w->sent.busy_ns;
  for (size_t b = 0; b < PERF__LOOP_STATS_BUCKETS; b++) {
    delta.units[b] = now->units[b] - w->sent.units[b];
    any = any || delta.units[b] > 0;
  }
  w->sent = *now;
  w->watched_ns = 0;
  if (any) perf__loop_stats_add(&m->pending, w->name, &delta);
}

/* What every loop's counters grew by since the last post, with the time
   watched, to the recorder; nothing when nothing was watched and no unit
   ended. */
static void post_stats(perf__hang_monitor_t *m) {
  for (size_t i = 0; i < PERF_SDK_MAX_LOOPS; i++) {
    if (!m->watch[i].watching) continue;
    perf__loop_counts_t now;
    read_counts(&m->loops[i], &now);
    take_delta(m, i, &now);
  }
  if (m->pending.n_loops == 0) return;
  perf__recorder_loop_stats(m->recorder, &m->pending);
  memset(&m->pending, 0, sizeof m->pending);
}
