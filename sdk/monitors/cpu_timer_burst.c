/*
 * cpu_timer_burst.c - a burst sampled by the hot threads' CPU-clock timers
 * (see cpu_timer_burst.h). The monitor arms one timer per hot thread, then
 * wakes every few milliseconds (often enough that the sampler's ring of
 * records never fills at the burst's rate) to drain the samples into the
 * event, read the threads' CPU clocks (to end a burst whose threads
 * stopped running) and arm a thread the first look could not. A thread
 * started during the burst that runs (it was not there to be ranked) gets
 * a timer too, while the burst samples fewer threads than its bound (the
 * timers' slots); past the bound each period of its CPU is a failed
 * sample. At the end it deletes
 * the timers and shares each thread's CPU time over the burst equally
 * among its samples.
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

#include <stdlib.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/threads.h"
#include "sdk/sampler/cpu_timers.h"
#include "sdk/sampler/stack_end.h"

/* Records the monitor lets the ring gather between two drains (half the
   default ring), and the bounds of the drain interval. Each drain is a
   wake-up of the monitor, which costs it as much CPU as draining a dozen
   records (14-35 us on a virtual machine): the interval is as long as the ring
   allows at the rate the records came in (a CPU timer expires at a tick, so
   "1000 Hz" gives at most the kernel's tick rate a thread), and the
   burst's end is found within it. */
#define RECORDS_PER_DRAIN 64
#define MIN_DRAIN_NS 10000000LL
#define MAX_DRAIN_NS 250000000LL
/* Samples a thread should get at least over its burst: its timer's period
   is shortened (down to the tick, where CPU timers expire anyway) for a
   thread expected to burn less than this many periods. */
#define MIN_SAMPLES 32
/* How often a hot thread that could not be armed is tried again, and the
   thread set is read for threads started during the burst when its task
   directory's link count did not move. */
#define REARM_NS 200000000LL
/* Threads started during the burst past its bound whose CPU is followed
   (as failed samples) after the look that found them. */
#define MAX_UNSAMPLED PERF__CPU_TIMERS_MAX

typedef struct {
  pid_t tid;
  bool armed;
  int64_t period_ns, start_cpu_ns, looked_cpu_ns;
  size_t samples;
} timed_t;

/* A thread started during the burst past its bound: its CPU clock at the
   last look. */
typedef struct {
  pid_t tid;
  int64_t cpu_ns;
} unsampled_t;

typedef struct {
  perf__event_t *ev;
  perf__stats_t *stats;
  timed_t threads[PERF__CPU_TIMERS_MAX];
  size_t k, places; /* threads sampled, and the most it may sample */
  long taken;
  uint64_t drained;        /* records handed over by the drains, taken or not */
  perf__thread_set_t *set; /* NULL: no thread is added during the burst */
  int64_t period_ns;
  unsampled_t unsampled[MAX_UNSAMPLED];
  size_t unsampled_count;
  int64_t unsampled_ns; /* their CPU not yet counted as failed samples */
} burst_t;

static void add_sample(void *arg, const perf__cpu_timer_sample_t *s);
static double next_rate(const burst_t *b, uint64_t records, int64_t elapsed_ns, unsigned hz);
static bool any_ran(burst_t *b);
static size_t arm_missing(timed_t *t, size_t k);
static void count_not_taken(burst_t *b, uint64_t not_taken);
static void look_for_new(burst_t *b);
static void add_thread(burst_t *b, const perf__thread_cpu_t *t, int64_t start_cpu_ns);
static void count_unsampled(burst_t *b, pid_t tid, int64_t cpu_ns);
static void name_new(burst_t *b, size_t first_new);
static void share_cpu(perf__event_t *ev, size_t first, const timed_t *t);

bool perf__cpu_timer_burst_enabled(void) {
  return perf__cpu_timers_supported();
}

