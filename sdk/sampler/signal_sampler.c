/*
 * signal_sampler.c - captures any thread's stack on Linux by sending it a
 * dedicated real-time signal (see sampler.h).
 *
 * Two sides:
 *  - the requester (any thread calling perf__sampler_capture; one requester
 *    at a time under g_lock) fills a request slot, sends the signal with
 *    rt_tgsigqueueinfo carrying (slot index, sequence number), and waits on
 *    the slot's state word with a futex and a timeout; a snapshot
 *    (perf__sampler_capture_threads) sends up to PERF__SAMPLER_IN_FLIGHT_MAX
 *    requests, each in its own slot, before it waits for the first;
 *  - the signal handler, on the target thread, claims the slot only if the
 *    state still holds that exact sequence number, walks (or copies) the
 *    stack into the slot's preallocated storage, and wakes the requester.
 * A late handler (after the requester gave up) finds another sequence
 * number in the slot and writes nothing.
 *
 * A thread blocked in a system call is never signalled: a handler would end
 * nanosleep, poll, epoll_wait and the like early with EINTR; it is captured
 * from outside (blocked_capture.h). The handler must still be ours before
 * any signal is sent, and no signal may stay pending in a thread that
 * blocks it (SigBlk: a program the thread execs would die of it): a
 * snapshot reads the mask before each send, a single capture while the
 * signal flies, and takes it back from a thread found blocking it.
 * docs/internals/sampler.md, "Threads blocked in a system call" and
 * "Before each signal", has the costs and the races that remain.
 *
 * This file keeps the requests (slots, sequence numbers, the handler's
 * walk, snapshots). Which signal and its action are signal_action.c's;
 * the looks at the target around each send (its mask, blocked or leaving
 * a call) are send_checks.c's.
 *
 * Slot state word: (sequence << 3) | state.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/call_guard.h"
#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "sdk/base/threads.h"
#include "sdk/sampler/arch.h"
#include "sdk/sampler/blocked_capture.h"
#include "sdk/sampler/cpu_timers.h"
#include "sdk/sampler/dwfl_unwind.h"
#include "sdk/sampler/sampler.h"
#include "sdk/sampler/sampler_options.h"
#include "sdk/sampler/send_checks.h"
#include "sdk/sampler/signal_action.h"
#include "sdk/sampler/stack_bounds.h"
#include "sdk/sampler/task_files.h"
#include "sdk/sampler/thread_state.h"

enum { SLOT_FREE = 0, SLOT_PENDING = 1, SLOT_WRITING = 2, SLOT_DONE = 3, SLOT_CANCELLED = 4 };
enum { RESULT_STACK = 0, RESULT_NEED_BOUNDS = 1 };
/* send_request()'s and await_request()'s positive answers: the handler reported sp, not a stack;
   the thread was found blocked at the last look before the send (nothing sent); the thread
   turned out to block the signal, which was taken back (ask again, mask first). */
enum {
  REQUEST_NEED_BOUNDS = 1,
  REQUEST_NOW_BLOCKED = PERF__SEND_NOW_BLOCKED,
  REQUEST_RETRACTED = 3
};
/* Enough for a snapshot's requests in flight and a few cancelled ones
   still held. */
enum { SLOT_COUNT = PERF__SAMPLER_IN_FLIGHT_MAX + 8 };
/* A snapshot's shot still to be captured one at a time (capture_shot). */
#define SHOT_LATER 1
#define STATE(seq, st) (((seq) << 3) | (uint32_t)(st))
#define STATE_KIND(word) ((word)&7u)
/* How long a request that timed out still blocks new ones to the same
   thread (its signal may still be pending there). */
#define CANCELLED_HOLD_NS PERF__SEND_HOLD_NS
/* Extra wait for a handler that already claimed the slot when the timeout
   fired: it only has a bounded walk left to do. */
#define WRITING_GRACE_MS 50
/* Looks at a thread that may disagree (running, then blocked, then
   running...) before the capture gives up with PERF_E_TIMEOUT. */
#define BLOCKED_ATTEMPTS 4
/* How long the requester spins for the handler's answer before it sleeps. */
#define WAIT_SPIN_NS 50000LL

