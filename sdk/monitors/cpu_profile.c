/*
 * cpu_profile.c - the continuous CPU profile (see cpu_profile.h). Runs on
 * perf-cpu-mon, between the CPU monitor's ticks.
 *
 * Sampling: one timer session (sdk/sampler/cpu_timers.h) held open while
 * the profile runs; each thread of the app's, as the thread set's reads
 * (once a second) find them, gets a timer of 1/hz of its CPU time (one
 * that does not run never expires); past the 64 timers a thread that ran
 * takes the place of one idle for IDLE_DISARM_NS; a thread gone has its
 * timer deleted. The ring is drained as seldom as it allows at the rate
 * its records come in (RECORDS_PER_DRAIN of its 128, 10 ms to 1 s apart;
 * after a drain that found none, twice the last interval).
 *
 * Weights: each sample stands for the period of CPU time its timer had
 * when it was drained; at the window's end each thread's samples are
 * scaled so that they add up to its CPU clock over the window (the CPU
 * timers expire at the kernel's tick, uniformly over the CPU time the
 * thread burns, as for a burst: cpu_timer_burst.c says why equal shares
 * are right), whatever rates the budget gave it meanwhile. A burst's
 * samples come in with the CPU time the burst gave them.
 *
 * Budget: four times a second the profile adds up what it cost since the
 * last time: the signals' part, the handler's time on the sampled threads
 * (on their CPU clocks, measured inside it) plus DELIVERY_NS per signal for
 * the kernel's part (not measurable from the handler), and the monitor's
 * part, this thread's own CPU clock in the profile's work outside bursts
 * (its drains, reads and aggregation, and the wake-ups it caused);
 * cpu_profile_budget.c turns them into the next step's rate.
 */
#include "sdk/monitors/cpu_profile.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "sdk/base/threads.h"
#include "sdk/base/worker.h"
#include "sdk/monitors/cpu_profile_budget.h"
#include "sdk/monitors/cpu_profile_table.h"
#include "sdk/monitors/thread_cpu.h"
#include "sdk/sampler/cpu_timers.h"

#define WINDOW_NS 60000000000LL
#define READ_NS 1000000000LL /* the thread set's reads */
#define STEP_NS PERF__PROFILE_STEP_NS
#define SLACK_NS 50000000LL       /* what is due this soon is done at this wake-up */
#define FIRST_READ_NS 100000000LL /* the second read after the start: who runs */
#define IDLE_DISARM_NS 10000000000LL
#define RECORDS_PER_DRAIN 64
#define MIN_DRAIN_NS 10000000LL
#define MAX_DRAIN_NS 1000000000LL
#define FIRST_DRAIN_NS 20000000LL
/* The kernel's part of one timer signal on the sampled thread (the
   expiry, the signal frame, sigreturn), which the handler cannot time: a
   signal a thread sends itself with an empty handler costs it 4 us round
   trip on the machine of bench/README.md (sample_cost_bench). */
#define DELIVERY_NS 4000
#define MAX_THREADS PERF__EVENT_MAX_THREADS
#define MAX_TRACKED_THREADS 4096

typedef struct {
  pid_t tid;
  bool armed;
  int64_t cpu0_ns; /* its CPU clock when the window began (or before it was first seen) */
  int64_t cpu_ns;  /* at the last reading */
  int64_t ran_ns;  /* monotonic time its clock was last seen moving */
  uint64_t raw_ns; /* its samples' weights before scaling */
  uint32_t samples;
} prof_thread_t;

struct perf__cpu_profile_s {
  const perf__config_t *cfg;
  perf__recorder_t *recorder;
  perf__stats_t *stats;
  perf__profile_table_t table;
  perf__thread_set_t set;
  perf__modules_t *mods; /* the timers' session's snapshot (a reference); NULL: none */
  prof_thread_t threads[MAX_THREADS];
  size_t nthreads;
  unsigned hz;
  int64_t period_ns;
  int64_t window_ns, window_start_ns;
  int64_t next_read_ns, next_drain_ns, last_drain_ns;
  uint64_t drained; /* records handed over since the last drain interval was sized */
  bool paused;
  bool warned; /* that it could not sample (said once) */
  /* The budget: the counters at the last accounting, the cost since the
     last step and its parts, and the controller. */
  uint64_t signals0, handler0_ns;
  uint64_t own_ns;  /* the monitor's CPU time in the profile, not accounted yet */
  uint64_t ship_ns; /* of which the last window's end (its event, the timers armed again) */
  uint64_t cost_ns, cost_us_rest;
  uint64_t step_self_ns; /* the monitor's part of cost_ns */
  int64_t step_ns, next_step_ns;
  perf__profile_budget_t budget;
};