long perf__cpu_timer_burst(perf__worker_t *worker, perf__stats_t *stats, perf__event_t *ev,
                           perf__thread_set_t *set, size_t places, const pid_t *tids,
                           const int64_t *start_cpu_ns, const int64_t *expect_cpu_ns, size_t k,
                           unsigned hz, int64_t end_ns, int64_t quiet_ns) {
  if (places > PERF__CPU_TIMERS_MAX) places = PERF__CPU_TIMERS_MAX;
  if (k > places) k = places;
  if (hz == 0 || perf__cpu_timers_begin(ev->mods) != PERF_OK) return -1;
  burst_t *b = calloc(1, sizeof *b);
  if (!b) {
    perf__cpu_timers_end(NULL, NULL);
    return -1;
  }
  *b = (burst_t){.ev = ev, .stats = stats, .k = k, .places = places, .set = set};
  const int64_t period = b->period_ns = 1000000000LL / hz;
  for (size_t i = 0; i < k; i++) {
    int64_t p = expect_cpu_ns[i] / MIN_SAMPLES < period ? expect_cpu_ns[i] / MIN_SAMPLES : period;
    b->threads[i] = (timed_t){tids[i], false, p > 0 ? p : 1, start_cpu_ns[i], start_cpu_ns[i], 0};
  }
  const size_t first = ev->sample_count;
  if (arm_missing(b->threads, k) == 0) {
    perf__cpu_timers_end(NULL, NULL);
    free(b);
    return -1;
  }
  int64_t now = perf__now_ns(), last_ran = now, last_arm = now;
  double rate = hz;   /* records per second and thread, until one is seen */
  bool missed = true; /* the last drain found samples not taken (none yet: the first) */
  while (now < end_ns && !perf__worker_stopping(worker)) {
    /* Soon after a drain that found samples not taken: it compiled the
       rules they lacked and learned their stacks, or the ring was full. */
    int64_t drain =
        missed ? MIN_DRAIN_NS : (int64_t)(RECORDS_PER_DRAIN * 1e9 / (rate * (double)b->k));
    drain = drain < MIN_DRAIN_NS ? MIN_DRAIN_NS : drain > MAX_DRAIN_NS ? MAX_DRAIN_NS : drain;
    int64_t next = now + drain < end_ns ? now + drain : end_ns, slept = now;
    perf__worker_sleep_until(worker, next);
    now = perf__now_ns();
    uint64_t before = b->drained, not_taken = perf__cpu_timers_drain(add_sample, b);
    count_not_taken(b, not_taken);
    rate = next_rate(b, b->drained - before + not_taken, now - slept, hz);
    missed = not_taken > 0;
    if (any_ran(b)) last_ran = now;
    bool rearm = now - last_arm > REARM_NS;
    if (rearm || perf__thread_set_moved(set)) look_for_new(b);
    if (now - last_ran > quiet_ns) break;
    if (rearm) {
      arm_missing(b->threads, b->k);
      last_arm = now;
    }
  }
  count_not_taken(b, perf__cpu_timers_end(add_sample, b));
  b->places = b->k; /* new threads from here on ran without a timer: counted */
  look_for_new(b);
  for (size_t i = 0; i < b->k; i++)
    share_cpu(ev, first, &b->threads[i]);
  name_new(b, k);
  long taken = b->taken;
  free(b);
  return taken;
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

/* Read the burst's threads' CPU clocks: whether any ran since the last
   reading. */
static bool any_ran(burst_t *b) {
  bool ran = false;
  for (size_t i = 0; i < b->k; i++) {
    int64_t cpu = perf__thread_cpu_ns(b->threads[i].tid);
    if (cpu > b->threads[i].looked_cpu_ns) {
      ran = true;
      b->threads[i].looked_cpu_ns = cpu;
    }
  }
  return ran;
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

/* The rate per thread the next interval is sized for (times the threads
   armed by then): the records of the last interval per second and
   thread, a quarter more; never under a quarter of the configured rate (a
   burst whose threads waited for a CPU picks up again). */
static double next_rate(const burst_t *b, uint64_t records, int64_t elapsed_ns, unsigned hz) {
  double floor = hz / 4.0, seen = 0;
  if (elapsed_ns > 0 && b->k > 0)
    seen = (double)records * 1.25e9 / (double)elapsed_ns / (double)b->k;
  return seen > floor ? seen : floor > 1 ? floor : 1;
}

static void add_sample(void *arg, const perf__cpu_timer_sample_t *s) {
  burst_t *c = arg;
  c->drained++;
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
static void count_not_taken(burst_t *b, uint64_t not_taken) {
  if (!not_taken) return;
  PERF__COUNT(b->stats, samples_failed, not_taken);
  for (uint64_t i = 0; i < not_taken; i++)
    perf__event_add_failed_sample(b->ev, 0, perf__now_ns(), PERF_E_BUSY);
}

/* Read the thread set: a thread that is not the SDK's is added to the
   burst when it is new since the last read and ran (its CPU since the
   read is all its CPU), or when it was there but not sampled and burned a
   period of CPU since the last read (idle when the burst began, hot now);
   the CPU of those past the bound is counted. The set's previous read was
   the burst's baseline or this look, both after the burst began. Not
   while an SDK worker starts (its thread runs before its tid is
   registered): the set is left unread, so its new threads are new at the
   next look too. */
static void look_for_new(burst_t *b) {
  if (!b->set || perf__worker_starting() || perf__thread_set_read(b->set) != PERF_OK) return;
  for (size_t i = 0; i < b->set->count; i++) {
    const perf__thread_cpu_t *t = &b->set->threads[i];
    if (t->delta_ns <= 0) continue;
    bool unsampled = false;
    for (size_t j = 0; j < b->unsampled_count && !unsampled; j++)
      unsampled = b->unsampled[j].tid == t->tid;
    if (unsampled) {
      count_unsampled(b, t->tid, t->delta_ns);
      continue;
    }
    if (perf__worker_is_sdk_thread(t->tid)) continue;
    if (t->delta_ns == t->cpu_ns)
      add_thread(b, t, 0);
    else if (t->delta_ns >= b->period_ns)
      add_thread(b, t, t->cpu_ns - t->delta_ns);
  }
}

/* A thread to sample from its CPU clock's reading start_cpu_ns on (0: a
   thread started during the burst): a timer while the burst has places
   left, its CPU since start_cpu_ns shared among its samples; else
   followed as unsampled (when there is room to remember it) and that CPU
   counted. Nothing for a thread sampled already. */
static void add_thread(burst_t *b, const perf__thread_cpu_t *t, int64_t start_cpu_ns) {
  for (size_t j = 0; j < b->k; j++)
    if (b->threads[j].tid == t->tid) return;
  if (b->k < b->places) {
    timed_t *n = &b->threads[b->k++];
    *n = (timed_t){t->tid, false, b->period_ns, start_cpu_ns, t->cpu_ns, 0};
    n->armed = perf__cpu_timers_arm(t->tid, b->period_ns) == PERF_OK;
    return;
  }
  if (b->unsampled_count < MAX_UNSAMPLED)
    b->unsampled[b->unsampled_count++] = (unsampled_t){t->tid, t->cpu_ns};
  count_unsampled(b, t->tid, t->cpu_ns - start_cpu_ns);
}

/* CPU of a thread past the bound: a failed sample per period of it (the
   remainder carried to the next). */
static void count_unsampled(burst_t *b, pid_t tid, int64_t cpu_ns) {
  b->unsampled_ns += cpu_ns;
  for (; b->unsampled_ns >= b->period_ns; b->unsampled_ns -= b->period_ns) {
    PERF__COUNT(b->stats, samples_failed, 1);
    perf__event_add_failed_sample(b->ev, tid, perf__now_ns(), PERF_E_BUSY);
  }
}

/* The threads added during the burst, with their names and their CPU
   share from when the burst began. */
static void name_new(burst_t *b, size_t first_new) {
  int64_t wall = perf__now_ns() - b->ev->start_mono_ns;
  for (size_t i = first_new; i < b->k; i++) {
    const timed_t *t = &b->threads[i];
    int64_t cpu = perf__thread_cpu_ns(t->tid);
    if (cpu < t->looked_cpu_ns) cpu = t->looked_cpu_ns;
    char name[16];
    perf__thread_name(t->tid, name, sizeof name);
    perf__event_set_thread(b->ev, t->tid, name,
                           wall > 0 ? (int)((cpu - t->start_cpu_ns) * 100 / wall) : -1);
  }
}
