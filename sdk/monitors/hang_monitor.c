/*
 * hang_monitor.c - the hang monitor thread (see hang_monitor.h).
 *
 * Not hanging: sleep until busy_since + threshold when the loop is busy
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
#include <sys/prctl.h>

#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "sdk/base/threads.h"
#include "sdk/base/utf8.h"
#include "sdk/base/worker.h"
#include "sdk/monitors/stopped_time.h"
#include "sdk/monitors/unit_end.h"
#include "sdk/pipeline/capture.h"

#define BUSY_BIT 1u
#define END_CHECK_NS 10000000 /* while hanging: how often to look for its end */

struct perf__hang_monitor_s {
  const perf__config_t *cfg;
  perf__loop_t *loop;
  perf__recorder_t *recorder;
  perf__stats_t *stats;
  perf__worker_t *worker; /* the thread, "perf-hang-mon" */
  /* the hang in progress (monitor thread only) */
  perf__event_t *hang;
  uint64_t hang_epoch;
  int64_t next_sample_ns;
  perf__stopped_time_t stopped; /* stops of the process (monitor thread only) */
  /* loop stats (monitor thread only) */
  perf__loop_stats_t sent; /* the loop's counters as of the last post (watched_ns unused) */
  uint64_t watched_ns;     /* watched since the last post */
  int64_t last_look_ns;    /* the previous look, where watched time resumes */
  int64_t next_stats_ns;   /* when the period's stats go */
  /* perf__hang_monitor_look: looks asked for and done (worker lock) */
  uint64_t looks_asked, looks_done;
};

static void monitor_main(perf__worker_t *worker, void *arg);
static uint64_t looks_asked(perf__hang_monitor_t *m);
static void sleep_unless_asked(perf__hang_monitor_t *m, uint64_t asked, int64_t wake_at);
static void mark_ended(perf__loop_t *loop, uint64_t epoch, int64_t now_ns);
static int64_t unit_end(const perf__loop_t *loop, uint64_t epoch, int64_t now_ns);
static int64_t step(perf__hang_monitor_t *m, int64_t now);
static void start_hang(perf__hang_monitor_t *m, uint64_t epoch, int64_t busy_since, int64_t now);
static void sample_hang(perf__hang_monitor_t *m, int64_t now);
static void end_hang(perf__hang_monitor_t *m, int64_t end_ns);
static int64_t busy_ns(const perf__hang_monitor_t *m, int64_t since_ns, int64_t until_ns);
static void count_unit(perf__loop_t *loop, int64_t now_ns);
static void read_counts(const perf__loop_t *loop, perf__loop_stats_t *out);
static void add_watched(perf__hang_monitor_t *m, int64_t now);
static void post_stats(perf__hang_monitor_t *m);

void perf__loop_watch_current_thread(perf__loop_t *loop) {
  char name[16] = "";
  prctl(PR_GET_NAME, name, 0, 0, 0);
  memcpy(loop->watched_name, name, sizeof name);
  atomic_store(&loop->watched_tid, perf__gettid());
}

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

