/*
 * cpu_timers.c - CPU profiles driven by each thread's own CPU clock (see
 * cpu_timers.h). The CPU monitor's thread arms, drains and ends; the
 * handler half runs on the sampled threads, inside the sampler's signal
 * handler (signal_sampler.c dispatches SI_TIMER signals here).
 *
 * Shared with the handler, allocated at the first profile and never freed
 * (a signal of a deleted timer may still arrive late):
 *  - one slot per armed thread: its tid, stack bounds and a generation; the timer's signal carries
 * (slot, generation), and the handler writes nothing unless both still match and it runs on the
 * slot's thread;
 *  - a ring of records, each with its own state word (FREE, WRITING,
 *    READY): a handler claims a FREE one with a compare-and-swap, fills
 *    it, marks it READY; the monitor copies READY ones out and frees them.
 *    No free record is a sample not taken, counted.
 * Handlers in flight are counted (g_inside), so the end of a profile waits
 * for them before the rules they read are released.
 */
#include "sdk/sampler/cpu_timers.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/hash.h"
#include "sdk/base/log.h"
#include "sdk/base/threads.h"
#include "sdk/sampler/arch.h"
#include "sdk/sampler/sampler.h"

enum { RECORD_FREE = 0, RECORD_WRITING = 1, RECORD_READY = 2 };
#define DEFAULT_RING 128
/* Samples between two draws of a thread's timer interval (each a
   timer_settime in the handler: the most costly part of it after the
   signal's delivery). */
#define DRAW_EVERY 4
#define MAX_RING 1024
/* How long the end of a profile waits for handlers still inside. */
#define INSIDE_WAIT_NS 1000000000LL

typedef struct {
  _Atomic uint32_t gen; /* 0: not armed */
  pid_t tid;
  int timer;                 /* the kernel's timer id */
  _Atomic int64_t period_ns; /* the monitor may change it (perf__cpu_timers_set_period) */
  /* The interval's draws and the samples since the last: only the
     thread's own handler moves them. */
  uint64_t rng;
  uint32_t since_draw;
  /* Its stack's bounds, 0 until learned: the handler of a sample whose sp
     lies outside reports the sp, and the drain learns the mapping that
     holds it (hi written first: a handler reading the new lo with the old
     hi of 0 finds sp outside and reports again). */
  _Atomic uintptr_t stack_lo, stack_hi;
  /* A record reporting an sp outside the bounds is in the ring, not
     drained yet: the samples until then are not taken, and take no
     record (a thread burning before its first drain would fill the ring
     with the same report). */
  _Atomic bool asked;
} timer_slot_t;

typedef struct {
  _Atomic uint32_t state;
  pid_t tid;
  int64_t taken_ns;
  bool need_bounds; /* no stack: sp lay outside the slot's bounds */
  uintptr_t sp;
  size_t count;
  perf__walk_status_t status;
  uintptr_t pcs[PERF__CPU_TIMER_DEPTH];
} record_t;

static timer_slot_t g_slots[PERF__CPU_TIMERS_MAX];
static record_t *g_ring;
static size_t g_ring_size = DEFAULT_RING;
static _Atomic size_t g_hint;        /* where handlers start looking for a free record */
static _Atomic uint64_t g_not_taken; /* samples not taken since the last drain */
static _Atomic int g_inside;         /* handlers past their entry */
/* What the handlers cost their threads: signals handled, and the CPU
   time spent inside the handler (the thread's CPU clock, entry to exit). */
static _Atomic uint64_t g_signals, g_handler_ns;
static _Atomic bool g_measure_cost; /* a continuous profile keeps a budget: the handler measures */
static _Atomic(const perf__unwind_map_t *) g_unwind;
static _Atomic int g_use_rules;
static uint32_t g_gen;
static perf__modules_t *g_mods; /* the profile's rules; NULL: no profile */
static int g_signo;

static size_t ring_size(void);
static int64_t ts_ns(const struct timespec *ts);
#if defined(__x86_64__)
static bool kernel_at_least(int major, int minor);
#endif
static timer_slot_t *slot_of(pid_t tid);
static void learn_bounds(pid_t tid, uintptr_t sp);
static int set_timer(timer_slot_t *t, int64_t first_ns, int64_t every_ns);
static int64_t next_interval(timer_slot_t *t);
static void delete_timer(timer_slot_t *t);
static void wait_handlers_out(void);

