/*
 * signal_sampler.c - captures any thread's stack on Linux by sending it a
 * dedicated real-time signal (see sampler.h).
 *
 * Two sides:
 *  - the requester (any thread calling perf__sampler_capture; one capture at
 *    a time under g_lock) fills a request slot, sends the signal with
 *    rt_tgsigqueueinfo carrying (slot index, sequence number), and waits on
 *    the slot's state word with a futex and a timeout;
 *  - the signal handler, on the target thread, claims the slot only if the
 *    state still holds that exact sequence number, walks (or copies) the
 *    stack into the slot's preallocated storage, and wakes the requester.
 * A late handler (after the requester gave up) finds another sequence
 * number in the slot and writes nothing.
 *
 * A thread blocked in a system call is never signalled: a handler would end
 * nanosleep, poll, epoll_wait and the like early with EINTR. Its user stack
 * is frozen while it blocks, so the requester reads its sp and pc from
 * /proc (thread_state.h), copies the stack and walks the copy with the same
 * rules; the copy counts only if the thread is still blocked in the same
 * call at the same place afterwards. Before any signal is sent the target
 * must not block it (SigBlk: a pending signal would kill a program the
 * thread execs) and the handler must still be ours. docs/architecture.md,
 * "Threads blocked in a system call", has the measurements and the race
 * that remains.
 *
 * Slot state word: (sequence << 3) | state.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
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
#include "sdk/sampler/dwfl_unwind.h"
#include "sdk/sampler/sampler.h"
#include "sdk/sampler/sampler_options.h"
#include "sdk/sampler/stack_bounds.h"
#include "sdk/sampler/thread_state.h"

enum { SLOT_FREE = 0, SLOT_PENDING = 1, SLOT_WRITING = 2, SLOT_DONE = 3, SLOT_CANCELLED = 4 };
enum { RESULT_STACK = 0, RESULT_NEED_BOUNDS = 1 };
/* request()'s positive answers: the handler reported sp, not a stack; the
   thread was found blocked at the last look before the send (nothing sent). */
enum { REQUEST_NEED_BOUNDS = 1, REQUEST_NOW_BLOCKED = 2 };
enum { SLOT_COUNT = 8 };
#define STATE(seq, st) (((seq) << 3) | (uint32_t)(st))
#define STATE_KIND(word) ((word)&7u)
/* How long a request that timed out still blocks new ones to the same
   thread (its signal may still be pending there). */
#define CANCELLED_HOLD_NS 1000000000LL
/* Extra wait for a handler that already claimed the slot when the timeout
   fired: it only has a bounded walk left to do. */
#define WRITING_GRACE_MS 50
/* The most of a blocked thread's stack that is copied (from its sp up); a
   deeper stack's walk ends as a bad read there. */
#define BLOCKED_COPY_MAX (256 * 1024)
/* Readings of a blocked thread that may disagree (it woke and blocked
   again elsewhere) before the capture gives up with PERF_E_TIMEOUT. */
#define BLOCKED_ATTEMPTS 4
/* How long may_signal() spins (then sleeps) while a target blocks the signal. */
#define MASK_SPIN_NS 200000LL
/* CPU time a thread woken from a blocking call uses at most before it is
   back in user space (the kernel's return path takes microseconds). */
#define EXIT_CPU_NS 200000LL
/* How long the requester spins for the handler's answer before it sleeps. */
#define WAIT_SPIN_NS 50000LL
/* capture_blocked()'s answer when the thread is running: signal it. */
#define TRY_SIGNAL 1

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
  uintptr_t pcs[PERF__MAX_FRAMES];
  /* requester-only bookkeeping */
  pid_t tid;
  perf__modules_t *pinned; /* keeps `unwind` alive while a handler may read it */
  long long cancelled_at_ns;
} slot_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static slot_t *g_slots; /* SLOT_COUNT slots, allocated at install */
static int g_signo;
static pid_t g_pid; /* checked in the handler: only our own requests count */
static uint32_t g_seq;
static uint64_t g_last_handler_cycles;
static perf_sampler_options_t g_opts;
static uint8_t *g_blocked_copy;     /* BLOCKED_COPY_MAX bytes, made on first use */
static bool g_lost_logged;          /* the handler was replaced: said once */
static pid_t g_masked_tid;          /* the last thread found blocking the signal, */
static long long g_masked_until_ns; /* refused at once until then */

