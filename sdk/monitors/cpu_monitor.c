/*
 * cpu_monitor.c - the CPU-usage monitor thread (see cpu_monitor.h).
 *
 * Watching: every tick (a tenth of the window, 20..500 ms) it reads the
 * process CPU clock only, one clock read. The rule, made for shared
 * machines where a busy process's ticks go up and down with its
 * neighbours: the mean usage over the last window is at or above the
 * threshold, and no tick of it fell below half the threshold (a lull, not
 * noise, which starts the window again). The per-thread CPU clocks are read
 * once when such a run of ticks begins and once when it fires, which ranks
 * the threads without touching them in between.
 * Burst: the top-K threads of the window are sampled for cpu_burst_ms, on
 * average cpu_sample_hz times a second at randomized intervals, per unit of
 * their CPU time (sample_burst): only a thread caught running makes a
 * sample, weighted with its CPU time since its previous one. Their CPU
 * share over the burst goes into the event; a burst that caught no thread
 * running records nothing.
 */
#include "sdk/monitors/cpu_monitor.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/clock.h"
#include "sdk/base/hash.h"
#include "sdk/base/log.h"
#include "sdk/base/threads.h"
#include "sdk/base/worker.h"
#include "sdk/monitors/cpu_profile.h"
#include "sdk/monitors/cpu_timer_burst.h"
#include "sdk/monitors/thread_cpu.h"
#include "sdk/pipeline/capture.h"
#include "sdk/sampler/blocked_capture.h"
#include "sdk/sampler/cpu_timers.h"

#define MAX_TRACKED_THREADS 4096
#define MAX_TOP_THREADS 64 /* cpu_top_threads' upper bound (config.c) */
/* CPU a hot thread uses between two captures of a burst: a little more than
   a thread last seen blocked must use before the sampler signals it. */
#define MIN_CPU_BETWEEN_LOOKS_NS (PERF__BLOCKED_EXIT_CPU_NS + 50000)
#define MAX_TICKS 1201 /* ticks of the longest window (600 s at 500 ms) and one */
/* A burst whose threads all stopped running this long ends. Not shorter:
   on a loaded machine runnable threads can wait for a CPU 100 ms and more
   (two cores, load 10: bursts of 5 s ended after 0.2 s). */
#define QUIET_END_NS 500000000
/* The continuous profile's work due this close to a tick waits for it. */
#define PROFILE_SLACK_NS 50000000

/* The ticks of the current run (no lull since its first): a ring of the
   process CPU clock at each tick, oldest first. */
typedef struct {
  int64_t at_ns[MAX_TICKS], cpu_ns[MAX_TICKS];
  size_t first, count;
} run_t;

struct perf__cpu_monitor_s {
  const perf__config_t *cfg;
  perf__recorder_t *recorder;
  perf__stats_t *stats;
  perf__worker_t *worker; /* the thread, "perf-cpu-mon" */
  perf__thread_set_t threads;
  perf__cpu_profile_t *profile; /* the continuous profile; NULL: off */
  run_t run; /* the monitor thread's; allocated with the monitor, by the thread calling init (a
                thread allocating as the app forks could leave a non-fork-safe allocator locked
                in the child, as GCC 12's AddressSanitizer's is) */
};

typedef struct {
  pid_t tid;
  int64_t delta_ns;       /* CPU used during the streak */
  int64_t looked_cpu_ns;  /* its CPU clock at the last tick of the burst */
  int64_t seen_cpu_ns;    /* its CPU clock when it was last captured */
  int64_t weighed_cpu_ns; /* its CPU clock when its last on-CPU sample was taken (at first:
                             the burst's start): the next one stands for the CPU since */
  size_t last_sample;     /* index of that sample in the event's samples; SIZE_MAX: none */
  int64_t start_cpu_ns;   /* its CPU clock when the burst began */
} hot_t;

static void monitor_main(perf__worker_t *worker, void *arg);
static void run_burst(perf__cpu_monitor_t *m, int64_t window_ns);
static size_t sample_burst(perf__cpu_monitor_t *m, perf__event_t *ev, hot_t *hot, size_t k,
                           int64_t start);
