/*
 * cpu_timer_burst.c - a burst sampled by the hot threads' CPU-clock timers
 * (see cpu_timer_burst.h). The monitor arms one timer per hot thread, then
 * wakes every few milliseconds (often enough that the sampler's ring of
 * records never fills at the burst's rate) to drain the samples into the
 * event, read the threads' CPU clocks (to end a burst whose threads
 * stopped running) and arm a thread the first look could not. At the end
 * it deletes the timers and shares each thread's CPU time over the burst
 * equally among its samples.
 *
 * Why equal shares: the timers expire at the kernel's tick, and only on a
 * thread running then, so a thread's samples fall uniformly over the CPU
 * time it burns, whatever the scheduler does. Weighing each sample with
 * the CPU time since the thread's previous one instead hands the CPU a
 * thread used before it was preempted or slept to wherever it is found
 * after (the start of its next piece of work): 2 threads napping between
 * pieces of work on 2 loaded cores were 4-6 points off per function that
 * way, within 1 point with equal shares (ctest cpu_timers_hot_2).
 * Runs on perf-cpu-mon.
 */
#include "sdk/monitors/cpu_timer_burst.h"

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/threads.h"
#include "sdk/sampler/cpu_timers.h"
#include "sdk/sampler/stack_end.h"

/* Records the monitor lets the ring gather between two drains (half the
   default ring), and the bounds of the drain interval. */
#define RECORDS_PER_DRAIN 64
#define MIN_DRAIN_NS 10000000LL
#define MAX_DRAIN_NS 100000000LL
/* Samples a thread should get at least over its burst: its timer's period
   is shortened (down to the tick, where CPU timers expire anyway) for a
   thread expected to burn less than this many periods. */
#define MIN_SAMPLES 32
/* How often a hot thread that could not be armed is tried again. */
#define REARM_NS 200000000LL

typedef struct {
  pid_t tid;
  bool armed;
  int64_t period_ns, start_cpu_ns, looked_cpu_ns;
  size_t samples;
} timed_t;

typedef struct {
  perf__event_t *ev;
  perf__stats_t *stats;
  timed_t *threads;
  size_t k;
  long taken;
} drain_ctx_t;

static void add_sample(void *arg, const perf__cpu_timer_sample_t *s);
static size_t arm_missing(timed_t *t, size_t k);
static void count_not_taken(drain_ctx_t *c, uint64_t not_taken);
static void share_cpu(perf__event_t *ev, size_t first, const timed_t *t);

bool perf__cpu_timer_burst_enabled(void) {
  return perf__cpu_timers_supported();
}

long perf__cpu_timer_burst(perf__worker_t *worker, perf__stats_t *stats, perf__event_t *ev,
                           const pid_t *tids, const int64_t *start_cpu_ns,
                           const int64_t *expect_cpu_ns, size_t k, unsigned hz, int64_t end_ns,
                           int64_t quiet_ns) {
  if (k > PERF__CPU_TIMERS_MAX) k = PERF__CPU_TIMERS_MAX;
  if (hz == 0 || perf__cpu_timers_begin(ev->mods) != PERF_OK) return -1;
  timed_t threads[PERF__CPU_TIMERS_MAX];
  const int64_t period = 1000000000LL / hz;
  for (size_t i = 0; i < k; i++) {
    int64_t p = expect_cpu_ns[i] / MIN_SAMPLES < period ? expect_cpu_ns[i] / MIN_SAMPLES : period;
    threads[i] = (timed_t){tids[i], false, p > 0 ? p : 1, start_cpu_ns[i], start_cpu_ns[i], 0};
  }
  const size_t first = ev->sample_count;
  drain_ctx_t c = {ev, stats, threads, k, 0};
  if (arm_missing(threads, k) == 0) {
    perf__cpu_timers_end(NULL, NULL);
    return -1;
  }
  int64_t drain = (int64_t)RECORDS_PER_DRAIN * 1000000000LL / ((int64_t)k * hz);
  drain = drain < MIN_DRAIN_NS ? MIN_DRAIN_NS : drain > MAX_DRAIN_NS ? MAX_DRAIN_NS : drain;
  int64_t now = perf__now_ns(), last_ran = now, last_arm = now;
  while (now < end_ns && !perf__worker_stopping(worker)) {
    int64_t next = now + drain < end_ns ? now + drain : end_ns;
    perf__worker_sleep_until(worker, next);
    now = perf__now_ns();
    count_not_taken(&c, perf__cpu_timers_drain(add_sample, &c));
    for (size_t i = 0; i < k; i++) {
      int64_t cpu = perf__thread_cpu_ns(threads[i].tid);
      if (cpu > threads[i].looked_cpu_ns) {
        last_ran = now;
        threads[i].looked_cpu_ns = cpu;
      }
    }
    if (now - last_ran > quiet_ns) break;
    if (now - last_arm > REARM_NS) {
      arm_missing(threads, k);
      last_arm = now;
    }
  }
  count_not_taken(&c, perf__cpu_timers_end(add_sample, &c));
  for (size_t i = 0; i < k; i++)
    share_cpu(ev, first, &threads[i]);
  return c.taken;
}

