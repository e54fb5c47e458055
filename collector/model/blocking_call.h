/*
 * blocking_call.h - which functions are the C library's blocking calls: the
 * frame a thread shows innermost while it waits (in read(), poll(), a futex
 * wait, a sleep) rather than runs. The flame graph marks those frames
 * "waiting" so that time spent waiting does not read as work.
 *
 * A frame is judged by its function name only, as a symbol table names it:
 * glibc's aliases and internal names are reduced to the call's name first
 * (a "@VERSION" or " [inline]" suffix, then the "__GI_" and "__libc_" prefixes and leading
 * underscores, then any "_time64", "64", "_nocancel" or "_cancelable" suffixes:
 * "__GI___libc_read", "__futex_abstimed_wait_common64",
 * "__clock_nanosleep_time64", "pthread_cond_wait@@GLIBC_2.3.2"). The calls
 * are the system calls the SDK classes as waiting (LOCK, IO, POLL, SLEEP:
 * docs/protocol.md "Thread state per sample") and the library functions
 * that wait in them (pthread_cond_wait, sem_wait, __lll_lock_wait). A frame
 * of the app's own named "read" is not a blocking call: callers pass only
 * frames outside the app.
 */
#ifndef PERF_COLLECTOR_BLOCKING_CALL_H
#define PERF_COLLECTOR_BLOCKING_CALL_H

#include <stdbool.h>

/* Is name (a function name, NULL-safe) one of the blocking calls? */
bool blocking_call_is(const char *name);

#endif