bool perf__cpu_timers_supported(void) {
  const char *v = getenv("PERF_SDK_CPU_TIMERS");
  if (v && strcmp(v, "0") == 0) return false;
  if (v && strcmp(v, "1") == 0) return true;
#if defined(__x86_64__)
  /* x86 selects POSIX_CPU_TIMERS_TASK_WORK since 5.11: expired CPU timers
     are handled in task work on the return to user mode. */
  return kernel_at_least(5, 11);
#else
  return false;
#endif
}

int perf__cpu_timers_begin(perf__modules_t *mods) {
  if (g_mods) return PERF_E_BUSY;
  if (!mods) return PERF_E_INVALID_ARGUMENT;
  int mode = perf__sampler_unwind_mode();
  if (mode == PERF_UNWIND_STACK_COPY) return PERF_E_UNSUPPORTED;
  int signo = perf_sampler_signal();
  if (signo < 0) return signo;
  if (!g_ring) {
    g_ring_size = ring_size();
    if (!(g_ring = calloc(g_ring_size, sizeof *g_ring))) return PERF_E_NO_MEMORY;
  }
  atomic_fetch_add(&mods->refs, 1);
  g_mods = mods;
  g_signo = signo;
  atomic_store(&g_use_rules, mode == PERF_UNWIND_CFI);
  atomic_store(&g_unwind, mods->unwind);
  atomic_store(&g_not_taken, 0);
  return PERF_OK;
}

int perf__cpu_timers_arm(pid_t tid, int64_t period_ns) {
  if (!g_mods || tid <= 0 || period_ns <= 0) return PERF_E_INVALID_ARGUMENT;
  if (slot_of(tid)) return PERF_OK;
  timer_slot_t *t = NULL;
  for (size_t i = 0; i < PERF__CPU_TIMERS_MAX && !t; i++)
    if (atomic_load(&g_slots[i].gen) == 0) t = &g_slots[i];
  if (!t) return PERF_E_BUSY;
  /* No capture first (a round trip that waits for the thread to get a CPU):
     the bounds the sampler knows or those of the sp of a thread blocked
     now, else learned from the first sample's sp; the rules a walk lacks
     are compiled as its samples are drained. */
  uintptr_t lo = 0, hi = 0;
  int err = perf__sampler_timer_target(tid, &lo, &hi);
  if (err) return err;
  atomic_store(&t->stack_hi, hi);
  atomic_store(&t->stack_lo, lo);
  atomic_store(&t->asked, false);
  g_gen = (g_gen + 1) & 0xffffff;
  if (g_gen == 0) g_gen = 1;
  uint32_t gen = g_gen;
  t->tid = tid;

  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = g_signo;
  sev.sigev_value.sival_int = (int)((gen << 8) | (uint32_t)(t - g_slots));
  sev._sigev_un._tid = tid;
  int timer;
  if (syscall(SYS_timer_create, perf__thread_cpu_clock(tid), &sev, &timer) != 0) {
    int e = errno;
    if (e == EINVAL || e == ESRCH) return PERF_E_NO_THREAD;
    PERF__FAIL(PERF_E_SYSTEM, "timer_create(thread %d): %s", (int)tid, strerror(e));
  }
  t->timer = timer;
  atomic_store(&t->gen, gen); /* armed: the handler may write from now on */
  /* The first expiry anywhere in the first period: a thread that runs
     only briefly after the burst began still gets a sample. */
  int64_t first =
      1 + (int64_t)(perf__mix64((uint64_t)perf__now_ns() ^ (uint64_t)tid) % (uint64_t)period_ns);
  atomic_store(&t->period_ns, period_ns);
  t->rng = perf__mix64((uint64_t)tid * 0x9e3779b97f4a7c15ULL ^ (uint64_t)first);
  t->since_draw = 0;
  if (set_timer(t, first, period_ns) != 0) {
    int e = errno;
    delete_timer(t);
    PERF__FAIL(PERF_E_SYSTEM, "timer_settime(thread %d): %s", (int)tid, strerror(e));
  }
  return PERF_OK;
}