static int64_t jittered(int64_t period, uint64_t *rng);
static size_t sample_of(const perf__event_t *ev, pid_t tid, size_t from);
static size_t pick_hottest(perf__cpu_monitor_t *m, hot_t *hot, size_t k);
static bool stopping(perf__cpu_monitor_t *m);
static void sleep_until(perf__cpu_monitor_t *m, int64_t deadline_ns);
static int percent(int64_t cpu_ns, int64_t wall_ns);

int perf__cpu_monitor_start(const perf__config_t *cfg, perf__recorder_t *recorder,
                            perf__stats_t *stats, perf__cpu_monitor_t **out) {
  perf__cpu_monitor_t *m = calloc(1, sizeof *m);
  if (!m) return PERF_E_NO_MEMORY;
  m->cfg = cfg;
  m->recorder = recorder;
  m->stats = stats;
  perf__thread_set_init(&m->threads, MAX_TRACKED_THREADS);
  m->profile = perf__cpu_profile_new(cfg, recorder, stats);
  int err = perf__worker_start("perf-cpu-mon", monitor_main, m, &m->worker);
  if (err) {
    perf__cpu_profile_finish(m->profile);
    free(m);
    return err;
  }
  *out = m;
  return PERF_OK;
}

int perf__cpu_monitor_stop(perf__cpu_monitor_t *m, int64_t deadline_ns) {
  /* No I/O, but a capture may wait for its thread up to the sampler's
     timeout: at exit the deadline wins, and a monitor still capturing is
     left to finish with its memory. */
  if (perf__worker_stop(m->worker, deadline_ns) != PERF_OK) return PERF_E_TIMEOUT;
  perf__thread_set_free(&m->threads);
  free(m);
  return PERF_OK;
}

static void run_restart(run_t *r, int64_t now, int64_t cpu) {
  r->first = 0;
  r->count = 1;
  r->at_ns[0] = now;
  r->cpu_ns[0] = cpu;
}

static void run_add(run_t *r, int64_t now, int64_t cpu) {
  size_t i = (r->first + r->count) % MAX_TICKS;
  if (r->count == MAX_TICKS)
    r->first = (r->first + 1) % MAX_TICKS;
  else
    r->count++;
  r->at_ns[i] = now;
  r->cpu_ns[i] = cpu;
}

/* Mean usage over the last window of the run, or -1 while the run is
   shorter than the window. */
static int run_window_percent(const run_t *r, int64_t window) {
  size_t last = (r->first + r->count - 1) % MAX_TICKS;
  for (size_t k = r->count; k-- > 0;) { /* newest to oldest: the tick a window back */
    size_t i = (r->first + k) % MAX_TICKS;
    if (r->at_ns[last] - r->at_ns[i] >= window)
      return percent(r->cpu_ns[last] - r->cpu_ns[i], r->at_ns[last] - r->at_ns[i]);
  }
  return -1;
}

static void monitor_main(perf__worker_t *worker, void *arg) {
  perf__cpu_monitor_t *m = arg;
  (void)worker; /* the same as m->worker, set before this runs */
  const int64_t window = (int64_t)m->cfg->cpu_window_ms * 1000000;
  int64_t tick = window / 10;
  if (tick < 20000000) tick = 20000000;
  if (tick > 500000000) tick = 500000000;
  const int threshold = (int)m->cfg->cpu_threshold_percent;
  run_t *run = &m->run;
  int64_t last = perf__now_ns(), last_cpu = perf__process_cpu_ns();
  bool running = false; /* a run of ticks at or above half the threshold */
  while (!stopping(m)) {
    sleep_until(m, last + tick);
    if (stopping(m)) break;
    int64_t now = perf__now_ns(), cpu = perf__process_cpu_ns();
    bool lull = percent(cpu - last_cpu, now - last) * 2 < threshold;
    if (lull) {
      running = false;
    } else if (!running) {
      running = true;
      run_restart(run, last, last_cpu);
      perf__thread_set_read(&m->threads); /* per-thread baseline for the ranking */
    }
    if (running) run_add(run, now, cpu);
    last = now;
    last_cpu = cpu;
    if (running && run_window_percent(run, window) >= threshold) {
      /* The burst arms its own timers at its own rate: the continuous
         profile pauses, and takes the burst's samples into its window. */
      perf__cpu_profile_pause(m->profile);
      run_burst(m, now - run->at_ns[run->first]);
      perf__cpu_profile_resume(m->profile);
      running = false;
      int64_t quiet_until = perf__now_ns() + (int64_t)m->cfg->cpu_cooldown_ms * 1000000;
      while (!stopping(m) && perf__now_ns() < quiet_until)
        sleep_until(m, quiet_until);
      last = perf__now_ns();
      last_cpu = perf__process_cpu_ns();
    }
  }
  /* The window so far is recorded before the writer stops. */
  perf__cpu_profile_finish(m->profile);
  m->profile = NULL;
}