static unsigned g_test_window_ms, g_test_entries;

static void start_session(perf__cpu_profile_t *p);
static void end_session(perf__cpu_profile_t *p);
static void drain(perf__cpu_profile_t *p, int64_t now);
static void add_sample(void *arg, const perf__cpu_timer_sample_t *s);
static void read_threads(perf__cpu_profile_t *p, int64_t now);
static prof_thread_t *thread_of(perf__cpu_profile_t *p, pid_t tid, bool add, int64_t cpu0_ns);
static void arm(perf__cpu_profile_t *p, prof_thread_t *th);
static bool disarm_idlest(perf__cpu_profile_t *p, int64_t now);
static int64_t poll_due(perf__cpu_profile_t *p);
static void account(perf__cpu_profile_t *p);
static void rebase(perf__cpu_profile_t *p);
static void budget_step(perf__cpu_profile_t *p, int64_t now);
static void set_rate(perf__cpu_profile_t *p, unsigned hz, int64_t now);
static void ship_window(perf__cpu_profile_t *p, int64_t now);
static void new_window(perf__cpu_profile_t *p, int64_t now);
static int64_t self_cpu_ns(void);

perf__cpu_profile_t *perf__cpu_profile_new(const perf__config_t *cfg, perf__recorder_t *recorder,
                                           perf__stats_t *stats) {
  if (!cfg->cpu_profile_hz) return NULL;
  if (!perf__cpu_timers_supported()) {
    perf__log(PERF__LOG_WARN,
              "cpu_profile_hz = %u: the continuous CPU profile needs CPU-clock "
              "timers (x86_64, Linux 5.11 or later); it is off on this system",
              cfg->cpu_profile_hz);
    return NULL;
  }
  perf__cpu_profile_t *p = calloc(1, sizeof *p);
  size_t entries = g_test_entries ? g_test_entries : PERF__PROFILE_TABLE_ENTRIES;
  if (!p || perf__profile_table_init(&p->table, entries, 32 * entries) != PERF_OK) {
    free(p);
    return NULL;
  }
  p->cfg = cfg;
  p->recorder = recorder;
  p->stats = stats;
  p->window_ns = g_test_window_ms ? (int64_t)g_test_window_ms * 1000000 : WINDOW_NS;
  perf__thread_set_init(&p->set, MAX_TRACKED_THREADS);
  set_rate(p, cfg->cpu_profile_hz, perf__now_ns());
  perf__profile_budget_init(&p->budget, cfg->cpu_profile_budget_permille, cfg->cpu_profile_hz,
                            perf__now_ns());
  perf__cpu_timers_measure_cost(true);
  return p;
}

int64_t perf__cpu_profile_poll(perf__cpu_profile_t *p, int64_t since_cpu_ns) {
  int64_t start_cpu = since_cpu_ns ? since_cpu_ns : self_cpu_ns();
  int64_t next = poll_due(p);
  int64_t own = self_cpu_ns() - start_cpu;
  p->own_ns += own > 0 ? (uint64_t)own : 0;
  return next;
}

/* The work of a poll (see perf__cpu_profile_poll); what is due within
   SLACK_NS is done now, so that it shares this wake-up. */