static int install_locked(void);
static int pick_free_signal(void);
static void on_sample_signal(int signo, siginfo_t *si, void *ucv);
static void copy_stack(uint8_t *dst, uintptr_t src, size_t len)
    __attribute__((no_sanitize_address));
static int capture_once(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max, size_t *count,
                        perf__walk_status_t *status);
static int request(slot_t *s, pid_t tid, int mode, size_t max);
static slot_t *claim_slot(pid_t tid, int *err);
static int wait_for_slot(slot_t *s, uint32_t seq, unsigned timeout_ms);
static int finish_timeout(slot_t *s, uint32_t seq, pid_t tid);
static int copy_result(perf__modules_t *mods, slot_t *s, uintptr_t *pcs, size_t max, size_t *count,
                       perf__walk_status_t *status);
static int capture_blocked(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                           size_t *count, perf__walk_status_t *status);
static int may_signal(pid_t tid);
static int capture_signalled(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                             size_t *count, perf__walk_status_t *status);
static bool handler_is_ours(void);
static bool leaving_call(pid_t tid);
static void pause_briefly(long long start);
static int signal_blocked_here(void);
static void atfork_prepare(void);
static void atfork_parent(void);
static void atfork_child(void);

int perf__sampler_capture(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                          size_t *count) {
  perf__walk_status_t status;
  return perf__sampler_capture_status(mods, tid, pcs, max, count, &status);
}

/* A walk that reached a module whose rules are still to be compiled has
   them compiled here, off the sampler's lock, and the thread is asked
   again; each round compiles one more module, so a stack's first capture
   takes as many rounds as it crosses new modules (bounded). */
#define MAX_RULE_ROUNDS 24

int perf__sampler_capture_status(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                                 size_t *count, perf__walk_status_t *status) {
  int err = capture_once(mods, tid, pcs, max, count, status);
  for (int round = 0; round < MAX_RULE_ROUNDS && *status == PERF__WALK_RULES_PENDING &&
                      (err == PERF_OK || err == PERF_E_TRUNCATED) && *count > 0;
       round++) {
    if (!perf__modules_compile_rules(mods, pcs[*count - 1])) break;
    err = capture_once(mods, tid, pcs, max, count, status);
  }
  if (*status == PERF__WALK_RULES_PENDING) *status = PERF__WALK_NO_RULE;
  return err;
}

static int capture_once(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max, size_t *count,
                        perf__walk_status_t *status) {
  *count = 0;
  *status = PERF__WALK_NO_RULE;
  if (!mods || !pcs || max == 0 || tid < 0) return PERF_E_INVALID_ARGUMENT;
  pthread_mutex_lock(&g_lock);
  int err = install_locked();
  pid_t self = perf__gettid();
  if (tid == 0) tid = self;
  if (!err && tid == self && signal_blocked_here()) err = PERF_E_TIMEOUT; /* it would never come */
  for (int look = 0; !err; look++) {
    if (tid != self) {
      if (look == BLOCKED_ATTEMPTS) {
        err = PERF_E_TIMEOUT; /* kept changing between running and blocked */
        break;
      }
      err = capture_blocked(mods, tid, pcs, max, count, status);
      if (err != TRY_SIGNAL) break;
      err = PERF_OK;
    }
    err = capture_signalled(mods, tid, pcs, max, count, status);
    if (err != REQUEST_NOW_BLOCKED) break;
    err = PERF_OK;
  }
  pthread_mutex_unlock(&g_lock);
  return err;
}