typedef struct slot_s {
  _Atomic uint32_t state;
  /* request: written by the requester before the state becomes PENDING */
  int mode;
  size_t max;
  uintptr_t stack_lo, stack_hi;
  const perf__unwind_map_t *unwind;
  uint8_t *copy_buf;
  size_t copy_cap;
  /* response: written by the handler while WRITING */
  int result;
  uintptr_t sp;
  uint64_t regs[PERF__ARCH_MAX_DWARF_REGS];
  uintptr_t copy_base;
  size_t copy_len;
  size_t count;
  perf__walk_status_t walk_status;
  uint64_t handler_cycles; /* TSC ticks the handler spent, for the benchmarks */
  uint64_t entry_cycles;   /* the cycle counter when the handler began */
  uintptr_t pcs[PERF__MAX_FRAMES];
  /* requester-only bookkeeping */
  pid_t tid;
  uint32_t seq;
  perf__modules_t *pinned; /* keeps `unwind` alive while a handler may read it */
  long long sent_ns, cancelled_at_ns;
  uint64_t sent_cycles; /* the cycle counter at sent_ns */
  bool in_flight;       /* sent, answer not yet collected (await_request) */
  size_t shot;          /* a snapshot's: whose answer this is */
  int64_t run_delay_ns; /* the thread's run delay when the signal was sent (-1: unknown) */
} slot_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static slot_t *g_slots; /* SLOT_COUNT slots, allocated at install */
static int g_signo;
static pid_t g_pid; /* checked in the handler: only our own requests count */
static uid_t g_uid;
static pid_t g_requester; /* the thread holding g_lock for a capture */
static uint32_t g_seq;
static uint64_t g_last_handler_cycles;
static perf_sampler_options_t g_opts;

static int install_locked(void);
static perf__stack_bounds_t *bounds_of_locked(pid_t tid);
static void on_sample_signal(int signo, siginfo_t *si, void *ucv);
static void copy_stack(uint8_t *dst, uintptr_t src, size_t len)
    __attribute__((no_sanitize_address));
static int capture_shot(perf__modules_t *mods, perf__sampler_shot_t *shot);
static int capture_once(perf__modules_t *mods, perf__sampler_shot_t *shot);
static int capture_signalled(perf__modules_t *mods, pid_t tid, perf__sampler_shot_t *shot,
                             bool check_leaving);
static void snapshot_locked(perf__modules_t *mods, perf__sampler_shot_t *shots, size_t n,
                            size_t in_flight);
static slot_t *start_shot(perf__modules_t *mods, perf__sampler_shot_t *shot, size_t index);
static void collect_oldest(perf__modules_t *mods, perf__sampler_shot_t *shots, slot_t **flying,
                           size_t *n_flying);
static void finish_shot(perf__sampler_shot_t *shot, int err);
static int prepare_slot(slot_t *s, perf__modules_t *mods);
static int send_request(slot_t *s, const perf__sampler_shot_t *shot, pid_t tid, bool check_leaving,
                        perf__mask_look_t mask_look);
static int await_request(slot_t *s, long long spin_ns);
static int learn_bounds(pid_t tid, uintptr_t sp);
static slot_t *claim_slot(pid_t tid, int *err);
static int wait_for_slot(slot_t *s, uint32_t seq, long long deadline_ns, long long spin_ns);
static int finish_timeout(slot_t *s, uint32_t seq, pid_t tid);
static int copy_result(perf__modules_t *mods, slot_t *s, perf__sampler_shot_t *shot);
static int capture_blocked(perf__modules_t *mods, pid_t tid, perf__sampler_shot_t *shot);
static int64_t handler_time_ns(const slot_t *s);
static int may_signal(pid_t tid, bool check_leaving, perf__mask_look_t *mask_look);
static int confirm_unmasked(slot_t *s);
static void atfork_prepare(void);
static void atfork_parent(void);
static void atfork_child(void);

int perf__sampler_capture(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                          size_t *count) {
  /* Not through perf__sampler_capture_status: a capture of the calling
     thread shows the frames between here and the signal, few is better. */
  perf__sampler_shot_t shot = {.tid = tid, .pcs = pcs, .max = max};
  int err = capture_shot(mods, &shot);
  *count = shot.count;
  return err;
}

int perf__sampler_capture_status(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                                 size_t *count, perf__walk_status_t *status) {
  perf__sampler_shot_t shot = {.tid = tid, .pcs = pcs, .max = max};
  int err = capture_shot(mods, &shot);
  *count = shot.count;
  *status = shot.status;
  return err;
}

int perf__sampler_capture_shot(perf__modules_t *mods, perf__sampler_shot_t *shot) {
  return capture_shot(mods, shot);
}

int perf__sampler_capture_threads(perf__modules_t *mods, perf__sampler_shot_t *shots, size_t n,
                                  size_t in_flight) {
  if (!mods || (n && !shots) || in_flight < 1 || in_flight > PERF__SAMPLER_IN_FLIGHT_MAX)
    return PERF_E_INVALID_ARGUMENT;
  for (size_t i = 0; i < n; i++) {
    shots[i].err = SHOT_LATER;
    shots[i].count = 0;
    shots[i].status = PERF__WALK_NO_RULE;
    shots[i].taken_ns = 0;
    shots[i].on_cpu = shots[i].woken = false;
    shots[i].state = PERF__SAMPLE_STATE_UNKNOWN;
  }
  if (in_flight > 1) {
    pthread_mutex_lock(&g_lock);
    if (install_locked() == PERF_OK) snapshot_locked(mods, shots, n, in_flight);
    pthread_mutex_unlock(&g_lock);
  }
  for (size_t i = 0; i < n; i++)
    if (shots[i].err == SHOT_LATER) capture_shot(mods, &shots[i]);
  return PERF_OK;
}