/* The thread's CPU time since the burst began (from its clock; the last
   reading when it is gone), shared equally among its samples. */
static void share_cpu(perf__event_t *ev, size_t first, const timed_t *t) {
  if (t->samples == 0) return;
  int64_t cpu = perf__thread_cpu_ns(t->tid);
  if (cpu < t->looked_cpu_ns) cpu = t->looked_cpu_ns;
  if (cpu <= t->start_cpu_ns) return;
  uint64_t total = (uint64_t)(cpu - t->start_cpu_ns), each = total / t->samples;
  uint64_t left = total - each * t->samples; /* the remainder, a nanosecond to each */
  for (size_t j = first; j < ev->sample_count; j++)
    if (ev->samples[j].tid == t->tid && ev->samples[j].error == 0) {
      perf__event_add_weight(ev, j, each + (left ? 1 : 0));
      if (left) left--;
    }
}

/* Arm the threads not armed yet; returns how many are armed. */
static size_t arm_missing(timed_t *t, size_t k) {
  size_t armed = 0;
  for (size_t i = 0; i < k; i++) {
    if (!t[i].armed) t[i].armed = perf__cpu_timers_arm(t[i].tid, t[i].period_ns) == PERF_OK;
    armed += t[i].armed;
  }
  return armed;
}

static void add_sample(void *arg, const perf__cpu_timer_sample_t *s) {
  drain_ctx_t *c = arg;
  perf__stack_end_t end =
      perf__stack_end_of(s->status == PERF__WALK_DEPTH ? PERF_E_TRUNCATED : PERF_OK, s->status);
  size_t before = c->ev->sample_count;
  if (perf__event_add_weighted_sample(c->ev, s->tid, s->taken_ns, s->pcs, s->count, end,
                                      PERF__SAMPLE_STATE_RUNNING, 0) != PERF_OK) {
    PERF__COUNT(c->stats, samples_failed, 1);
    return;
  }
  PERF__COUNT(c->stats, samples_taken, 1);
  if (c->ev->sample_count == before) return; /* the event is full: counted there */
  c->taken++;
  for (size_t i = 0; i < c->k; i++)
    if (c->threads[i].tid == s->tid) c->threads[i].samples++;
}

/* Samples the handler could not write: failed samples of the event (of
   no particular thread: the ring was full) and of the stats. */
static void count_not_taken(drain_ctx_t *c, uint64_t not_taken) {
  if (!not_taken) return;
  PERF__COUNT(c->stats, samples_failed, not_taken);
  for (uint64_t i = 0; i < not_taken; i++)
    perf__event_add_failed_sample(c->ev, 0, perf__now_ns(), PERF_E_BUSY);
}
