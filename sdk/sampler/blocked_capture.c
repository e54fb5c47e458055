/*
 * blocked_capture.c - threads blocked in a system call (or otherwise off
 * the CPU) captured without a signal: their sp and pc from /proc, a copy
 * of their frozen stack, the handler's walk over the copy (see
 * blocked_capture.h; docs/internals/sampler.md, "Threads blocked in a
 * system call"). Requesting threads, under the sampler's lock.
 */
#include "sdk/sampler/blocked_capture.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "sdk/base/threads.h"
#include "sdk/sampler/sample_state.h"
#include "sdk/sampler/stack_bounds.h"
#include "sdk/sampler/thread_state.h"

/* The most of a blocked thread's stack that is copied (from its sp up); a
   deeper stack's walk ends as a bad read there. */
#define BLOCKED_COPY_MAX (256 * 1024)
/* Readings of a blocked thread that may disagree (it woke and blocked
   again elsewhere) before the capture gives up with PERF_E_TIMEOUT. */
#define BLOCKED_ATTEMPTS 4
/* How long perf__blocked_pause spins (then sleeps). */
#define SPIN_NS 200000LL

/* BLOCKED_COPY_MAX bytes of anonymous memory, mapped on first use; the
   pages a copy touched are given back when the SDK goes idle
   (perf__blocked_release_idle): a deep stack copied once would otherwise
   stay resident for the process's life. */
static uint8_t *g_blocked_copy;

void perf__blocked_release_idle(void) {
  if (g_blocked_copy) madvise(g_blocked_copy, BLOCKED_COPY_MAX, MADV_DONTNEED);
}

int perf__blocked_capture(perf__modules_t *mods, pid_t tid, perf__sampler_shot_t *shot,
                          unsigned timeout_ms) {
  long long start = perf__now_ns();
  long long deadline = start + (long long)timeout_ms * 1000000LL;
  for (int attempt = 0; attempt < BLOCKED_ATTEMPTS;) {
    perf__thread_state_t before, after;
    int err = perf__thread_state_read(tid, &before);
    if (err == PERF_E_NO_THREAD) perf__stack_bounds_forget(tid);
    if (err == PERF_E_SYSTEM && attempt == 0)
      return PERF__TRY_SIGNAL; /* no /proc: signal, as before */
    if (err) return err;
    if (before.running) {
      if (!perf__blocked_leaving_call(tid)) return PERF__TRY_SIGNAL;
      if (perf__now_ns() >= deadline) return PERF_E_TIMEOUT;
      perf__blocked_pause(start);
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
    if (!g_blocked_copy) {
      void *m =
          mmap(NULL, BLOCKED_COPY_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) return PERF_E_NO_MEMORY;
      g_blocked_copy = m;
    }
    uintptr_t base = before.sp & ~(uintptr_t)7;
    size_t len = b->hi - base < BLOCKED_COPY_MAX ? b->hi - base : BLOCKED_COPY_MAX;
    int64_t taken = perf__now_ns();
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
    shot->count =
        perf__unwind_walk(mods->unwind, 1, regs, stack, shot->pcs, shot->max, &shot->status);
    shot->taken_ns = taken;
    shot->state = perf__sample_state_blocked(&before);
    return shot->status == PERF__WALK_DEPTH ? PERF_E_TRUNCATED : PERF_OK;
  }
  return PERF_E_TIMEOUT;
}

bool perf__blocked_last_seen(pid_t tid) {
  perf__stack_bounds_t *b = perf__stack_bounds_find(tid);
  return b && b->blocked_cpu_ns > 0;
}

bool perf__blocked_leaving_call(pid_t tid) {
  perf__stack_bounds_t *b = perf__stack_bounds_find(tid);
  if (!b || b->blocked_cpu_ns <= 0) return false;
  int64_t now = perf__thread_cpu_ns(tid);
  if (now >= 0 && now - b->blocked_cpu_ns < PERF__BLOCKED_EXIT_CPU_NS) return true;
  b->blocked_cpu_ns = 0;
  return false;
}

void perf__blocked_pause(long long start) {
  if (perf__now_ns() - start < SPIN_NS) {
    sched_yield();
  } else {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}
