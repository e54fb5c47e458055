/*
 * signal_action.c - the sampler's real-time signal and its action (see
 * signal_action.h): the choice of the signal, the handler's install, the
 * re-check that it is still ours before each send, and the SIG_IGN toggle
 * that takes pending instances back. Requesting threads, under the
 * sampler's lock (signal_sampler.c's g_lock); the signal and handler
 * remembered here are written once, at the install.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>

#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "sdk/sampler/signal_action.h"

static int g_signo;                      /* the installed signal */
static perf__signal_handler_t g_handler; /* and its handler */
static bool g_lost_logged;               /* the handler was replaced: said once */

static int pick_free_signal(void);

int perf__signal_action_choose(int wanted) {
  if (wanted) {
    struct sigaction old;
    if (sigaction(wanted, NULL, &old) != 0 || old.sa_handler != SIG_DFL)
      PERF__FAIL(PERF_E_SIGNAL, "sampler signal %d is invalid or already handled", wanted);
    return wanted;
  }
  int signo = pick_free_signal();
  if (signo == 0)
    PERF__FAIL(PERF_E_SIGNAL, "no free real-time signal between SIGRTMIN and SIGRTMAX");
  return signo;
}

int perf__signal_action_install(int signo, perf__signal_handler_t handler) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(signo, &sa, NULL) != 0)
    PERF__FAIL(PERF_E_SIGNAL, "sigaction(%d) failed: %s", signo, strerror(errno));
  g_signo = signo;
  g_handler = handler;
  return PERF_OK;
}

bool perf__signal_action_is_ours(void) {
  struct sigaction cur;
  if (sigaction(g_signo, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
      cur.sa_sigaction == g_handler)
    return true;
  if (!g_lost_logged)
    perf__log(PERF__LOG_ERROR, "sampler signal %d: the app replaced its handler; no more captures",
              g_signo);
  g_lost_logged = true;
  return false;
}

bool perf__signal_action_replaced(void) {
  struct sigaction cur;
  return sigaction(g_signo, NULL, &cur) == 0 && cur.sa_sigaction != g_handler;
}

int perf__signal_action_retract_pending(void) {
  struct sigaction ign, before, between;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  if (sigaction(g_signo, &ign, &before) != 0) return PERF_E_SYSTEM;
  if (sigaction(g_signo, &before, &between) != 0) return PERF_E_SYSTEM;
  if (between.sa_handler != SIG_IGN) sigaction(g_signo, &between, NULL);
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
