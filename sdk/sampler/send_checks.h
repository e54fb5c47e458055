/*
 * send_checks.h - the looks at a target thread around each send of the
 * sampler's signal: whether it blocks the signal (SigBlk: a signal left
 * pending in a thread that blocks it survives execve and kills the program
 * the thread runs next), whether it is blocked in a call (it needs no
 * signal) or still on its way out of one (a signal would end that call
 * with EINTR), and whether the handler is still ours. A thread found
 * blocking the signal for too long is refused at once for a while.
 * Requesting threads, under the sampler's lock. docs/architecture.md,
 * "Before each signal", has the measurements and the race that remains.
 *
 * Split from signal_sampler.c where a request meets its target: these
 * looks read /proc (thread_state.h) and never touch a request slot; taking
 * back a signal sent to a thread found masking it is the slots' business
 * (signal_sampler.c, confirm_unmasked).
 */
#ifndef PERF_SAMPLER_SEND_CHECKS_H
#define PERF_SAMPLER_SEND_CHECKS_H

#include <stdbool.h>
#include <sys/types.h>

/* Where the target's mask is read: before the send (snapshots, other
   requests in flight), or while the signal flies (a single capture). */
typedef enum { PERF__MASK_BEFORE = 0, PERF__MASK_WHILE_FLYING = 1 } perf__mask_look_t;

/* perf__send_check's answer when the last look shows the thread blocked:
   nothing to send, capture it from /proc. */
#define PERF__SEND_NOW_BLOCKED 2

/* How long a thread found blocking the signal for the whole mask wait is
   refused at once, as long as a timed-out request blocks new ones to its
   thread (its signal may still be pending there). */
#define PERF__SEND_HOLD_NS 1000000000LL

/* Whether signal signo may be sent to tid (not the requester) now: not
   when it blocks the signal, nor when the handler is not ours any more,
   nor (check_leaving: this capture or the last one found it blocked) while
   it is still on its way out of the call it was seen blocked in.
   PERF_OK, PERF__SEND_NOW_BLOCKED, PERF_E_SIGNAL, PERF_E_NO_THREAD,
   PERF_E_TIMEOUT (it kept blocking the signal for up to 100 ms, or at most
   timeout_ms, or for timeout_ms when it has just answered a request; or it
   was found doing so recently), or another error.

   The full look reads its status (State and SigBlk: the slower read). With
   *look PERF__MASK_WHILE_FLYING the last look is the quick one (syscall:
   running or blocked) and the caller reads the mask after the send
   (perf__send_check_masked); a thread that blocked the signal last time,
   or that the quick look cannot decide, gets the full look (*look becomes
   PERF__MASK_BEFORE). */
int perf__send_check(pid_t tid, int signo, unsigned timeout_ms, bool check_leaving,
                     perf__mask_look_t *look);

/* Note that tid's handler has just answered a request: the thread blocks
   the signal until it returns from that handler, so the next send check
   of it waits for that as long as the capture timeout, not 100 ms. Under
   the sampler's lock, as perf__send_check. */
void perf__send_check_answered(pid_t tid);

/* The look at a thread just signalled, while the signal flies: whether it
   is known to block signo (a failed read says no). */
bool perf__send_check_masked(pid_t tid, int signo);

/* Whether the calling thread blocks signo (its own capture's signal would
   never come). */
bool perf__send_check_masked_here(int signo);

#endif