/* Sleep until deadline_ns (or until stop is asked), polling the
   continuous profile whenever it is due meanwhile. */
static void sleep_until(perf__cpu_monitor_t *m, int64_t deadline_ns) {
  int64_t since = 0; /* woken for the profile: its CPU clock before the sleep */
  while (m->profile && !stopping(m)) {
    int64_t due = perf__cpu_profile_poll(m->profile, since);
    if (due >= deadline_ns - PROFILE_SLACK_NS) break; /* done at the deadline's wake-up */
    since = perf__cpu_profile_self_ns();
    perf__worker_sleep_until(m->worker, due);
    if (perf__now_ns() >= deadline_ns) {
      perf__cpu_profile_poll(m->profile, since);
      return;
    }
  }
  perf__worker_sleep_until(m->worker, deadline_ns);
}

static void run_burst(perf__cpu_monitor_t *m, int64_t window_ns) {
  /* Deltas over the streak: who was hot. Without them (out of memory, no
     /proc) there is no burst: stale deltas would rank the wrong threads. */
  if (perf__thread_set_read(&m->threads) != 0) return;
  size_t k = m->cfg->cpu_top_threads;
  if (k > MAX_TOP_THREADS) k = MAX_TOP_THREADS;
  hot_t *hot = calloc(k, sizeof *hot);
  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *ev = hot && mods ? perf__event_new(PERF__EVENT_CPU, mods) : NULL;
  perf__modules_release(mods);
  if (!ev || (k = pick_hottest(m, hot, k)) == 0) {
    free(hot);
    perf__event_free(ev);
    return;
  }
  PERF__COUNT(m->stats, cpu_bursts, 1);
  ev->weighted = true;
  int64_t start = perf__now_ns(), start_cpu = perf__process_cpu_ns();
  ev->start_mono_ns = start;
  ev->start_wall_ns = perf__mono_to_wall_ns(start);
  ev->tid = hot[0].tid;
  perf__thread_set_read(&m->threads); /* baseline for the burst's per-thread shares */
  for (size_t i = 0; i < k; i++) {
    hot[i].looked_cpu_ns = hot[i].seen_cpu_ns = hot[i].weighed_cpu_ns = hot[i].start_cpu_ns =
        perf__thread_cpu_ns(hot[i].tid);
    hot[i].last_sample = SIZE_MAX;
  }
  /* Sampled by the threads' own CPU-clock timers where the kernel sends
     their signals only on the way back to user mode; else, or when no
     timer could be armed, by the monitor's looks. */
  long timed = -1;
  if (perf__cpu_timer_burst_enabled()) {
    pid_t tids[MAX_TOP_THREADS];
    int64_t start_cpu[MAX_TOP_THREADS], expect_cpu[MAX_TOP_THREADS];
    const int64_t burst_ns = (int64_t)m->cfg->cpu_burst_ms * 1000000;
    const int64_t period = 1000000000LL / m->cfg->cpu_sample_hz;
    for (size_t i = 0; i < k; i++) {
      tids[i] = hot[i].tid;
      start_cpu[i] = hot[i].weighed_cpu_ns;
      /* At its rate over the streak. */
      expect_cpu[i] =
          window_ns > 0 ? (int64_t)((double)hot[i].delta_ns / (double)window_ns * (double)burst_ns)
                        : burst_ns;
    }
    /* Threads started during the burst were not there to be ranked: each
       that runs is sampled too, up to the most timers a profile arms. */
    timed = perf__cpu_timer_burst(m->worker, m->stats, ev, &m->threads, PERF__CPU_TIMERS_MAX, tids,
                                  start_cpu, expect_cpu, k, m->cfg->cpu_sample_hz, start + burst_ns,
                                  QUIET_END_NS > 10 * period ? QUIET_END_NS : 10 * period);
  }
  size_t on_cpu = timed >= 0 ? (size_t)timed : sample_burst(m, ev, hot, k, start);
  int64_t wall = perf__now_ns() - start;
  ev->duration_ns = wall;
  ev->cpu_percent = percent(perf__process_cpu_ns() - start_cpu, wall);
  if (on_cpu == 0) { /* no thread was caught running: nothing says where CPU went */
    PERF__COUNT(m->stats, cpu_bursts_empty, 1);
    free(hot);
    perf__event_free(ev);
    return;
  }
  /* Each thread's share from its own clock (the burst may have read the
     thread set since its baseline); a thread gone has none. */
  int64_t hottest = -1;
  for (size_t i = 0; i < k; i++) {
    int64_t cpu = perf__thread_cpu_ns(hot[i].tid), used = cpu - hot[i].start_cpu_ns;
    char name[16];
    perf__thread_name(hot[i].tid, name, sizeof name);
    perf__event_set_thread(ev, hot[i].tid, name, cpu >= 0 ? percent(used, wall) : -1);
    if (cpu >= 0 && used > hottest) { /* the event's thread: hottest during the burst */
      hottest = used;
      ev->tid = hot[i].tid;
    }
  }
  free(hot);
  perf__cpu_profile_add_burst(m->profile, ev);
  perf__recorder_record(m->recorder, ev);
}

