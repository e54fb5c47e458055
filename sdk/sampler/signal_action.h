/*
 * signal_action.h - the sampler's real-time signal and its action: which
 * signal (the one configured, refused when somebody already handles it, or
 * the highest one nobody handles), the handler installed on it once and
 * never removed, whether that handler is still ours before each send, and
 * every pending instance of the signal taken back. The handler itself and
 * its slots are signal_sampler.c's; this file only touches the action
 * (sigaction). Requesting threads, under the sampler's lock.
 *
 * Split from signal_sampler.c along the line between "which signal, with
 * which action" (here: sigaction calls and nothing else) and "what a
 * request is" (slots, sequence numbers, the handler's walk: there).
 */
#ifndef PERF_SAMPLER_SIGNAL_ACTION_H
#define PERF_SAMPLER_SIGNAL_ACTION_H

#include <signal.h>
#include <stdbool.h>

typedef void (*perf__signal_handler_t)(int signo, siginfo_t *si, void *ucv);

/* The signal to install: `wanted` when it still has the default action,
   else (wanted 0) the highest real-time signal nobody handles. Returns the
   signal number, or PERF_E_SIGNAL (logged) when wanted is taken or invalid
   or no real-time signal is free. */
int perf__signal_action_choose(int wanted);

/* Install `handler` (SA_SIGINFO | SA_RESTART | SA_ONSTACK) on signo, and
   remember both for the checks below. PERF_OK, or PERF_E_SIGNAL (logged). */
int perf__signal_action_install(int signo, perf__signal_handler_t handler);

/* Whether the installed signal still has the installed handler (with
   SA_SIGINFO); logs once when the app replaced it. Checked before a send:
   a signal whose action the app reset would kill or confuse it. */
bool perf__signal_action_is_ours(void);

/* Whether another handler now sits on the installed signal (a request that
   timed out tells PERF_E_SIGNAL from PERF_E_TIMEOUT with it); logs
   nothing. */
bool perf__signal_action_replaced(void);

/* Discard every pending instance of the signal, in every thread of the
   process: the action becomes SIG_IGN and goes back at once (POSIX drops a
   pending signal whose action is SIG_IGN). An action the app set in
   between is put back. PERF_OK or PERF_E_SYSTEM. Only while no other
   request of the sampler's is in flight (its signal would go too). */
int perf__signal_action_retract_pending(void);

#endif