static int64_t poll_due(perf__cpu_profile_t *p) {
  int64_t now = perf__now_ns();
  if (p->paused) return now + READ_NS;
  if (!p->window_start_ns) { /* the first poll: the baseline of everything */
    new_window(p, now);
    read_threads(p, now);
    start_session(p);
    rebase(p);
    p->step_ns = now;
    p->next_read_ns = now + FIRST_READ_NS;
    p->next_step_ns = now + STEP_NS;
    return p->mods && p->next_drain_ns < p->next_read_ns ? p->next_drain_ns : p->next_read_ns;
  }
  int64_t soon = now + SLACK_NS;
  if (soon >= p->next_drain_ns) drain(p, now);
  if (soon >= p->next_read_ns) {
    read_threads(p, now);
    p->next_read_ns = now + READ_NS;
  }
  if (soon >= p->next_step_ns) {
    budget_step(p, now);
    p->next_step_ns = now + STEP_NS;
  }
  if (soon - p->window_start_ns >= p->window_ns) {
    int64_t ship_cpu = self_cpu_ns();
    drain(p, now); /* the window's samples are all in it */
    ship_window(p, now);
    /* Modules came or went (a library the app loaded; also the ones the
       writer loads around events): the next window walks with the rules
       of now. Once a window at most: every thread is armed again. */
    perf__modules_t *mods = perf__modules_acquire();
    if (mods && mods != p->mods) {
      end_session(p);
      start_session(p);
    }
    perf__modules_release(mods);
    /* Once a window: in the budget's rates as a share of the window, not
       as the step's spike. */
    p->ship_ns = (uint64_t)(self_cpu_ns() - ship_cpu);
  }
  int64_t next = p->next_drain_ns < p->next_read_ns ? p->next_drain_ns : p->next_read_ns;
  if (p->next_step_ns < next) next = p->next_step_ns;
  int64_t end = p->window_start_ns + p->window_ns;
  return next < end ? next : end;
}

void perf__cpu_profile_pause(perf__cpu_profile_t *p) {
  if (!p || p->paused || !p->window_start_ns) return;
  int64_t start_cpu = self_cpu_ns();
  end_session(p);
  p->own_ns += (uint64_t)(self_cpu_ns() - start_cpu);
  account(p); /* what the profile cost up to here; the burst's cost is its own */
  p->paused = true;
}

void perf__cpu_profile_resume(perf__cpu_profile_t *p) {
  if (!p || !p->paused) return;
  p->paused = false;
  rebase(p); /* the burst's signals are not the profile's */
  int64_t start_cpu = self_cpu_ns();
  start_session(p);
  p->own_ns += (uint64_t)(self_cpu_ns() - start_cpu);
}

void perf__cpu_profile_add_burst(perf__cpu_profile_t *p, const perf__event_t *burst) {
  if (!p || !burst->weighted) return;
  for (size_t i = 0; i < burst->sample_count; i++) {
    const perf__sample_t *s = &burst->samples[i];
    if (s->stack < 0 || !s->weight_ns) continue;
    const perf__stack_t *st = &burst->stacks[s->stack];
    prof_thread_t *th = thread_of(p, s->tid, true, -1);
    if (perf__profile_table_add(&p->table, s->tid, (perf__state_t)s->state.state,
                                &burst->frames[st->first], st->depth, st->end,
                                s->weight_ns) != PERF_OK) {
      PERF__COUNT(p->stats, cpu_profile_samples_dropped, 1);
      continue;
    }
    if (th) {
      th->raw_ns += s->weight_ns;
      th->samples++;
    }
  }
}

void perf__cpu_profile_finish(perf__cpu_profile_t *p) {
  if (!p) return;
  if (!p->paused && p->window_start_ns) {
    end_session(p);
    account(p);
  }
  if (p->window_start_ns) ship_window(p, perf__now_ns());
  perf__cpu_timers_measure_cost(false);
  perf__modules_release(p->mods);
  perf__profile_table_free(&p->table);
  perf__thread_set_free(&p->set);
  free(p);
}

void perf__cpu_profile_set_testing(unsigned window_ms, unsigned entries) {
  g_test_window_ms = window_ms;
  g_test_entries = entries;
}

/* ---- sampling ------------------------------------------------------------- */

/* Open the timers' session on the modules of now and arm the threads
   known. */
