/*
 * sampler.h - the internal capture entry point behind perf_backtrace_* and
 * the monitors: collect thread `tid`'s stack, by interrupting it with the
 * sampler's signal when it runs, or from /proc and a copy of its stack
 * when it is blocked (never signalled then). Implemented in
 * signal_sampler.c.
 */
#ifndef PERF_SAMPLER_H
#define PERF_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk/sampler/modules.h"
#include "sdk/sampler/sample_state.h"
#include "sdk/sampler/unwind_rules.h"

/* Deepest stack one capture records; deeper stacks are truncated. */
#define PERF__MAX_FRAMES 1024

/* Capture tid's stack (0 = the caller) into pcs[0..max), innermost first,
   unwinding with the rules of snapshot `mods` (the caller holds a reference
   and uses the same snapshot to name the frames). Returns 0,
   PERF_E_TRUNCATED (max frames written), or a negative perf_error_t. */
int perf__sampler_capture(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                          size_t *count);

/* The same capture, also saying how the walk ended (when it returns 0 or
   PERF_E_TRUNCATED): PERF__WALK_COMPLETE when the stack reached its
   outermost frame, else why frames beyond the last one are missing
   (unwind_rules.h; PERF__WALK_DEPTH goes with PERF_E_TRUNCATED). In
   PERF_UNWIND_STACK_COPY mode libdwfl tells less: COMPLETE, DEPTH,
   NOT_ASCENDING, or BAD_READ for any other stop (usually the copy's end). */
int perf__sampler_capture_status(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                                 size_t *count, perf__walk_status_t *status);

/* Most requests one snapshot keeps in flight at once (the sampler's
   request slots). */
#define PERF__SAMPLER_IN_FLIGHT_MAX 16

/* One thread of a snapshot: the caller fills tid, pcs, max and
   want_on_cpu; the capture fills the rest. */
typedef struct perf__sampler_shot_s {
  pid_t tid;      /* 0 = the caller */
  uintptr_t *pcs; /* max entries, innermost first */
  size_t max;
  bool want_on_cpu; /* tell a thread just woken in a call from one running (on_cpu):
                       one more /proc read per signalled capture */
  int err;          /* PERF_OK, PERF_E_TRUNCATED, or a negative perf_error_t */
  size_t count;
  perf__walk_status_t status; /* as perf__sampler_capture_status */
  int64_t taken_ns;           /* CLOCK_MONOTONIC when the stack was read: in the
                                 handler, or when a blocked thread's stack was copied */
  /* What the thread was doing when its stack was read (sample_state.h):
     state.state is PERF__STATE_RUNNING when it was on a CPU or runnable
     (interrupted by the signal: the sample is on-CPU time), one of the
     waiting classes (LOCK, IO, POLL, SLEEP, OTHER) with the system call's
     number and an I/O call's descriptor kind when it was blocked and read
     from outside, PERF__STATE_UNKNOWN when the capture failed. */
  perf__sample_state_t state;
  /* CPU time (cpu_burst.c): the signal interrupted the thread in user code
     (state.state PERF__STATE_RUNNING), and (want_on_cpu) not as it left a
     system call after waiting for a CPU (woken: found where it waited, not
     where it spends CPU; signal_sampler.c, woken_in_call). So on_cpu
     implies state RUNNING; a woken shot keeps state RUNNING (the signal
     reached it) but is not on_cpu. Without want_on_cpu, on_cpu is exactly
     state RUNNING with at least one frame. */
  bool on_cpu;
  bool woken; /* (want_on_cpu) signalled, but caught leaving a call after waiting for a CPU */
} perf__sampler_shot_t;

/* One shot's capture (tid, pcs, max and want_on_cpu filled by the caller), as
   perf__sampler_capture_status, filling the rest of the shot (its state
   included). Returns shot->err. */
int perf__sampler_capture_shot(perf__modules_t *mods, perf__sampler_shot_t *shot);

/* Capture n threads with up to `in_flight` (1..PERF__SAMPLER_IN_FLIGHT_MAX)
   requests outstanding: signal every running thread (each after its own
   last look), capture the blocked ones from outside meanwhile, then
   collect the answers, so the samples of up to `in_flight` threads lie
   about one round trip apart instead of one round trip per thread. With
   in_flight 1 it is perf__sampler_capture_status on each thread in turn.
   A thread's first capture, the caller's own thread and a walk that needs
   more rules are finished one at a time afterwards. Returns 0 (each shot's
   err says how its thread went) or PERF_E_INVALID_ARGUMENT. */
int perf__sampler_capture_threads(perf__modules_t *mods, perf__sampler_shot_t *shots, size_t n,
                                  size_t in_flight);

/* Close the /proc files the sampler keeps open for the threads it
   captured last (task_files.h); the next capture opens them again. For
   an SDK going idle (perf_sdk_shutdown). */
void perf__sampler_close_files(void);

/* Give back the memory the sampler keeps for its captures' next use (the
   pages of the buffer a blocked thread's stack is copied into). For an SDK
   going idle (the writer's idle release): the next capture touches them
   again. */
void perf__sampler_release_idle(void);

/* For CPU-timer profiles (cpu_timers.c), under the sampler's lock: the
   unwind mode; whether a timer may signal tid (PERF_OK: the sampler's
   signal is installed and tid does not block it; PERF_E_TIMEOUT: it
   blocks it), with its stack bounds when known or when it is blocked
   now (learned from the sp /proc shows; else 0, 0); the bounds of a
   thread known or blocked now, the same way (false: it runs, or its sp
   lies in no mapping); the bounds of the mapping holding a
   thread's sp (learned and cached, PERF_OK or PERF_E_SYSTEM); and every
   pending instance of the signal taken back when tid blocks it. */
int perf__sampler_unwind_mode(void);
int perf__sampler_timer_target(pid_t tid, uintptr_t *lo, uintptr_t *hi);
bool perf__sampler_blocked_bounds(pid_t tid, uintptr_t *lo, uintptr_t *hi);
int perf__sampler_learn_bounds(pid_t tid, uintptr_t sp, uintptr_t *lo, uintptr_t *hi);
void perf__sampler_retract_if_masked(pid_t tid);

/* TSC ticks the signal handler spent on the last successful capture (for
   benchmarks: the time the target thread was kept from its own work). */
uint64_t perf__sampler_last_handler_cycles(void);

#endif
