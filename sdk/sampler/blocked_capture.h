/*
 * blocked_capture.h - a thread blocked in a system call (or otherwise off
 * the CPU) is never signalled: a handler would end nanosleep, poll,
 * epoll_wait and the like early with EINTR. Its user stack is frozen while
 * it blocks, so its sp and pc are read from /proc (thread_state.h), the
 * stack is copied and walked with the handler's rules; the copy counts only
 * if the thread is still blocked in the same call at the same place
 * afterwards. Also what the signal path needs to know about a thread seen
 * blocked. Requesting threads, under the sampler's lock (signal_sampler.c).
 */
#ifndef PERF_SAMPLER_BLOCKED_CAPTURE_H
#define PERF_SAMPLER_BLOCKED_CAPTURE_H

#include <stdbool.h>
#include <sys/types.h>

#include "sdk/sampler/modules.h"
#include "sdk/sampler/sampler.h"

/* perf__blocked_capture's answer when the thread is running: signal it. */
#define PERF__TRY_SIGNAL 1

/* Capture tid from outside into shot (pcs, count, status, taken_ns) when
   it is blocked: PERF_OK or PERF_E_TRUNCATED; PERF__TRY_SIGNAL when it is
   running (or /proc cannot be read); PERF_E_TIMEOUT when it kept waking
   or is still leaving a call after timeout_ms; another perf_error_t. */
int perf__blocked_capture(perf__modules_t *mods, pid_t tid, perf__sampler_shot_t *shot,
                          unsigned timeout_ms);

/* Whether the last capture of tid found it blocked (and nothing since
   showed it running on): look at it through /proc first. */
bool perf__blocked_last_seen(pid_t tid);

/* Give back the pages of the stack copy buffer (it reads as zeros after).
   Under the sampler's lock, as the captures that use it. */
void perf__blocked_release_idle(void);

/* CPU time a thread woken from a blocking call uses at most before it is
   back in user space (the kernel's return path takes microseconds): a
   thread last seen blocked is signalled only once it has used this much
   since. */
#define PERF__BLOCKED_EXIT_CPU_NS 200000LL

/* Whether tid, running now, may still be on its way out of the call it was
   last seen blocked in: woken, but it has not yet used
   PERF__BLOCKED_EXIT_CPU_NS (200 us) of CPU since.
   A signal then would end that call with EINTR (poll and select check for
   signals before their timeout). */
bool perf__blocked_leaving_call(pid_t tid);

/* Wait a moment before looking at a thread again: sched_yield for the
   first 200 us since `start` (perf__now_ns), then sleep a millisecond. */
void perf__blocked_pause(long long start);

#endif