/* A walk that reached a module whose rules are still to be compiled has
   them compiled here, off the sampler's lock, and the thread is asked
   again; each round compiles one more module, so a stack's first capture
   takes as many rounds as it crosses new modules (bounded). */
#define MAX_RULE_ROUNDS 24

static int capture_shot(perf__modules_t *mods, perf__sampler_shot_t *shot) {
  int err = capture_once(mods, shot);
  for (int round = 0; round < MAX_RULE_ROUNDS && shot->status == PERF__WALK_RULES_PENDING &&
                      (err == PERF_OK || err == PERF_E_TRUNCATED) && shot->count > 0;
       round++) {
    if (!perf__modules_compile_rules(mods, shot->pcs[shot->count - 1])) break;
    err = capture_once(mods, shot);
  }
  if (shot->status == PERF__WALK_RULES_PENDING) { /* out of rounds, or not compiled */
    shot->status = PERF__WALK_NO_RULE;
    if (shot->count > 1) shot->count--; /* maybe an unchecked candidate (unwind_rules.h) */
  }
  shot->err = err;
  return err;
}

static int capture_once(perf__modules_t *mods, perf__sampler_shot_t *shot) {
  shot->count = 0;
  shot->status = PERF__WALK_NO_RULE;
  shot->taken_ns = 0;
  shot->on_cpu = shot->woken = false;
  shot->state = PERF__SAMPLE_STATE_UNKNOWN;
  if (!mods || !shot->pcs || shot->max == 0 || shot->tid < 0) return PERF_E_INVALID_ARGUMENT;
  pthread_mutex_lock(&g_lock);
  int err = install_locked();
  g_requester = perf__gettid();
  pid_t tid = shot->tid ? shot->tid : g_requester;
  bool self = tid == g_requester;
  if (!err && self && perf__send_check_masked_here(g_signo))
    err = PERF_E_TIMEOUT; /* it would never come */
  /* One /proc read for the usual case: a thread last seen running is
     asked through the signal, whose last look before the send (may_signal,
     status: State and SigBlk) also sends a thread found blocked to the
     blocked path; a thread last seen blocked is looked at there first
     (syscall). */
  bool blocked_first = !err && !self && perf__blocked_last_seen(tid);
  for (int look = 0; !err; look++) {
    if (look == BLOCKED_ATTEMPTS) {
      err = PERF_E_TIMEOUT; /* kept changing between running and blocked */
      break;
    }
    if (blocked_first && (err = capture_blocked(mods, tid, shot)) != PERF__TRY_SIGNAL) break;
    err = capture_signalled(mods, tid, shot, blocked_first);
    if (err != REQUEST_NOW_BLOCKED) break;
    err = PERF_OK;
    blocked_first = true;
  }
  pthread_mutex_unlock(&g_lock);
  return err;
}

/* Capture tid through the signal; REQUEST_NOW_BLOCKED when it turned out
   blocked at the last look (nothing was sent). */
static int capture_signalled(perf__modules_t *mods, pid_t tid, perf__sampler_shot_t *shot,
                             bool check_leaving) {
  int err;
  slot_t *s = claim_slot(tid, &err);
  if (!err) err = prepare_slot(s, mods);
  if (err) return err;
  /* The first capture of a thread learns where its stack is from the
     handler's report of sp, then asks again. A thread found blocking the
     signal after the send is asked again with its mask read first. */
  perf__mask_look_t mask_look = PERF__MASK_WHILE_FLYING;
  for (int ask = 0;; ask++) {
    err = send_request(s, shot, tid, check_leaving, mask_look);
    if (!err) err = await_request(s, WAIT_SPIN_NS);
    if (err == REQUEST_RETRACTED && mask_look == PERF__MASK_WHILE_FLYING) {
      mask_look = PERF__MASK_BEFORE;
      ask--;
      continue;
    }
    if (err != REQUEST_NEED_BOUNDS) break;
    if (ask == 1) {
      err = PERF_E_SYSTEM;
      break;
    }
    if ((err = learn_bounds(tid, s->sp)) != PERF_OK) break;
  }
  if (!err) err = copy_result(mods, s, shot);
  return err;
}

/* ---- the snapshot: every request sent, then every answer collected ---- */

static void snapshot_locked(perf__modules_t *mods, perf__sampler_shot_t *shots, size_t n,
                            size_t in_flight) {
  slot_t *flying[PERF__SAMPLER_IN_FLIGHT_MAX];
  size_t n_flying = 0;
  g_requester = perf__gettid();
  for (size_t i = 0; i < n; i++) {
    if (shots[i].tid <= 0 || shots[i].tid == g_requester || !shots[i].pcs || !shots[i].max)
      continue; /* left for capture_shot */
    if (n_flying == in_flight) collect_oldest(mods, shots, flying, &n_flying);
    slot_t *s = start_shot(mods, &shots[i], i);
    if (s) flying[n_flying++] = s;
  }
  while (n_flying > 0)
    collect_oldest(mods, shots, flying, &n_flying);
}