/* Capture tid through the signal; REQUEST_NOW_BLOCKED when it turned out
   blocked at the last look (nothing was sent). */
static int capture_signalled(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                             size_t *count, perf__walk_status_t *status) {
  int err;
  slot_t *s = claim_slot(tid, &err);
  int mode = g_opts.unwind_mode;
  if (!err && mode == PERF_UNWIND_STACK_COPY && !s->copy_buf) {
    s->copy_cap = g_opts.stack_copy_bytes;
    s->copy_buf = malloc(s->copy_cap);
    if (!s->copy_buf) err = PERF_E_NO_MEMORY;
  }
  if (err) return err;
  if (s->pinned != mods) {
    atomic_fetch_add(&mods->refs, 1);
    perf__modules_release(s->pinned);
    s->pinned = mods;
  }
  s->unwind = mods->unwind;
  /* The first capture of a thread learns where its stack is from the
     handler's report of sp, then asks again. */
  err = request(s, tid, mode, max);
  if (err == REQUEST_NEED_BOUNDS) {
    perf__stack_bounds_t *learned;
    err = perf__stack_bounds_learn(tid, s->sp, &learned);
    if (err == PERF_E_SYSTEM)
      perf__log(PERF__LOG_ERROR, "thread %d: no readable mapping holds its sp", (int)tid);
    if (!err) err = request(s, tid, mode, max);
    if (err == REQUEST_NEED_BOUNDS) err = PERF_E_SYSTEM;
  }
  if (!err) err = copy_result(mods, s, pcs, max, count, status);
  return err;
}

void perf_sampler_options_init(perf_sampler_options_t *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->unwind_mode = PERF_UNWIND_CFI;
  opts->timeout_ms = 100;
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
  int signo = g_opts.signal;
  if (signo) {
    struct sigaction old;
    if (sigaction(signo, NULL, &old) != 0 || old.sa_handler != SIG_DFL)
      PERF__FAIL(PERF_E_SIGNAL, "sampler signal %d is invalid or already handled", signo);
  } else if ((signo = pick_free_signal()) == 0) {
    PERF__FAIL(PERF_E_SIGNAL, "no free real-time signal between SIGRTMIN and SIGRTMAX");
  }
  g_pid = getpid();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sample_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(signo, &sa, NULL) != 0)
    PERF__FAIL(PERF_E_SIGNAL, "sigaction(%d) failed: %s", signo, strerror(errno));
  g_opts.signal = signo;
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  g_signo = signo; /* last: the install is complete */
  return PERF_OK;
}

/* The highest real-time signal nobody handles: apps and libraries that use
   real-time signals usually count up from SIGRTMIN. */