/* The burst's samples, per unit of each thread's CPU time: at each tick
   (1/cpu_sample_hz apart on average, each interval drawn uniformly from
   half to one and a half periods, so work that repeats with the period
   cannot hide from it) every hot thread that used MIN_CPU_BETWEEN_LOOKS_NS
   of CPU since it was last captured is captured. One found running is an
   on-CPU sample standing for its CPU time since its previous on-CPU
   sample: a thread caught running rarely (short bursts between long
   waits) still gets all of its CPU time, on the stacks it was caught in.
   One found blocked is not a CPU sample (counted, left out); its CPU time
   goes to its next on-CPU sample. Returns the on-CPU samples taken. */
static size_t sample_burst(perf__cpu_monitor_t *m, perf__event_t *ev, hot_t *hot, size_t k,
                           int64_t start) {
  pid_t tids[MAX_TOP_THREADS];
  uint64_t weights[MAX_TOP_THREADS];
  bool on_cpu[MAX_TOP_THREADS];
  size_t which[MAX_TOP_THREADS], taken = 0;
  int64_t cpu_at[MAX_TOP_THREADS];
  const int64_t period = 1000000000LL / m->cfg->cpu_sample_hz;
  const int64_t end = start + (int64_t)m->cfg->cpu_burst_ms * 1000000;
  uint64_t rng = perf__mix64((uint64_t)start ^ ((uint64_t)perf__gettid() << 32));
  int64_t last_ran = start; /* the burst ends early once its threads stop running */
  for (int64_t next = start + jittered(period, &rng); next <= end && !stopping(m);
       next += jittered(period, &rng)) {
    perf__worker_sleep_until(m->worker, next);
    /* Woken late (this thread was not scheduled): go on from now. Ticks
       caught up back to back would find the threads' clocks still, and
       end the burst as if they had stopped running. */
    int64_t now = perf__now_ns();
    if (now - next > period) next = now;
    if (next - last_ran > QUIET_END_NS && next - last_ran > 10 * period) break;
    size_t n = 0;
    for (size_t i = 0; i < k; i++) {
      int64_t cpu = perf__thread_cpu_ns(hot[i].tid);
      if (cpu > hot[i].looked_cpu_ns) last_ran = next;
      hot[i].looked_cpu_ns = cpu;
      /* Looked at again once it ran past the sampler's guard for a thread
         last seen blocked: a thread that blocks every few microseconds of
         work can then be caught running, not only ever found waiting. */
      if (cpu < hot[i].seen_cpu_ns + MIN_CPU_BETWEEN_LOOKS_NS) continue;
      hot[i].seen_cpu_ns = cpu;
      tids[n] = hot[i].tid;
      weights[n] = (uint64_t)(cpu - hot[i].weighed_cpu_ns);
      cpu_at[n] = cpu;
      which[n++] = i;
    }
    size_t off_cpu = 0, before = ev->sample_count;
    if (n == 0 || perf__capture_cpu_samples(ev, tids, weights, n, on_cpu, &off_cpu, m->stats))
      continue;
    PERF__COUNT(m->stats, cpu_samples_off_cpu, off_cpu);
    for (size_t j = 0; j < n; j++)
      if (on_cpu[j]) {
        hot_t *h = &hot[which[j]];
        h->weighed_cpu_ns = cpu_at[j];
        h->last_sample = sample_of(ev, h->tid, before);
        taken++;
      }
  }
  /* What a thread used after its last on-CPU sample goes to that sample,
     as what it used before its first goes to the first: its samples add
     up to its CPU time over the burst. */
  for (size_t i = 0; i < k; i++) {
    int64_t cpu = perf__thread_cpu_ns(hot[i].tid);
    if (hot[i].last_sample != SIZE_MAX && cpu > hot[i].weighed_cpu_ns)
      perf__event_add_weight(ev, hot[i].last_sample, (uint64_t)(cpu - hot[i].weighed_cpu_ns));
  }
  return taken;
}