static void start_session(perf__cpu_profile_t *p) {
  perf__modules_release(p->mods);
  p->mods = perf__modules_acquire();
  int err = p->mods ? perf__cpu_timers_begin(p->mods) : PERF_E_NO_MEMORY;
  if (err) {
    if (!p->warned)
      perf__log(
          PERF__LOG_WARN, "the continuous CPU profile cannot sample: %s%s", perf_strerror(err),
          err == PERF_E_UNSUPPORTED ? " (PERF_SDK_UNWIND_MODE=stack_copy has no CPU timers)" : "");
    p->warned = true;
    perf__modules_release(p->mods);
    p->mods = NULL;
    return;
  }
  int64_t now = perf__now_ns();
  for (size_t i = 0; i < p->nthreads; i++)
    arm(p, &p->threads[i]);
  p->last_drain_ns = now;
  p->drained = 0;
  /* Soon: the threads' first samples learn their stacks and the rules
     their walks lack, compiled as they are drained. */
  p->next_drain_ns = now + FIRST_DRAIN_NS;
}

/* Delete every timer; what the ring holds goes into the window. */
static void end_session(perf__cpu_profile_t *p) {
  if (!p->mods) return;
  uint64_t not_taken = perf__cpu_timers_end(add_sample, p);
  PERF__COUNT(p->stats, samples_failed, not_taken);
  for (size_t i = 0; i < p->nthreads; i++)
    p->threads[i].armed = false;
}

static void drain(perf__cpu_profile_t *p, int64_t now) {
  if (!p->mods) return;
  uint64_t before = p->drained;
  uint64_t not_taken = perf__cpu_timers_drain(add_sample, p);
  PERF__COUNT(p->stats, samples_failed, not_taken);
  /* The next drain when the ring holds about RECORDS_PER_DRAIN records at
     the rate they came in (a quarter more); soon after samples were not
     taken (the ring was full, or rules and stack bounds were learned).
     After a drain that found nothing, twice the last interval: a thread
     that starts running after a quiet spell has its stack learned within
     about the time it ran, not a whole MAX_DRAIN_NS later. */
  double elapsed = (double)(now - p->last_drain_ns);
  double rate = elapsed > 0 ? (double)(p->drained - before + not_taken) * 1.25e9 / elapsed : 0;
  int64_t next = rate > 0 ? (int64_t)(RECORDS_PER_DRAIN * 1e9 / rate)
                          : 2 * (p->next_drain_ns - p->last_drain_ns);
  if (not_taken) next = MIN_DRAIN_NS;
  next = next < MIN_DRAIN_NS ? MIN_DRAIN_NS : next > MAX_DRAIN_NS ? MAX_DRAIN_NS : next;
  p->last_drain_ns = now;
  p->next_drain_ns = now + next;
}

static void add_sample(void *arg, const perf__cpu_timer_sample_t *s) {
  perf__cpu_profile_t *p = arg;
  p->drained++;
  perf__stack_end_t end =
      perf__stack_end_of(s->status == PERF__WALK_DEPTH ? PERF_E_TRUNCATED : PERF_OK, s->status);
  if (perf__profile_table_add(&p->table, s->tid, PERF__STATE_RUNNING, s->pcs, s->count, end,
                              (uint64_t)p->period_ns) != PERF_OK) {
    PERF__COUNT(p->stats, cpu_profile_samples_dropped, 1);
    return;
  }
  prof_thread_t *th = thread_of(p, s->tid, true, -1);
  if (th) {
    th->raw_ns += (uint64_t)p->period_ns;
    th->samples++;
  }
}

/* Read the thread set: every thread of the app's has a timer (a timer
   of a thread that does not run never expires, and one that starts
   running after a long sleep is sampled from its first period), up to
   the timers a profile has: past them a thread that ran takes the place
   of one idle for IDLE_DISARM_NS. A thread gone has its timer deleted.
   Not while an SDK worker starts (its thread runs before its tid is
   registered). */
