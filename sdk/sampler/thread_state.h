/*
 * thread_state.h - what the kernel says about one thread of this process
 * right now, without disturbing it: whether it is blocked (in a system call
 * or otherwise off the CPU) and where its user registers stopped
 * (/proc/self/task/TID/syscall), whether it blocks a signal
 * (/proc/self/task/TID/status, SigBlk), and a copy of its stack made with
 * process_vm_readv (a read that fails instead of faulting when the memory
 * went away). Requesting threads only; never the signal handler.
 */
#ifndef PERF_SAMPLER_THREAD_STATE_H
#define PERF_SAMPLER_THREAD_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A thread's state as /proc/self/task/TID/syscall shows it. */
typedef struct perf__thread_state_s {
  bool running; /* on a CPU or runnable: its registers are not known */
  long nr;      /* when blocked: the system call number, -1 when blocked outside one */
  uintptr_t args[6];
  uintptr_t sp, pc; /* when blocked: user sp and the pc the call returns to */
} perf__thread_state_t;

/* Read tid's state. Returns 0, PERF_E_NO_THREAD (gone), or PERF_E_SYSTEM
   (the file could not be read or parsed). */
int perf__thread_state_read(pid_t tid, perf__thread_state_t *out);

/* Whether two readings show the thread blocked in the same call at the
   same place (same number, arguments, sp and pc). */
bool perf__thread_state_same_block(const perf__thread_state_t *a, const perf__thread_state_t *b);

/* Whether tid currently blocks signal `signo` (SigBlk): 1 (blocks it), 0
   (does not), or PERF_E_NO_THREAD / PERF_E_SYSTEM. *running: whether the
   same reading shows it running (State R). */
int perf__thread_signal_state(pid_t tid, int signo, bool *running);

/* How long tid has waited for a CPU while runnable, in nanoseconds, as of
   its last arrival on a CPU (/proc/self/task/TID/schedstat, second field:
   it moves only when a thread that waited is scheduled), or -1 when not
   known (no such file: a kernel without CONFIG_SCHED_INFO). */
int64_t perf__thread_run_delay_ns(pid_t tid);

/* Copy `len` bytes of this process's memory at `addr` into `dst`. Returns
   the bytes copied (fewer when part of the range is not mapped any more). */
size_t perf__memory_copy(void *dst, uintptr_t addr, size_t len);

#endif
