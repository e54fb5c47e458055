/*
 * task_files.h - /proc/self/task/TID/status and .../syscall of the last few
 * threads captured, kept open and read again from offset 0 (pread: the
 * kernel regenerates the text on each read from the start), so that a
 * thread captured again and again (the hang monitor's watched thread, a
 * hot thread) costs no open and close: a read on a kept descriptor is
 * about a third of an open, read and close of the same file
 * (bench/README.md "sampler_bench").
 *
 * Bounded: PERF__TASK_FILES_THREADS threads, one descriptor per file,
 * O_CLOEXEC (an exec'd program inherits none). A descriptor unused for
 * PERF__TASK_FILES_IDLE_NS is closed at the next read, and all of them on
 * perf__task_files_close_all (the SDK's shutdown, a forked child). The app
 * may close descriptors it does not know (daemons close everything): each
 * one is checked (fstat: the device and inode it had when opened) before it
 * is read or closed, and one that is not ours any more is forgotten, never
 * read nor closed. Callers serialise (the sampler's lock); never the signal
 * handler.
 */
#ifndef PERF_SAMPLER_TASK_FILES_H
#define PERF_SAMPLER_TASK_FILES_H

#include <stddef.h>
#include <sys/types.h>

#define PERF__TASK_FILES_THREADS 2
#define PERF__TASK_FILES_IDLE_NS 1000000000LL

typedef enum { PERF__TASK_STATUS, PERF__TASK_SYSCALL, PERF__TASK_FILE_KINDS } perf__task_file_t;

/* The contents of tid's file (at most cap - 1 bytes, then a NUL): its
   length, or PERF_E_NO_THREAD (the thread is gone) or PERF_E_SYSTEM, as
   perf__task_file_read. */
ssize_t perf__task_files_read(pid_t tid, perf__task_file_t which, char *buf, size_t cap);

/* Close every kept descriptor that is still ours. */
void perf__task_files_close_all(void);

/* How many descriptors are kept open now (for tests). */
int perf__task_files_open_count(void);

/* Tests: how long a descriptor may stay unused (PERF__TASK_FILES_IDLE_NS
   unless set). */
void perf__task_files_set_idle_ns(long long ns);

#endif