int perf__cpu_timers_set_period(pid_t tid, int64_t period_ns) {
  timer_slot_t *t = slot_of(tid);
  if (!t || period_ns <= 0) return t ? PERF_E_INVALID_ARGUMENT : PERF_E_NO_THREAD;
  atomic_store(&t->period_ns, period_ns);
  /* The next expiry anywhere in the new period, as at arming. */
  int64_t first =
      1 + (int64_t)(perf__mix64((uint64_t)perf__now_ns() ^ (uint64_t)tid) % (uint64_t)period_ns);
  return set_timer(t, first, period_ns) == 0 ? PERF_OK : PERF_E_NO_THREAD;
}

int perf__cpu_timers_disarm(pid_t tid) {
  timer_slot_t *t = slot_of(tid);
  if (!t) return PERF_E_NO_THREAD;
  atomic_store(&t->gen, 0);
  /* As at the end of a profile: no handler still inside may set the
     timer once it is deleted, and a signal left pending in a thread that
     blocks it is taken back. */
  wait_handlers_out();
  syscall(SYS_timer_delete, t->timer);
  perf__sampler_retract_if_masked(tid);
  return PERF_OK;
}

void perf__cpu_timers_measure_cost(bool on) {
  atomic_store(&g_measure_cost, on);
}

void perf__cpu_timers_cost(uint64_t *signals, uint64_t *handler_ns) {
  *signals = atomic_load(&g_signals);
  *handler_ns = atomic_load(&g_handler_ns);
}

bool perf__cpu_timers_armed(pid_t tid) {
  return slot_of(tid) != NULL;
}

void perf__cpu_timers_learn_bounds(pid_t tid) {
  timer_slot_t *t = slot_of(tid);
  uintptr_t lo, hi;
  if (!t || atomic_load(&t->stack_hi) != 0 || !perf__sampler_blocked_bounds(tid, &lo, &hi)) return;
  atomic_store(&t->stack_hi, hi);
  atomic_store(&t->stack_lo, lo);
}

uint64_t perf__cpu_timers_drain(void (*fn)(void *arg, const perf__cpu_timer_sample_t *s),
                                void *arg) {
  if (!g_ring) return 0;
  for (size_t i = 0; i < g_ring_size; i++) {
    record_t *r = &g_ring[i];
    if (atomic_load(&r->state) != RECORD_READY) continue;
    if (r->need_bounds) { /* not a sample: where the thread's stack is */
      learn_bounds(r->tid, r->sp);
      atomic_fetch_add(&g_not_taken, 1);
      atomic_store(&r->state, RECORD_FREE);
      continue;
    }
    perf__cpu_timer_sample_t s = {r->tid, r->taken_ns, r->count, r->status, r->pcs};
    if (s.status == PERF__WALK_RULES_PENDING) {
      /* Its walk stopped at a module whose rules are not compiled yet:
         compiled for the next samples, and this one not taken (a stack cut
         there would put its CPU time in the wrong place; the thread's CPU
         is shared among the samples taken). */
      if (g_mods && s.count > 0) perf__modules_compile_rules(g_mods, s.pcs[s.count - 1]);
      atomic_fetch_add(&g_not_taken, 1);
      atomic_store(&r->state, RECORD_FREE);
      continue;
    }
    if (fn) fn(arg, &s);
    atomic_store(&r->state, RECORD_FREE);
  }
  return atomic_exchange(&g_not_taken, 0);
}