/* Capture a blocked thread at once, or send a running one its request:
   the slot now in flight, or NULL when the shot is finished (or left for
   capture_shot: no free slot). The looks are capture_once's. */
static slot_t *start_shot(perf__modules_t *mods, perf__sampler_shot_t *shot, size_t index) {
  pid_t tid = shot->tid;
  bool blocked_first = perf__blocked_last_seen(tid);
  for (int look = 0; look < BLOCKED_ATTEMPTS; look++) {
    int err;
    if (blocked_first && (err = capture_blocked(mods, tid, shot)) != PERF__TRY_SIGNAL) {
      finish_shot(shot, err);
      return NULL;
    }
    slot_t *s = claim_slot(tid, &err);
    if (!err) err = prepare_slot(s, mods);
    if (!err) err = send_request(s, shot, tid, blocked_first, PERF__MASK_BEFORE);
    if (!err) {
      s->shot = index;
      return s;
    }
    if (err != REQUEST_NOW_BLOCKED) {
      finish_shot(shot, err == PERF_E_BUSY ? SHOT_LATER : err);
      return NULL;
    }
    blocked_first = true;
  }
  finish_shot(shot, PERF_E_TIMEOUT);
  return NULL;
}

/* Wait for the oldest request in flight and file its answer. */
static void collect_oldest(perf__modules_t *mods, perf__sampler_shot_t *shots, slot_t **flying,
                           size_t *n_flying) {
  slot_t *s = flying[0];
  memmove(flying, flying + 1, (*n_flying - 1) * sizeof *flying);
  (*n_flying)--;
  perf__sampler_shot_t *shot = &shots[s->shot];
  /* No spinning here: a target sharing the requester's CPU could not run
     (and answer) while the requester spins, and with several requests in
     flight the futex wake-up's latency overlaps the others' answers
     (sampler_bench --snapshot: 4 threads are read several times closer
     together than with a spin per request). */
  int err = await_request(s, 0);
  if (err == REQUEST_NEED_BOUNDS) {
    /* The thread's first capture: its bounds now known, capture_shot asks
       it again. */
    learn_bounds(s->tid, s->sp);
    err = SHOT_LATER;
  } else if (!err) {
    err = copy_result(mods, s, shot);
  }
  finish_shot(shot, err);
}

/* A walk that stopped at rules still to be compiled goes to capture_shot,
   which compiles them. */
static void finish_shot(perf__sampler_shot_t *shot, int err) {
  bool walked = err == PERF_OK || err == PERF_E_TRUNCATED;
  shot->err = walked && shot->status == PERF__WALK_RULES_PENDING ? SHOT_LATER : err;
}

void perf_sampler_options_init(perf_sampler_options_t *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->unwind_mode = PERF_UNWIND_CFI;
  opts->timeout_ms = 1000;
  opts->stack_copy_bytes = 32768;
}

int perf_sampler_configure(const perf_sampler_options_t *opts) {
  if (!opts) return PERF_E_INVALID_ARGUMENT;
  perf_sampler_options_t o = *opts;
  perf__sampler_options_apply_env(&o);
  int err = perf__sampler_options_validate(&o);
  if (err) return err;
  if (!perf__call_enter()) return PERF_E_BUSY; /* a signal handler inside a capture */
  pthread_mutex_lock(&g_lock);
  if (g_signo && (o.signal && o.signal != g_signo)) err = PERF_E_ALREADY_INITIALIZED;
  if (g_signo && o.stack_copy_bytes != g_opts.stack_copy_bytes) err = PERF_E_ALREADY_INITIALIZED;
  if (!err) {
    if (g_signo) o.signal = g_opts.signal;
    g_opts = o;
  }
  pthread_mutex_unlock(&g_lock);
  perf__call_leave();
  return err;
}

int perf_sampler_signal(void) {
  if (!perf__call_enter()) return PERF_E_BUSY; /* a signal handler inside a capture */
  pthread_mutex_lock(&g_lock);
  int err = install_locked();
  int signo = err ? err : g_signo;
  pthread_mutex_unlock(&g_lock);
  perf__call_leave();
  return signo;
}

pid_t perf_main_thread_id(void) {
  return getpid();
}

void perf__sampler_close_files(void) {
  pthread_mutex_lock(&g_lock);
  perf__task_files_close_all();
  pthread_mutex_unlock(&g_lock);
}

void perf__sampler_release_idle(void) {
  pthread_mutex_lock(&g_lock);
  perf__blocked_release_idle();
  pthread_mutex_unlock(&g_lock);
}

int perf__sampler_unwind_mode(void) {
  pthread_mutex_lock(&g_lock);
  int err = install_locked();
  int mode = err ? err : (int)g_opts.unwind_mode;
  pthread_mutex_unlock(&g_lock);
  return mode;
}

int perf__sampler_timer_target(pid_t tid, uintptr_t *lo, uintptr_t *hi) {
  pthread_mutex_lock(&g_lock);
  int err = install_locked();
  if (!err && perf__send_check_masked(tid, g_signo)) err = PERF_E_TIMEOUT;
  perf__stack_bounds_t *b = err ? NULL : bounds_of_locked(tid);
  *lo = b ? b->lo : 0;
  *hi = b ? b->hi : 0;
  pthread_mutex_unlock(&g_lock);
  return err;
}

