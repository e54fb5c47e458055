/*
 * threads.h - what the Linux kernel tells about this process's threads:
 * their ids, names, and the memory mapping that holds a thread's stack.
 * Called from requesting threads only (these read /proc).
 */
#ifndef PERF_THREADS_H
#define PERF_THREADS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* The calling thread's kernel id (async-signal-safe). */
pid_t perf__gettid(void);

/* The contents of /proc/self/task/TID/<name> (at most cap - 1 bytes, then
   a NUL): its length, or PERF_E_NO_THREAD (the thread is gone) or
   PERF_E_SYSTEM. */
ssize_t perf__task_file_read(pid_t tid, const char *name, char *buf, size_t cap);

/* Copy the thread's name (/proc/self/task/TID/comm) into buf; "?" if gone. */
void perf__thread_name(pid_t tid, char *buf, size_t len);

/* The ids of every thread of the process, ascending. *tids is malloc'd and
   freed by the caller with free(). Returns 0 or a negative perf_error_t. */
int perf__thread_list(pid_t **tids, size_t *count);

/* The readable mapping [*lo, *hi) containing `addr` (from /proc/self/maps):
   for a stack pointer, the thread's stack. Returns 0, PERF_E_SYSTEM, or
   PERF_E_NO_THREAD when no readable mapping holds addr. */
int perf__stack_mapping(uintptr_t addr, uintptr_t *lo, uintptr_t *hi);

/* CPU time of thread `tid` of this process in nanoseconds (its per-thread
   CPU clock: exact, also while it runs), or -1 when the thread does not
   exist (any more). No /proc read. */
int64_t perf__thread_cpu_ns(pid_t tid);

/* The clock id of thread `tid`'s CPU clock (the kernel's encoding of a
   per-thread CPU clock, as pthread_getcpuclockid makes it), for
   clock_gettime and timer_create; tid must be a thread of this process. */
clockid_t perf__thread_cpu_clock(pid_t tid);

#endif