/* The sample of tid the last capture added (at or after index `from`), or
   SIZE_MAX (the event was full). */
static size_t sample_of(const perf__event_t *ev, pid_t tid, size_t from) {
  for (size_t i = ev->sample_count; i-- > from;)
    if (ev->samples[i].tid == tid) return i;
  return SIZE_MAX;
}

/* An interval drawn uniformly from [period / 2, 3 * period / 2). */
static int64_t jittered(int64_t period, uint64_t *rng) {
  *rng += 0x9e3779b97f4a7c15ULL; /* splitmix64 */
  uint64_t r = perf__mix64(*rng);
  return period / 2 + (int64_t)(r % (uint64_t)(period > 0 ? period : 1));
}

/* The k threads that used the most CPU between the last two reads, hottest
   first, leaving out the SDK's own threads (every perf__worker: the
   monitors, the writer, the uploader). */
static size_t pick_hottest(perf__cpu_monitor_t *m, hot_t *hot, size_t k) {
  size_t n = 0;
  for (size_t i = 0; i < m->threads.count; i++) {
    const perf__thread_cpu_t *t = &m->threads.threads[i];
    if (t->delta_ns <= 0 || perf__worker_is_sdk_thread(t->tid)) continue;
    if (n < k)
      n++;
    else if (t->delta_ns <= hot[k - 1].delta_ns)
      continue;
    hot[n - 1] = (hot_t){.tid = t->tid, .delta_ns = t->delta_ns, .last_sample = SIZE_MAX};
    /* then bubble it up */
    for (size_t j = n - 1; j > 0 && hot[j - 1].delta_ns < hot[j].delta_ns; j--) {
      hot_t swap = hot[j - 1];
      hot[j - 1] = hot[j];
      hot[j] = swap;
    }
  }
  return n;
}

static bool stopping(perf__cpu_monitor_t *m) {
  return perf__worker_stopping(m->worker);
}

static int percent(int64_t cpu_ns, int64_t wall_ns) {
  return wall_ns > 0 ? (int)(cpu_ns * 100 / wall_ns) : 0;
}