static int pick_free_signal(void) {
  for (int s = SIGRTMAX; s >= SIGRTMIN; s--) {
    struct sigaction old;
    if (sigaction(s, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
      return s;
  }
  return 0;
}

static void on_sample_signal(int signo, siginfo_t *si, void *ucv) {
  (void)signo;
  uint64_t t0 = perf__arch_cycles();
  int saved_errno = errno;
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

/* Send one request and wait for it. Returns 0 (stack in the slot),
   REQUEST_NEED_BOUNDS (s->sp holds the thread's sp), or an error. */
static int request(slot_t *s, pid_t tid, int mode, size_t max) {
  perf__stack_bounds_t *b = perf__stack_bounds_find(tid);
  int err = may_signal(tid);
  if (err) return err;
  s->tid = tid;
  s->mode = mode;
  s->max = max;
  s->stack_lo = b ? b->lo : 0;
  s->stack_hi = b ? b->hi : 0;
  g_seq = (g_seq + 1) & (UINT32_MAX >> 3);
  uint32_t seq = g_seq;
  atomic_store(&s->state, STATE(seq, SLOT_PENDING));

  siginfo_t info;
  memset(&info, 0, sizeof info);
  info.si_signo = g_signo;
  info.si_code = SI_QUEUE;
  info.si_pid = g_pid;
  info.si_uid = getuid();
  info.si_value.sival_ptr = (void *)(((uintptr_t)seq << 8) | (uintptr_t)(s - g_slots));
  if (syscall(SYS_rt_tgsigqueueinfo, g_pid, tid, g_signo, &info) != 0) {
    int e = errno;
    atomic_store(&s->state, STATE(seq, SLOT_FREE));
    if (e == ESRCH) {
      perf__stack_bounds_forget(tid);
      return PERF_E_NO_THREAD;
    }
    if (e == EAGAIN) return PERF_E_BUSY; /* the real-time signal queue is full */
    PERF__FAIL(PERF_E_SYSTEM, "rt_tgsigqueueinfo(%d): %s", (int)tid, strerror(e));
  }
  err = wait_for_slot(s, seq, g_opts.timeout_ms);
  if (err) return finish_timeout(s, seq, tid);
  return s->result == RESULT_NEED_BOUNDS ? REQUEST_NEED_BOUNDS : PERF_OK;
}

/* A slot that no handler can still write. Fails with PERF_E_TIMEOUT when a
   recent request to the same thread is still undelivered (never two
   requests in flight to one thread), PERF_E_BUSY when every slot is taken. */
static slot_t *claim_slot(pid_t tid, int *err) {
  slot_t *pick = NULL, *expired = NULL;
  long long now = perf__now_ns();
  for (int i = 0; i < SLOT_COUNT; i++) {
    slot_t *s = &g_slots[i];
    uint32_t kind = STATE_KIND(atomic_load(&s->state));
    bool held = now - s->cancelled_at_ns < CANCELLED_HOLD_NS;
    if (kind == SLOT_CANCELLED && held && s->tid == tid) {
      *err = PERF_E_TIMEOUT;
      return NULL;
    }
    if ((kind == SLOT_FREE || kind == SLOT_DONE) && !pick) pick = s;
    if (kind == SLOT_CANCELLED && !held && !expired) expired = s;
  }
  /* An expired cancelled slot gets a new sequence number: its old signal,
     if it ever arrives, will not match. */
  pick = pick ? pick : expired;
  *err = pick ? PERF_OK : PERF_E_BUSY;
  return pick;
}

static int wait_for_slot(slot_t *s, uint32_t seq, unsigned timeout_ms) {
  long long start = perf__now_ns(), deadline = start + (long long)timeout_ms * 1000000LL;
  /* A busy target answers within microseconds: spin that long before
     sleeping on the futex (a futex wake-up costs more than the handler). */
  while (atomic_load(&s->state) != STATE(seq, SLOT_DONE) && perf__now_ns() - start < WAIT_SPIN_NS)
    perf__arch_pause();
  for (;;) {
    uint32_t st = atomic_load(&s->state);
    if (st == STATE(seq, SLOT_DONE)) return PERF_OK;
    long long left = deadline - perf__now_ns();
    if (left <= 0) return PERF_E_TIMEOUT;
    struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
    syscall(SYS_futex, &s->state, FUTEX_WAIT_PRIVATE, st, &ts, NULL, 0);
  }
}

static int finish_timeout(slot_t *s, uint32_t seq, pid_t tid) {
  uint32_t expect = STATE(seq, SLOT_PENDING);
  if (atomic_compare_exchange_strong(&s->state, &expect, STATE(seq, SLOT_CANCELLED))) {
    s->cancelled_at_ns = perf__now_ns();
  } else if (wait_for_slot(s, seq, WRITING_GRACE_MS) == PERF_OK) {
    return s->result == RESULT_NEED_BOUNDS ? REQUEST_NEED_BOUNDS : PERF_OK;
  }
  /* Distinguish a thread that exited from one that did not answer, and
     both from a handler the app replaced with its own. */
  if (syscall(SYS_tgkill, g_pid, tid, 0) != 0 && errno == ESRCH) {
    perf__stack_bounds_forget(tid);
    return PERF_E_NO_THREAD;
  }
  struct sigaction cur;
  if (sigaction(g_signo, NULL, &cur) == 0 && cur.sa_sigaction != on_sample_signal)
    PERF__FAIL(PERF_E_SIGNAL, "sampler signal %d has been taken over by another handler", g_signo);
  return PERF_E_TIMEOUT;
}

static int copy_result(perf__modules_t *mods, slot_t *s, uintptr_t *pcs, size_t max, size_t *count,
                       perf__walk_status_t *status) {
  g_last_handler_cycles = s->handler_cycles;
  if (s->mode == PERF_UNWIND_STACK_COPY) {
    perf__dwfl_unwinder_t *u = perf__modules_dwfl_unwinder(mods);
    if (!u) return PERF_E_UNSUPPORTED;
    return perf__dwfl_unwind(u, s->regs, s->copy_base, s->copy_buf, s->copy_len, pcs, max, count,
                             status);
  }
  memcpy(pcs, s->pcs, s->count * sizeof *pcs);
  *count = s->count;
  *status = s->walk_status;
  return s->walk_status == PERF__WALK_DEPTH ? PERF_E_TRUNCATED : PERF_OK;
}

/* Capture a thread that is blocked (in a system call or otherwise off the
   CPU) without signalling it; TRY_SIGNAL when it is running. */
static int capture_blocked(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                           size_t *count, perf__walk_status_t *status) {
  long long start = perf__now_ns();
  long long deadline = start + (long long)g_opts.timeout_ms * 1000000LL;
  for (int attempt = 0; attempt < BLOCKED_ATTEMPTS;) {
    perf__thread_state_t before, after;
    int err = perf__thread_state_read(tid, &before);
    if (err == PERF_E_NO_THREAD) perf__stack_bounds_forget(tid);
    if (err == PERF_E_SYSTEM && attempt == 0) return TRY_SIGNAL; /* no /proc: signal, as before */
    if (err) return err;
    if (before.running) {
      if (!leaving_call(tid)) return TRY_SIGNAL;
      if (perf__now_ns() >= deadline) return PERF_E_TIMEOUT;
      pause_briefly(start);
      continue;
    }
    attempt++;
    perf__stack_bounds_t *b = perf__stack_bounds_find(tid);
    if (!b || before.sp < b->lo || before.sp >= b->hi) {
      if ((err = perf__stack_bounds_learn(tid, before.sp, &b)) == PERF_E_SYSTEM)
        PERF__FAIL(err, "thread %d: no readable mapping holds its sp", (int)tid);
      if (err) return err;
    }
    b->blocked_cpu_ns = perf__thread_cpu_ns(tid);
    if (!g_blocked_copy && !(g_blocked_copy = malloc(BLOCKED_COPY_MAX))) return PERF_E_NO_MEMORY;
    uintptr_t base = before.sp & ~(uintptr_t)7;
    size_t len = b->hi - base < BLOCKED_COPY_MAX ? b->hi - base : BLOCKED_COPY_MAX;
    size_t got = perf__memory_copy(g_blocked_copy, base, len) & ~(size_t)7;
    if ((err = perf__thread_state_read(tid, &after)) != PERF_OK) return err;
    if (!perf__thread_state_same_block(&before, &after))
      continue; /* woke (and maybe blocked again): look again */
    if (got == 0) PERF__FAIL(PERF_E_SYSTEM, "thread %d: its stack could not be read", (int)tid);
    /* Only pc and sp are known: rbp and rbx come from the first frames
       that saved them. Every mode walks with the rules here. */
    perf__unwind_regs_t regs = {
        .pc = before.pc, .sp = before.sp, .fp_unknown = true, .bx_unknown = true};
    perf__stack_window_t stack = {base, base + got, g_blocked_copy};
    *count = perf__unwind_walk(mods->unwind, 1, regs, stack, pcs, max, status);
    return *status == PERF__WALK_DEPTH ? PERF_E_TRUNCATED : PERF_OK;
  }
  return PERF_E_TIMEOUT;
}

/* Whether tid, running now, may still be on its way out of the call it was
   last seen blocked in: woken, but it has not yet used EXIT_CPU_NS of CPU
   since. A signal then would end that call with EINTR (poll and select
   check for signals before their timeout). */
static bool leaving_call(pid_t tid) {
  perf__stack_bounds_t *b = perf__stack_bounds_find(tid);
  if (!b || b->blocked_cpu_ns <= 0) return false;
  int64_t now = perf__thread_cpu_ns(tid);
  if (now >= 0 && now - b->blocked_cpu_ns < EXIT_CPU_NS) return true;
  b->blocked_cpu_ns = 0;
  return false;
}

/* Wait a moment before looking at a thread again: spin on sched_yield for
   the first MASK_SPIN_NS since `start`, then sleep a millisecond. */
static void pause_briefly(long long start) {
  if (perf__now_ns() - start < MASK_SPIN_NS) {
    sched_yield();
  } else {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

/* Whether a signal may be sent to tid now: not when it blocks the signal
   (it would stay pending, and kill a program the thread execs), nor when
   the app replaced the handler (the signal could kill the process). */
static int may_signal(pid_t tid) {
  if (!handler_is_ours()) return PERF_E_SIGNAL;
  if (tid == perf__gettid()) return PERF_OK; /* checked by the caller */
  /* A thread still returning from the previous capture's handler blocks
     the signal until its sigreturn: look again until the capture timeout
     (briefly spinning, then every millisecond). A thread found blocking it
     for that long is refused at once for a while, as a timed-out request. */
  long long now = perf__now_ns();
  if (tid == g_masked_tid && now < g_masked_until_ns) return PERF_E_TIMEOUT;
  long long start = now, deadline = now + (long long)g_opts.timeout_ms * 1000000LL;
  for (;;) {
    bool running = true;
    int blocks = perf__thread_signal_state(tid, g_signo, &running);
    if (blocks == PERF_E_NO_THREAD) perf__stack_bounds_forget(tid);
    if (blocks == PERF_E_SYSTEM) return PERF_OK; /* no /proc: the mask is not known */
    if (blocks < 0) return blocks;
    /* This reading is the last look before the send: a thread that blocked
       meanwhile goes back to the blocked path. */
    if (!blocks)
      return !running ? REQUEST_NOW_BLOCKED : handler_is_ours() ? PERF_OK : PERF_E_SIGNAL;
    now = perf__now_ns();
    if (now >= deadline) {
      g_masked_tid = tid;
      g_masked_until_ns = now + CANCELLED_HOLD_NS;
      return PERF_E_TIMEOUT;
    }
    pause_briefly(start);
  }
}

/* Whether the sampler's signal still has the sampler's handler; logs once
   when the app replaced it. */
static bool handler_is_ours(void) {
  struct sigaction cur;
  if (sigaction(g_signo, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
      cur.sa_sigaction == on_sample_signal)
    return true;
  if (!g_lost_logged)
    perf__log(PERF__LOG_ERROR, "sampler signal %d: the app replaced its handler; no more captures",
              g_signo);
  g_lost_logged = true;
  return false;
}

static int signal_blocked_here(void) {
  sigset_t cur;
  return pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0 && sigismember(&cur, g_signo) == 1;
}

/* A fork while a capture is in flight would leave the child's lock held. */
static void atfork_prepare(void) {
  pthread_mutex_lock(&g_lock);
}
static void atfork_parent(void) {
  pthread_mutex_unlock(&g_lock);
}
static void atfork_child(void) {
  g_pid = getpid();
  perf__stack_bounds_reset(); /* the child's only thread has a new id */
  pthread_mutex_unlock(&g_lock);
}