bool perf__sampler_blocked_bounds(pid_t tid, uintptr_t *lo, uintptr_t *hi) {
  pthread_mutex_lock(&g_lock);
  perf__stack_bounds_t *b = bounds_of_locked(tid);
  *lo = b ? b->lo : 0;
  *hi = b ? b->hi : 0;
  pthread_mutex_unlock(&g_lock);
  return b != NULL;
}

/* tid's stack bounds: known, else learned from the sp the kernel shows
   while it is blocked (/proc/self/task/TID/syscall); NULL when it is
   running (its sp is not known until a sample). */
static perf__stack_bounds_t *bounds_of_locked(pid_t tid) {
  perf__stack_bounds_t *b = perf__stack_bounds_find(tid);
  perf__thread_state_t ts;
  if (!b && perf__thread_state_read(tid, &ts) == PERF_OK && !ts.running && ts.sp &&
      perf__stack_bounds_learn(tid, ts.sp, &b) != PERF_OK)
    b = NULL;
  return b;
}

int perf__sampler_learn_bounds(pid_t tid, uintptr_t sp, uintptr_t *lo, uintptr_t *hi) {
  pthread_mutex_lock(&g_lock);
  perf__stack_bounds_t *b = perf__stack_bounds_find(tid);
  int err = b && sp >= b->lo && sp < b->hi ? PERF_OK : perf__stack_bounds_learn(tid, sp, &b);
  if (!err) {
    *lo = b->lo;
    *hi = b->hi;
  }
  pthread_mutex_unlock(&g_lock);
  return err;
}

void perf__sampler_retract_if_masked(pid_t tid) {
  pthread_mutex_lock(&g_lock);
  /* Under the lock no request of the requester path is in flight. */
  if (g_signo && perf__send_check_masked(tid, g_signo)) perf__signal_action_retract_pending();
  pthread_mutex_unlock(&g_lock);
}

uint64_t perf__sampler_last_handler_cycles(void) {
  pthread_mutex_lock(&g_lock);
  uint64_t c = g_last_handler_cycles;
  pthread_mutex_unlock(&g_lock);
  return c;
}

static int install_locked(void) {
  if (g_signo) return PERF_OK;
  if (g_opts.timeout_ms == 0) { /* never configured: defaults, then the environment */
    perf_sampler_options_init(&g_opts);
    perf__sampler_options_apply_env(&g_opts);
    if (perf__sampler_options_validate(&g_opts) != 0) perf_sampler_options_init(&g_opts);
  }
  /* Allocated once and never freed: a late handler may touch a slot at any
     time in the life of the process. */
  if (!g_slots && !(g_slots = calloc(SLOT_COUNT, sizeof *g_slots))) return PERF_E_NO_MEMORY;
  int signo = perf__signal_action_choose(g_opts.signal);
  if (signo < 0) return signo;
  g_pid = getpid();
  g_uid = getuid();
  int err = perf__signal_action_install(signo, on_sample_signal);
  if (err) return err;
  g_opts.signal = signo;
  g_signo = signo; /* last: the install is complete */
  return PERF_OK;
}