static void read_threads(perf__cpu_profile_t *p, int64_t now) {
  if (perf__worker_starting() || perf__thread_set_read(&p->set) != PERF_OK) return;
  for (size_t i = 0; i < p->nthreads; i++) {
    prof_thread_t *th = &p->threads[i];
    if (th->armed && !perf__thread_set_find(&p->set, th->tid)) { /* gone */
      perf__cpu_timers_disarm(th->tid);
      th->armed = false;
    }
  }
  for (size_t i = 0; i < p->set.count; i++) {
    const perf__thread_cpu_t *t = &p->set.threads[i];
    if (perf__worker_is_sdk_thread(t->tid)) continue;
    prof_thread_t *th = thread_of(p, t->tid, true, t->cpu_ns - t->delta_ns);
    if (!th) continue;
    th->cpu_ns = t->cpu_ns;
    if (t->delta_ns > 0 || !th->ran_ns) th->ran_ns = now;
    arm(p, th);
    if (!th->armed && t->delta_ns > 0 && disarm_idlest(p, now)) arm(p, th);
    /* Armed while it ran, blocked now: its first samples once it runs again
       are taken. */
    if (th->armed) perf__cpu_timers_learn_bounds(th->tid);
  }
}

/* Give back the timer of the armed thread idle the longest, when it was
   idle for IDLE_DISARM_NS; whether one was. */
static bool disarm_idlest(perf__cpu_profile_t *p, int64_t now) {
  prof_thread_t *idlest = NULL;
  for (size_t i = 0; i < p->nthreads; i++) {
    prof_thread_t *th = &p->threads[i];
    if (th->armed && now - th->ran_ns > IDLE_DISARM_NS && (!idlest || th->ran_ns < idlest->ran_ns))
      idlest = th;
  }
  if (!idlest) return false;
  perf__cpu_timers_disarm(idlest->tid);
  idlest->armed = false;
  return true;
}

/* The window's record of tid; added when `add` (its CPU clock at the
   window's start cpu0_ns; -1: read now) while there is room; else NULL. */
static prof_thread_t *thread_of(perf__cpu_profile_t *p, pid_t tid, bool add, int64_t cpu0_ns) {
  for (size_t i = 0; i < p->nthreads; i++)
    if (p->threads[i].tid == tid) return &p->threads[i];
  if (!add || p->nthreads == MAX_THREADS) return NULL;
  int64_t cpu = perf__thread_cpu_ns(tid);
  prof_thread_t *th = &p->threads[p->nthreads++];
  *th = (prof_thread_t){tid, false, cpu0_ns >= 0 ? cpu0_ns : cpu, cpu, 0, 0, 0};
  return th;
}

static void arm(perf__cpu_profile_t *p, prof_thread_t *th) {
  if (p->mods && !th->armed) th->armed = perf__cpu_timers_arm(th->tid, p->period_ns) == PERF_OK;
}

/* ---- the budget ----------------------------------------------------------- */

/* Add what the profile cost since the last call to cost_ns: the
   handlers' signals since, and the monitor's own time in the profile. */
static void account(perf__cpu_profile_t *p) {
  uint64_t signals, handler_ns;
  perf__cpu_timers_cost(&signals, &handler_ns);
  p->cost_ns += (signals - p->signals0) * DELIVERY_NS + (handler_ns - p->handler0_ns) + p->own_ns;
  p->step_self_ns += p->own_ns;
  p->own_ns = 0;
  p->signals0 = signals;
  p->handler0_ns = handler_ns;
}

/* The handlers' counters from here on (what they did before, a burst's
   signals, is not the profile's). */
static void rebase(perf__cpu_profile_t *p) {
  perf__cpu_timers_cost(&p->signals0, &p->handler0_ns);
}

/* A step of the budget: what the profile cost since the last, counted,
   and the rate for the next step. */
static void budget_step(perf__cpu_profile_t *p, int64_t now) {
  account(p);
  perf__profile_cost_t cost = {p->cost_ns - p->step_self_ns, p->step_self_ns, p->ship_ns,
                               p->window_ns};
  uint64_t all = p->cost_ns;
  p->cost_ns = p->step_self_ns = p->ship_ns = 0;
  uint64_t us = all / 1000 + (p->cost_us_rest + all % 1000) / 1000;
  p->cost_us_rest = (p->cost_us_rest + all % 1000) % 1000;
  PERF__COUNT(p->stats, cpu_profile_cost_us, us);
  bool lowered;
  unsigned hz =
      perf__profile_budget_step(&p->budget, p->hz, now, now - p->step_ns, &cost, &lowered);
  p->step_ns = now;
  if (lowered) PERF__COUNT(p->stats, cpu_profile_rate_lowered, 1);
  if (hz != p->hz) set_rate(p, hz, now);
}