uint64_t perf__cpu_timers_end(void (*fn)(void *arg, const perf__cpu_timer_sample_t *s), void *arg) {
  if (!g_mods) return 0;
  pid_t tids[PERF__CPU_TIMERS_MAX];
  size_t n = 0;
  timer_slot_t *armed[PERF__CPU_TIMERS_MAX];
  for (size_t i = 0; i < PERF__CPU_TIMERS_MAX; i++)
    if (atomic_load(&g_slots[i].gen) != 0) {
      armed[n] = &g_slots[i];
      tids[n++] = g_slots[i].tid;
      atomic_store(&g_slots[i].gen, 0);
    }
  /* A handler that entered before its slot was cleared still reads the
     rules and may set its timer again: wait for it, then delete the
     timers (a timer id deleted under a handler could be the app's next
     timer's). One that enters later finds no slot and touches nothing. */
  wait_handlers_out();
  for (size_t i = 0; i < n; i++)
    syscall(SYS_timer_delete, armed[i]->timer);
  /* A signal of a deleted timer left pending in a thread that blocks it
     would stay pending (and kill a program the thread execs): taken back.
     One pending in a thread that does not block it is delivered at the
     thread's next return to user mode, and its handler writes nothing. */
  for (size_t i = 0; i < n; i++)
    perf__sampler_retract_if_masked(tids[i]);
  uint64_t not_taken = perf__cpu_timers_drain(fn, arg);
  atomic_store(&g_unwind, NULL);
  perf__modules_release(g_mods);
  g_mods = NULL;
  return not_taken;
}

void perf__cpu_timers_on_signal(const siginfo_t *si, void *ucontext) {
  atomic_fetch_add(&g_inside, 1);
  /* The handler's cost on its thread's CPU clock (a wall clock would
     count the times the thread is preempted inside it): two system
     calls, made only while a continuous profile keeps a budget. */
  struct timespec ts;
  const bool measure = atomic_load_explicit(&g_measure_cost, memory_order_relaxed);
  int64_t entered_ns = 0;
  if (measure) {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    entered_ns = ts_ns(&ts);
  }
  uint32_t token = (uint32_t)si->si_value.sival_int, idx = token & 0xff, gen = token >> 8;
  timer_slot_t *t = idx < PERF__CPU_TIMERS_MAX ? &g_slots[idx] : NULL;
  const perf__unwind_map_t *unwind = atomic_load(&g_unwind);
  if (!t || gen == 0 || atomic_load(&t->gen) != gen || !g_ring || !unwind ||
      t->tid != (pid_t)syscall(SYS_gettid))
    goto out;
  if (++t->since_draw >= DRAW_EVERY) { /* a system call: not every sample */
    int64_t every = next_interval(t);
    set_timer(t, every, every);
    t->since_draw = 0;
  }
  perf__unwind_regs_t regs;
  perf__arch_context_regs(ucontext, &regs);
  uintptr_t lo = atomic_load(&t->stack_lo), hi = atomic_load(&t->stack_hi);
  const bool need_bounds = regs.sp < lo || regs.sp >= hi;
  if (need_bounds && atomic_load(&t->asked)) { /* reported already */
    atomic_fetch_add(&g_not_taken, 1);
    goto out;
  }
  record_t *r = NULL;
  size_t start = atomic_fetch_add(&g_hint, 1);
  for (size_t k = 0; k < g_ring_size && !r; k++) {
    record_t *c = &g_ring[(start + k) % g_ring_size];
    uint32_t expect = RECORD_FREE;
    if (atomic_compare_exchange_strong(&c->state, &expect, RECORD_WRITING)) r = c;
  }
  if (!r) {
    atomic_fetch_add(&g_not_taken, 1);
    goto out;
  }
  r->tid = t->tid;
  r->sp = regs.sp;
  r->need_bounds = need_bounds;
  if (need_bounds) atomic_store(&t->asked, true);
  r->count = 0;
  if (!r->need_bounds) {
    perf__stack_window_t stack = {regs.sp, hi, (const uint8_t *)regs.sp};
    r->count = perf__unwind_walk(unwind, atomic_load(&g_use_rules), regs, stack, r->pcs,
                                 PERF__CPU_TIMER_DEPTH, &r->status);
  }
  clock_gettime(CLOCK_MONOTONIC, &ts);
  r->taken_ns = ts_ns(&ts);
  atomic_store(&r->state, RECORD_READY);
out:
  if (measure) {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    atomic_fetch_add_explicit(&g_signals, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_handler_ns, (uint64_t)(ts_ns(&ts) - entered_ns),
                              memory_order_relaxed);
  }
  atomic_fetch_sub(&g_inside, 1);
}