static void on_sample_signal(int signo, siginfo_t *si, void *ucv) {
  (void)signo;
  uint64_t t0 = perf__arch_cycles();
  int saved_errno = errno;
  if (si->si_code == SI_TIMER) { /* a CPU-timer profile's (cpu_timers.c) */
    perf__cpu_timers_on_signal(si, ucv);
    goto out;
  }
  if (si->si_code != SI_QUEUE || si->si_pid != g_pid || !g_slots) goto out;
  uintptr_t token = (uintptr_t)si->si_value.sival_ptr;
  uint32_t idx = (uint32_t)(token & 0xff), seq = (uint32_t)(token >> 8);
  if (idx >= SLOT_COUNT) goto out;
  slot_t *s = &g_slots[idx];
  uint32_t expect = STATE(seq, SLOT_PENDING);
  if (!atomic_compare_exchange_strong(&s->state, &expect, STATE(seq, SLOT_WRITING))) {
    /* Too late: the requester gave up. Acknowledge so the slot frees up. */
    expect = STATE(seq, SLOT_CANCELLED);
    atomic_compare_exchange_strong(&s->state, &expect, STATE(seq, SLOT_FREE));
    goto out;
  }
  s->entry_cycles = t0;
  perf__unwind_regs_t regs;
  perf__arch_context_regs(ucv, &regs);
  s->sp = regs.sp;
  s->count = 0;
  if (regs.sp < s->stack_lo || regs.sp >= s->stack_hi) {
    s->result = RESULT_NEED_BOUNDS;
  } else if (s->mode == PERF_UNWIND_STACK_COPY) {
    perf__arch_context_dwarf_regs(ucv, s->regs);
    s->copy_base = regs.sp & ~(uintptr_t)7; /* the mapping starts page-aligned below */
    size_t avail = s->stack_hi - s->copy_base;
    s->copy_len = (avail < s->copy_cap ? avail : s->copy_cap) & ~(size_t)7;
    copy_stack(s->copy_buf, s->copy_base, s->copy_len);
    s->result = RESULT_STACK;
  } else {
    size_t max = s->max < PERF__MAX_FRAMES ? s->max : PERF__MAX_FRAMES;
    /* The thread's own stack: readable in place from the interrupted sp. */
    perf__stack_window_t stack = {regs.sp, s->stack_hi, (const uint8_t *)regs.sp};
    s->count = perf__unwind_walk(s->unwind, s->mode == PERF_UNWIND_CFI, regs, stack, s->pcs, max,
                                 &s->walk_status);
    s->result = RESULT_STACK;
  }
  s->handler_cycles = perf__arch_cycles() - t0;
  atomic_store(&s->state, STATE(seq, SLOT_DONE));
  syscall(SYS_futex, &s->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
out:
  errno = saved_errno;
}

/* A word-by-word copy of the target's stack top (len is a multiple of 8:
   sp and the mapping end are 8-aligned). Not memcpy: ASan would flag the
   redzones of the frames it reads, and a libc call is one more thing the
   handler would depend on. */
static void copy_stack(uint8_t *dst, uintptr_t src, size_t len) {
  const volatile uint64_t *from = (const volatile uint64_t *)src;
  uint64_t *to = (uint64_t *)dst;
  for (size_t i = 0; i < len / 8; i++)
    to[i] = from[i];
}

/* The slot's request fields that do not depend on the thread. */
static int prepare_slot(slot_t *s, perf__modules_t *mods) {
  s->mode = g_opts.unwind_mode;
  if (s->mode == PERF_UNWIND_STACK_COPY && !s->copy_buf) {
    s->copy_cap = g_opts.stack_copy_bytes;
    s->copy_buf = malloc(s->copy_cap);
    if (!s->copy_buf) return PERF_E_NO_MEMORY;
  }
  if (s->pinned != mods) {
    atomic_fetch_add(&mods->refs, 1);
    perf__modules_release(s->pinned);
    s->pinned = mods;
  }
  s->unwind = mods->unwind;
  return PERF_OK;
}

/* The last look at tid (may_signal), then the signal, and with
   PERF__MASK_WHILE_FLYING the look at its mask. Returns 0 (the request is in
   flight: await_request), REQUEST_NOW_BLOCKED (nothing sent),
   REQUEST_RETRACTED (sent to a thread blocking it, and taken back), or an
   error. */
static int send_request(slot_t *s, const perf__sampler_shot_t *shot, pid_t tid, bool check_leaving,
                        perf__mask_look_t mask_look) {
  int err = may_signal(tid, check_leaving, &mask_look);
  if (err) return err;
  perf__stack_bounds_t *b = perf__stack_bounds_find(tid);
  s->tid = tid;
  s->max = shot->max;
  /* Only a shot that asks whether its thread was on a CPU pays the read. */
  s->run_delay_ns = shot->want_on_cpu && tid != g_requester ? perf__thread_run_delay_ns(tid) : -1;
  s->stack_lo = b ? b->lo : 0;
  s->stack_hi = b ? b->hi : 0;
  g_seq = (g_seq + 1) & (UINT32_MAX >> 3);
  s->seq = g_seq;
  atomic_store(&s->state, STATE(s->seq, SLOT_PENDING));

  siginfo_t info;
  memset(&info, 0, sizeof info);
  info.si_signo = g_signo;
  info.si_code = SI_QUEUE;
  info.si_pid = g_pid;
  info.si_uid = g_uid;
  info.si_value.sival_ptr = (void *)(((uintptr_t)s->seq << 8) | (uintptr_t)(s - g_slots));
  if (syscall(SYS_rt_tgsigqueueinfo, g_pid, tid, g_signo, &info) != 0) {
    int e = errno;
    atomic_store(&s->state, STATE(s->seq, SLOT_FREE));
    if (e == ESRCH) {
      perf__stack_bounds_forget(tid);
      return PERF_E_NO_THREAD;
    }
    if (e == EAGAIN) return PERF_E_BUSY; /* the real-time signal queue is full */
    PERF__FAIL(PERF_E_SYSTEM, "rt_tgsigqueueinfo(%d): %s", (int)tid, strerror(e));
  }
  s->sent_ns = perf__now_ns();
  s->sent_cycles = perf__arch_cycles();
  s->in_flight = true;
  return mask_look == PERF__MASK_WHILE_FLYING ? confirm_unmasked(s) : PERF_OK;
}

/* Wait for the answer to s's request until the capture timeout (from its
   send). Returns 0 (stack in the slot), REQUEST_NEED_BOUNDS (s->sp holds
   the thread's sp), or an error. */
static int await_request(slot_t *s, long long spin_ns) {
  int err =
      wait_for_slot(s, s->seq, s->sent_ns + (long long)g_opts.timeout_ms * 1000000LL, spin_ns);
  if (err)
    err = finish_timeout(s, s->seq, s->tid);
  else
    err = s->result == RESULT_NEED_BOUNDS ? REQUEST_NEED_BOUNDS : PERF_OK;
  s->in_flight = false;
  return err;
}

static int learn_bounds(pid_t tid, uintptr_t sp) {
  perf__stack_bounds_t *learned;
  int err = perf__stack_bounds_learn(tid, sp, &learned);
  if (err == PERF_E_SYSTEM)
    perf__log(PERF__LOG_ERROR, "thread %d: no readable mapping holds its sp", (int)tid);
  return err;
}

/* A slot that no handler can still write and no snapshot still has to
   collect. Fails with PERF_E_TIMEOUT when a recent request to the same
   thread is still undelivered, PERF_E_BUSY when one is in flight to it
   (never two requests in flight to one thread) or every slot is taken. */
static slot_t *claim_slot(pid_t tid, int *err) {
  slot_t *pick = NULL, *expired = NULL;
  long long now = perf__now_ns();
  for (int i = 0; i < SLOT_COUNT; i++) {
    slot_t *s = &g_slots[i];
    uint32_t kind = STATE_KIND(atomic_load(&s->state));
    bool held = now - s->cancelled_at_ns < CANCELLED_HOLD_NS;
    if ((kind == SLOT_CANCELLED && held && s->tid == tid) || (s->in_flight && s->tid == tid)) {
      *err = s->in_flight ? PERF_E_BUSY : PERF_E_TIMEOUT;
      return NULL;
    }
    if ((kind == SLOT_FREE || kind == SLOT_DONE) && !s->in_flight && !pick) pick = s;
    if (kind == SLOT_CANCELLED && !held && !expired) expired = s;
  }
  /* An expired cancelled slot gets a new sequence number: its old signal,
     if it ever arrives, will not match. */
  pick = pick ? pick : expired;
  *err = pick ? PERF_OK : PERF_E_BUSY;
  return pick;
}

static int wait_for_slot(slot_t *s, uint32_t seq, long long deadline_ns, long long spin_ns) {
  long long start = perf__now_ns();
  /* A busy target answers within microseconds: spin that long before
     sleeping on the futex (a futex wake-up costs more than the handler). */
  while (atomic_load(&s->state) != STATE(seq, SLOT_DONE) && perf__now_ns() - start < spin_ns)
    perf__arch_pause();
  for (;;) {
    uint32_t st = atomic_load(&s->state);
    if (st == STATE(seq, SLOT_DONE)) {
      perf__send_check_answered(s->tid);
      return PERF_OK;
    }
    long long left = deadline_ns - perf__now_ns();
    if (left <= 0) return PERF_E_TIMEOUT;
    struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
    syscall(SYS_futex, &s->state, FUTEX_WAIT_PRIVATE, st, &ts, NULL, 0);
  }
}

static int finish_timeout(slot_t *s, uint32_t seq, pid_t tid) {
  uint32_t expect = STATE(seq, SLOT_PENDING);
  if (atomic_compare_exchange_strong(&s->state, &expect, STATE(seq, SLOT_CANCELLED))) {
    s->cancelled_at_ns = perf__now_ns();
  } else if (wait_for_slot(s, seq, perf__now_ns() + WRITING_GRACE_MS * 1000000LL, 0) == PERF_OK) {
    return s->result == RESULT_NEED_BOUNDS ? REQUEST_NEED_BOUNDS : PERF_OK;
  }
  /* Distinguish a thread that exited from one that did not answer, and
     both from a handler the app replaced with its own. */
  if (syscall(SYS_tgkill, g_pid, tid, 0) != 0 && errno == ESRCH) {
    perf__stack_bounds_forget(tid);
    return PERF_E_NO_THREAD;
  }
  if (perf__signal_action_replaced())
    PERF__FAIL(PERF_E_SIGNAL, "sampler signal %d has been taken over by another handler", g_signo);
  return PERF_E_TIMEOUT;
}

/* When the handler began, on the monotonic clock: placed between the send
   and now by the cycle counter (read in the handler instead of the clock,
   which costs the target more than the counter on some machines). */
static int64_t handler_time_ns(const slot_t *s) {
  int64_t now_ns = perf__now_ns();
  uint64_t now_cycles = perf__arch_cycles();
  if (now_cycles <= s->sent_cycles || s->entry_cycles < s->sent_cycles) return s->sent_ns;
  if (s->entry_cycles >= now_cycles) return now_ns;
  double part = (double)(s->entry_cycles - s->sent_cycles) / (double)(now_cycles - s->sent_cycles);
  return s->sent_ns + (int64_t)(part * (double)(now_ns - s->sent_ns));
}

/* Whether the thread was found on its way out of a wait rather than
   running: the handler ran as a system call returned (the interrupted pc
   just after a system call instruction) and the thread had waited for a
   CPU in between (its run delay moved since the send: woken, runnable,
   not yet running). Only a running or runnable thread is signalled
   (may_signal); such a thread was in the call it waited in. */
static bool woken_in_call(const slot_t *s, uintptr_t pc) {
  size_t n = perf__arch.syscall_insn_len;
  unsigned char code[sizeof perf__arch.syscall_insn];
  if (s->run_delay_ns < 0 || !n || pc < n || perf__memory_copy(code, pc - n, n) != n ||
      memcmp(code, perf__arch.syscall_insn, n) != 0)
    return false;
  int64_t delay = perf__thread_run_delay_ns(s->tid);
  return delay >= 0 && delay != s->run_delay_ns;
}

static int copy_result(perf__modules_t *mods, slot_t *s, perf__sampler_shot_t *shot) {
  g_last_handler_cycles = s->handler_cycles;
  shot->taken_ns = handler_time_ns(s);
  int err;
  shot->state = PERF__SAMPLE_STATE_RUNNING; /* the signal reached it in user code */
  if (s->mode == PERF_UNWIND_STACK_COPY) {
    perf__dwfl_unwinder_t *u = perf__modules_dwfl_unwinder(mods);
    if (!u) return PERF_E_UNSUPPORTED;
    err = perf__dwfl_unwind(u, s->regs, s->copy_base, s->copy_buf, s->copy_len, shot->pcs,
                            shot->max, &shot->count, &shot->status);
  } else {
    memcpy(shot->pcs, s->pcs, s->count * sizeof *shot->pcs);
    shot->count = s->count;
    shot->status = s->walk_status;
    err = s->walk_status == PERF__WALK_DEPTH ? PERF_E_TRUNCATED : PERF_OK;
  }
  shot->woken = shot->count > 0 && woken_in_call(s, shot->pcs[0]);
  shot->on_cpu = shot->count > 0 && !shot->woken;
  return err;
}

/* blocked_capture.c's capture with this sampler's timeout. */
static int capture_blocked(perf__modules_t *mods, pid_t tid, perf__sampler_shot_t *shot) {
  return perf__blocked_capture(mods, tid, shot, g_opts.timeout_ms);
}

/* Whether a signal may be sent to tid now (perf__send_check). The
   requester's own mask is the caller's (perf__send_check_masked_here): for
   it only the handler is looked at. */
static int may_signal(pid_t tid, bool check_leaving, perf__mask_look_t *mask_look) {
  if (tid == g_requester) {
    *mask_look = PERF__MASK_BEFORE;
    return perf__signal_action_is_ours() ? PERF_OK : PERF_E_SIGNAL;
  }
  return perf__send_check(tid, g_signo, g_opts.timeout_ms, check_leaving, mask_look);
}

/* The look at the mask of a thread just signalled, while the signal flies
   (its round trip hides most of the read). A thread that blocks the
   signal would keep it pending (and an exec would die of it): unless its
   handler already took the request, the request is cancelled and the
   signal taken back (perf__signal_action_retract_pending: only single
   captures come here, under g_lock, so no other request of ours is in
   flight; a cancelled one's late signal is dropped too, as its handler
   would). PERF_OK (await the answer),
   REQUEST_RETRACTED, or PERF_E_TIMEOUT when it could not be taken back
   (the slot is then held like a timed-out request's). */
static int confirm_unmasked(slot_t *s) {
  if (!perf__send_check_masked(s->tid, g_signo)) return PERF_OK;
  uint32_t expect = STATE(s->seq, SLOT_PENDING);
  if (!atomic_compare_exchange_strong(&s->state, &expect, STATE(s->seq, SLOT_CANCELLED)))
    return PERF_OK; /* delivered: the handler has it */
  s->in_flight = false;
  if (perf__signal_action_retract_pending() != PERF_OK) {
    s->cancelled_at_ns = perf__now_ns();
    return PERF_E_TIMEOUT;
  }
  /* Nothing of it is pending any more; a handler already entered finds
     another state and writes nothing. */
  atomic_store(&s->state, STATE(s->seq, SLOT_FREE));
  return REQUEST_RETRACTED;
}

/* A fork while a capture is in flight would leave the child's lock held. */
/* At load, before any thread can take g_lock: a fork while another thread
   holds it (the writer's first capture right after init) must wait for it,
   or the child inherits it locked. The module cache's handlers first, so
   its prepare runs after ours (last registered, first run): g_lock, then
   the cache's lock, the order captures take them in. */
__attribute__((constructor)) static void register_fork_handlers(void) {
  perf__modules_fork_register();
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void atfork_prepare(void) {
  pthread_mutex_lock(&g_lock);
}
static void atfork_parent(void) {
  pthread_mutex_unlock(&g_lock);
}
static void atfork_child(void) {
  g_pid = getpid();
  perf__stack_bounds_reset();   /* the child's only thread has a new id */
  perf__task_files_close_all(); /* they name the parent's threads */
  perf__cpu_timers_atfork_child();
  pthread_mutex_unlock(&g_lock);
}
