/*
 * send_checks.c - the looks at a target thread around each send of the
 * sampler's signal (see send_checks.h): its mask (SigBlk), whether it is
 * blocked or leaving a call, the handler still ours, and the thread last
 * found blocking the signal refused for a while. The mask and the state
 * come from the same read of /proc/self/task/TID/status, so they are
 * looked at together. Requesting threads, under the sampler's lock.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/sampler/blocked_capture.h"
#include "sdk/sampler/send_checks.h"
#include "sdk/sampler/signal_action.h"
#include "sdk/sampler/stack_bounds.h"
#include "sdk/sampler/thread_state.h"

/* The quick look cannot decide: do the full one. */
#define LOOK_FULL 1
/* How long a capture waits for a thread to unblock the signal (or leave a
   call) before sending: a thread masking it is usually masking it on
   purpose, so this wait is shorter than timeout_ms (which is for the
   answer of a thread that got the signal, late when the machine is loaded). */
#define MASK_WAIT_MS 100u

static pid_t g_masked_tid;          /* the last thread found blocking the signal, */
static long long g_masked_until_ns; /* refused at once until then */
static pid_t g_answered_tid;        /* the last thread whose handler answered, */
static long long g_answered_ns;     /* when */

void perf__send_check_answered(pid_t tid) {
  g_answered_tid = tid;
  g_answered_ns = perf__now_ns();
}

static int quick_look(pid_t tid, bool check_leaving);

int perf__send_check(pid_t tid, int signo, unsigned timeout_ms, bool check_leaving,
                     perf__mask_look_t *look) {
  long long now = perf__now_ns();
  if (tid == g_masked_tid && now < g_masked_until_ns) return PERF_E_TIMEOUT;
  if (*look == PERF__MASK_WHILE_FLYING && tid != g_masked_tid) {
    int err = quick_look(tid, check_leaving);
    if (err != LOOK_FULL) return err;
  }
  *look = PERF__MASK_BEFORE;
  /* A thread still returning from the previous capture's handler blocks
     the signal until its sigreturn: look again until the capture timeout
     (briefly spinning, then every millisecond). A thread found blocking it
     for that long is refused at once for a while, as a timed-out request. */
  unsigned wait_ms = timeout_ms < MASK_WAIT_MS ? timeout_ms : MASK_WAIT_MS;
  /* A thread that has just answered blocks the signal for the rest of
     that handler, until its sigreturn: on a loaded machine it may wait
     for a CPU that long, which is the capture timeout's to bound. */
  if (tid == g_answered_tid && now - g_answered_ns < (long long)timeout_ms * 1000000LL)
    wait_ms = timeout_ms;
  long long start = now, deadline = now + (long long)wait_ms * 1000000LL;
  for (;;) {
    bool running = true;
    int blocks = perf__thread_signal_state(tid, signo, &running);
    if (blocks == PERF_E_NO_THREAD) perf__stack_bounds_forget(tid);
    if (blocks == PERF_E_SYSTEM) blocks = 0; /* no /proc: the mask is not known */
    if (blocks < 0) return blocks;
    if (!blocks && !running) return PERF__SEND_NOW_BLOCKED; /* needs no signal */
    if (!perf__signal_action_is_ours()) return PERF_E_SIGNAL;
    if (!blocks && !(check_leaving && perf__blocked_leaving_call(tid))) return PERF_OK;
    now = perf__now_ns();
    if (now >= deadline) {
      if (blocks) {
        g_masked_tid = tid;
        g_masked_until_ns = now + PERF__SEND_HOLD_NS;
      }
      return PERF_E_TIMEOUT;
    }
    perf__blocked_pause(start);
  }
}

bool perf__send_check_masked(pid_t tid, int signo) {
  bool running;
  return perf__thread_signal_state(tid, signo, &running) == 1;
}

bool perf__send_check_masked_here(int signo) {
  sigset_t cur;
  return pthread_sigmask(SIG_BLOCK, NULL, &cur) == 0 && sigismember(&cur, signo) == 1;
}

/* The quick last look (syscall): PERF_OK (running: send),
   PERF__SEND_NOW_BLOCKED, PERF_E_SIGNAL, PERF_E_NO_THREAD, or LOOK_FULL. */
static int quick_look(pid_t tid, bool check_leaving) {
  perf__thread_state_t st;
  int err = perf__thread_state_read(tid, &st);
  if (err == PERF_E_NO_THREAD) {
    perf__stack_bounds_forget(tid);
    return err;
  }
  if (err) return LOOK_FULL;
  if (!st.running) return PERF__SEND_NOW_BLOCKED; /* needs no signal */
  if (!perf__signal_action_is_ours()) return PERF_E_SIGNAL;
  return check_leaving && perf__blocked_leaving_call(tid) ? LOOK_FULL : PERF_OK;
}