int perf__hang_monitor_start(const perf__config_t *cfg, perf__loop_t *loop,
                             perf__recorder_t *recorder, perf__stats_t *stats,
                             perf__hang_monitor_t **out) {
  perf__hang_monitor_t *m = calloc(1, sizeof *m);
  if (!m) return PERF_E_NO_MEMORY;
  m->cfg = cfg;
  m->loop = loop;
  m->recorder = recorder;
  m->stats = stats;
  /* The counts so far are not this run's (a forked child's loop counted
     for its parent): read here, before init returns, so a unit that ends
     before the monitor thread first runs is still this run's. */
  read_counts(m->loop, &m->sent);
  m->last_look_ns = perf__now_ns();
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
  int64_t max_sleep = (int64_t)m->cfg->hang_threshold_ms * 1000000 / 4;
  const int64_t period = (int64_t)m->cfg->batch_max_delay_ms * 1000000;
  while (!perf__worker_stopping(worker)) {
    uint64_t asked = looks_asked(m);
    int64_t now = perf__now_ns();
    add_watched(m, now);
    if (now >= m->next_stats_ns) {
      post_stats(m);
      m->next_stats_ns = now + period;
    }
    int64_t wake_at = step(m, now);
    if (wake_at > m->next_stats_ns) wake_at = m->next_stats_ns;
    /* Stops matter inside a unit of work only (an idle loop has nothing to
       take them out of): the short sleeps only while it is busy. */
    bool busy = atomic_load_explicit(&m->loop->word, memory_order_relaxed) & BUSY_BIT;
    if (busy && wake_at > now + max_sleep) wake_at = now + max_sleep;
    perf__stopped_time_before_sleep(&m->stopped);
    sleep_unless_asked(m, asked, wake_at);
    perf__stopped_time_after_sleep(&m->stopped, wake_at);
  }
  if (m->hang) { /* shutting down: the unit may have ended already */
    int64_t now = perf__now_ns();
    uint64_t word = atomic_load_explicit(&m->loop->word, memory_order_acquire);
    bool same_unit = (word & BUSY_BIT) && word >> 1 == m->hang_epoch;
    end_hang(m, same_unit ? now : unit_end(m->loop, m->hang_epoch, now));
  }
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

/* One look at the loop; returns when to look again. */
static int64_t step(perf__hang_monitor_t *m, int64_t now) {
  perf__loop_t *loop = m->loop;
  const int64_t threshold = (int64_t)m->cfg->hang_threshold_ms * 1000000;
  const int64_t interval = (int64_t)m->cfg->hang_sample_interval_ms * 1000000;
  /* paused first: perf_sdk_resume stores busy_since before clearing it, so
     a monitor that sees the resume also sees the restarted busy_since. */
  bool paused = atomic_load_explicit(&loop->paused, memory_order_acquire);
  uint64_t word = atomic_load_explicit(&loop->word, memory_order_acquire);
  int64_t busy_since = atomic_load_explicit(&loop->busy_since_ns, memory_order_relaxed);
  bool busy = word & BUSY_BIT;

  if (m->hang) {
    if (paused) {
      end_hang(m, now);
    } else if (!busy || word >> 1 != m->hang_epoch) {
      end_hang(m, unit_end(loop, m->hang_epoch, now));
    } else {
      if (now >= m->next_sample_ns && m->hang->sample_count < m->cfg->hang_max_samples)
        sample_hang(m, now);
      /* Look for the end every 10 ms: the end time itself comes from the
         loop (unit_end); looking often only matters for starting to watch
         for the next hang. */
      int64_t next =
          m->hang->sample_count < m->cfg->hang_max_samples ? m->next_sample_ns : now + interval;
      return next < now + END_CHECK_NS ? next : now + END_CHECK_NS;
    }
  }
  int64_t busy_for = busy ? busy_ns(m, busy_since, now) : 0;
  if (!paused && busy && busy_for >= threshold) {
    start_hang(m, word >> 1, busy_since, now);
    return now + END_CHECK_NS < m->next_sample_ns ? now + END_CHECK_NS : m->next_sample_ns;
  }
  if (!paused && busy) return now + (threshold - busy_for);
  return now + threshold / 2;
}

static void start_hang(perf__hang_monitor_t *m, uint64_t epoch, int64_t busy_since, int64_t now) {
  perf__modules_t *mods = perf__modules_acquire();
  m->hang = perf__event_new(PERF__EVENT_HANG, mods);
  perf__modules_release(mods);
  if (!m->hang) return; /* out of memory: this hang goes unrecorded */
  PERF__COUNT(m->stats, hangs_detected, 1);
  m->hang_epoch = epoch;
  pid_t tid = atomic_load(&m->loop->watched_tid);
  m->hang->tid = tid;
  m->hang->start_mono_ns = busy_since;
  m->hang->start_wall_ns = perf__mono_to_wall_ns(busy_since);
  unit_label(m->loop, epoch, m->hang->label);
  perf__event_set_thread(m->hang, tid, m->loop->watched_name, -1);
  m->next_sample_ns = now;
  sample_hang(m, now);
}

/* Still the same unit of work, not paused: the sample belongs to the hang. */
static bool hang_still_running(void *arg) {
  perf__hang_monitor_t *m = arg;
  uint64_t word = atomic_load_explicit(&m->loop->word, memory_order_acquire);
  return (word & BUSY_BIT) && word >> 1 == m->hang_epoch && !atomic_load(&m->loop->paused);
}

static void sample_hang(perf__hang_monitor_t *m, int64_t now) {
  perf__capture_sample_checked(m->hang, m->hang->tid, m->stats, hang_still_running, m);
  m->hang->duration_ns = busy_ns(m, m->hang->start_mono_ns, perf__now_ns());
  m->next_sample_ns = now + (int64_t)m->cfg->hang_sample_interval_ms * 1000000;
  /* The marker (for a process that dies hung) is written by the writer. */
  perf__event_t *progress = perf__event_clone(m->hang);
  if (progress) {
    perf__event_finish(progress);
    perf__recorder_progress(m->recorder, progress);
  }
}

static void end_hang(perf__hang_monitor_t *m, int64_t end_ns) {
  perf__event_t *ev = m->hang;
  m->hang = NULL;
  ev->duration_ns = busy_ns(m, ev->start_mono_ns, end_ns);
  perf__recorder_progress(m->recorder, NULL); /* delete the marker: the process survived */
  perf__recorder_record(m->recorder, ev);
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

static void read_counts(const perf__loop_t *loop, perf__loop_stats_t *out) {
  out->watched_ns = 0;
  out->busy_ns = atomic_load_explicit(&loop->busy_total_ns, memory_order_relaxed);
  for (size_t i = 0; i < PERF__LOOP_STATS_BUCKETS; i++)
    out->units[i] = atomic_load_explicit(&loop->units[i], memory_order_relaxed);
}

/* The time since the previous look was watched when the loop has had a
   busy mark (epoch > 0) and is not paused now, less the process's stops. */
static void add_watched(perf__hang_monitor_t *m, int64_t now) {
  int64_t from = m->last_look_ns;
  m->last_look_ns = now;
  if (now <= from || atomic_load_explicit(&m->loop->paused, memory_order_relaxed)) return;
  if ((atomic_load_explicit(&m->loop->word, memory_order_relaxed) >> 1) == 0) return;
  int64_t watched = now - from - perf__stopped_within(&m->stopped, from, now);
  if (watched > 0) m->watched_ns += (uint64_t)watched;
}

/* What the counters grew by since the last post, with the time watched,
   to the recorder; nothing when nothing was watched and no unit ended. */
static void post_stats(perf__hang_monitor_t *m) {
  perf__loop_stats_t now, delta = {0};
  read_counts(m->loop, &now);
  bool any = m->watched_ns > 0;
  delta.watched_ns = m->watched_ns;
  delta.busy_ns = now.busy_ns - m->sent.busy_ns;
  for (size_t i = 0; i < PERF__LOOP_STATS_BUCKETS; i++) {
    delta.units[i] = now.units[i] - m->sent.units[i];
    any = any || delta.units[i] > 0;
  }
  if (!any) return;
  perf__recorder_loop_stats(m->recorder, &delta);
  m->sent = now;
  m->watched_ns = 0;
}