/* The rate for every armed thread from now on. */
static void set_rate(perf__cpu_profile_t *p, unsigned hz, int64_t now) {
  perf__profile_budget_rate_changed(&p->budget, p->hz, hz, now);
  p->hz = hz;
  p->period_ns = 1000000000LL / hz;
  atomic_store(&p->stats->cpu_profile_hz_now, hz);
  for (size_t i = 0; i < p->nthreads; i++)
    if (p->threads[i].armed) perf__cpu_timers_set_period(p->threads[i].tid, p->period_ns);
}

/* ---- windows -------------------------------------------------------------- */

/* Record the window as one profile event when it has samples (each
   thread's samples scaled to its CPU over the window), then start the
   next. */
static void ship_window(perf__cpu_profile_t *p, int64_t now) {
  perf__profile_table_t *t = &p->table;
  perf__modules_t *mods = p->mods ? p->mods : perf__modules_acquire();
  perf__event_t *ev = t->samples ? perf__event_new(PERF__EVENT_PROFILE, mods) : NULL;
  if (mods != p->mods) perf__modules_release(mods);
  if (ev) {
    ev->weighted = true;
    ev->start_mono_ns = p->window_start_ns;
    ev->start_wall_ns = perf__mono_to_wall_ns(p->window_start_ns);
    ev->duration_ns = now - p->window_start_ns;
    ev->samples_over = t->dropped;
    double scale[MAX_THREADS];
    int64_t hottest = -1;
    for (size_t i = 0; i < p->nthreads; i++) {
      prof_thread_t *th = &p->threads[i];
      int64_t cpu = perf__thread_cpu_ns(th->tid);
      if (cpu < th->cpu_ns) cpu = th->cpu_ns; /* gone: its last reading */
      int64_t used = cpu - th->cpu0_ns;
      scale[i] = th->raw_ns && used > 0 ? (double)used / (double)th->raw_ns : 1;
      if (!th->samples) continue;
      char name[16];
      perf__thread_name(th->tid, name, sizeof name);
      perf__event_set_thread(ev, th->tid, name,
                             ev->duration_ns > 0 ? (int)(used * 100 / ev->duration_ns) : -1);
      if (used > hottest) {
        hottest = used;
        ev->tid = th->tid;
      }
    }
    for (size_t i = 0; i < t->slot_count; i++) {
      const perf__profile_entry_t *e = perf__profile_table_at(t, i);
      if (!e) continue;
      double k = 1;
      for (size_t j = 0; j < p->nthreads; j++)
        if (p->threads[j].tid == e->tid) k = scale[j];
      perf__event_add_count(ev, e->tid, (perf__state_t)e->state, &t->frames[e->first], e->depth,
                            (perf__stack_end_t)e->end, e->samples,
                            (uint64_t)((double)e->weight_ns * k + 0.5));
    }
    PERF__COUNT(p->stats, cpu_profile_windows, 1);
    PERF__COUNT(p->stats, cpu_profile_samples, t->samples);
    perf__recorder_record(p->recorder, ev);
  }
  new_window(p, now);
}

/* An empty table, each thread's CPU clock as its start; threads without a
   timer are forgotten. */
static void new_window(perf__cpu_profile_t *p, int64_t now) {
  perf__profile_table_reset(&p->table);
  p->window_start_ns = now;
  size_t kept = 0;
  for (size_t i = 0; i < p->nthreads; i++) {
    prof_thread_t th = p->threads[i];
    if (!th.armed) continue;
    int64_t cpu = perf__thread_cpu_ns(th.tid);
    th.cpu0_ns = th.cpu_ns = cpu >= 0 ? cpu : th.cpu_ns;
    th.raw_ns = 0;
    th.samples = 0;
    p->threads[kept++] = th;
  }
  p->nthreads = kept;
}

int64_t perf__cpu_profile_self_ns(void) {
  return self_cpu_ns();
}

static int64_t self_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