void perf__cpu_timers_atfork_child(void) {
  for (size_t i = 0; i < PERF__CPU_TIMERS_MAX; i++)
    atomic_store(&g_slots[i].gen, 0);
  /* The parent's samples are not the child's: its profile starts empty. */
  for (size_t i = 0; g_ring && i < g_ring_size; i++)
    atomic_store(&g_ring[i].state, RECORD_FREE);
  atomic_store(&g_not_taken, 0);
  atomic_store(&g_unwind, NULL);
  g_mods = NULL; /* the parent's reference, never released here */
}

/* Until no handler is inside (at most INSIDE_WAIT_NS). */
static void wait_handlers_out(void) {
  int64_t until = perf__now_ns() + INSIDE_WAIT_NS;
  while (atomic_load(&g_inside) > 0 && perf__now_ns() < until)
    sched_yield();
}

/* A timer that never expired (its first setting failed). */
static void delete_timer(timer_slot_t *t) {
  atomic_store(&t->gen, 0);
  syscall(SYS_timer_delete, t->timer);
}

/* The bounds of the mapping holding tid's sp, into its slot. */
static void learn_bounds(pid_t tid, uintptr_t sp) {
  timer_slot_t *t = slot_of(tid);
  uintptr_t lo, hi;
  if (!t) return;
  if (perf__sampler_learn_bounds(tid, sp, &lo, &hi) != PERF_OK) {
    atomic_store(&t->asked, false); /* asked again by its next sample */
    return;
  }
  atomic_store(&t->stack_hi, hi);
  atomic_store(&t->stack_lo, lo);
  atomic_store(&t->asked, false);
  set_timer(t, 1, atomic_load(&t->period_ns)); /* its first real sample at the next tick */
}

/* Expire after first_ns more of the thread's CPU time, then every
   every_ns of it (the handler draws a new interval now and then).
   Async-signal-safe. */
static int set_timer(timer_slot_t *t, int64_t first_ns, int64_t every_ns) {
  struct itimerspec its = {{every_ns / 1000000000, every_ns % 1000000000},
                           {first_ns / 1000000000, first_ns % 1000000000}};
  return (int)syscall(SYS_timer_settime, t->timer, 0, &its, NULL);
}

/* The next interval, drawn uniformly from [period / 2, 3 * period / 2)
   (splitmix64): a fixed period equal to, or a divisor of, a cycle of the
   thread's work in CPU time would find it at the same point of that cycle
   every time (a 7 + 3 ms cycle at 100 Hz: 20 points off). Drawn every
   DRAW_EVERY samples: between draws the kernel repeats the interval. The
   phase a draw starts from is the sum of the draws before (uniform over
   the cycle), and k times an interval drawn over a range as wide as the
   period is uniform over the cycle too, so each sample still falls at any
   point of a cycle alike. */
static int64_t next_interval(timer_slot_t *t) {
  t->rng += 0x9e3779b97f4a7c15ULL;
  uint64_t r = perf__mix64(t->rng);
  int64_t period = atomic_load(&t->period_ns);
  return period / 2 + (int64_t)(r % (uint64_t)(period > 0 ? period : 1)) + 1;
}

static timer_slot_t *slot_of(pid_t tid) {
  for (size_t i = 0; i < PERF__CPU_TIMERS_MAX; i++)
    if (atomic_load(&g_slots[i].gen) != 0 && g_slots[i].tid == tid) return &g_slots[i];
  return NULL;
}

/* The ring's records: DEFAULT_RING, or PERF_SDK_CPU_TIMER_RING (1..1024),
   a test seam that makes the ring overflow. */
static size_t ring_size(void) {
  const char *v = getenv("PERF_SDK_CPU_TIMER_RING");
  long n = v ? strtol(v, NULL, 10) : 0;
  return n >= 1 && n <= MAX_RING ? (size_t)n : DEFAULT_RING;
}

static int64_t ts_ns(const struct timespec *ts) {
  return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

#if defined(__x86_64__)
static bool kernel_at_least(int major, int minor) {
  struct utsname u;
  int ma = 0, mi = 0;
  if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2) return false;
  return ma > major || (ma == major && mi >= minor);
}
#endif
