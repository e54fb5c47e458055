/*
 * worker.h - the one way the SDK (and the collector) runs a background
 * thread: started with a name and its kernel tid registered, given one
 * mutex and one condition variable on CLOCK_MONOTONIC for its owner's
 * state, and stopped by a monotonic deadline. The registry of the running
 * workers' tids is how the SDK leaves its own threads out of what it
 * reports as the app's.
 *
 * Threads: start and stop from the owner's thread; lock, wait and notify
 * from the worker and from the threads that hand it work; stopping, tid and
 * perf__worker_is_sdk_thread from any thread, without a lock.
 */
#ifndef PERF_WORKER_H
#define PERF_WORKER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* How many workers may run at once in a process (the registry's size). */
#define PERF__WORKER_MAX 32

typedef struct perf__worker_s perf__worker_t;

/* A worker's body: runs on the worker's thread and should return soon
   after perf__worker_stopping(w) becomes true. */
typedef void (*perf__worker_fn)(perf__worker_t *w, void *arg);

/* Start a thread named `name` (the first 15 characters) that registers its
   tid, then runs fn(w, arg). *out is set before fn starts, so fn may reach
   the worker through its owner's struct too; start returns once the tid is
   registered. Returns 0, PERF_E_NO_MEMORY (an allocation failed, or
   PERF__WORKER_MAX workers are running) or PERF_E_SYSTEM (no thread);
   *out is NULL on failure. */
int perf__worker_start(const char *name, perf__worker_fn fn, void *arg, perf__worker_t **out);

/* Ask the thread to stop, wake it, and wait until fn has returned or the
   monotonic `deadline_ns` has passed (0: no limit). Returns 0 once the
   thread is joined and the worker freed; PERF_E_TIMEOUT when fn is still
   running at the deadline: the thread is then detached and frees the
   worker itself when fn returns, so whatever fn uses must stay alive. */
int perf__worker_stop(perf__worker_t *w, int64_t deadline_ns);

/* Ask the thread to stop and wake it, without waiting: for an owner that
   must cut short something of its own (a request in flight) between the
   ask and perf__worker_stop. */
void perf__worker_ask_stop(perf__worker_t *w);

/* Stop has been asked. */
bool perf__worker_stopping(const perf__worker_t *w);

/* The worker thread's kernel tid. */
pid_t perf__worker_tid(const perf__worker_t *w);

/* The worker's mutex: it guards the worker's own flags and whatever state
   the owner keeps beside them. */
void perf__worker_lock(perf__worker_t *w);
void perf__worker_unlock(perf__worker_t *w);

/* With the lock held: wait until notified, until stop is asked, or until
   the monotonic `deadline_ns` (0: no deadline). Returns at once when stop
   was asked or the deadline has passed. It may return for no reason, as
   any condition variable: callers loop on their own condition. */
void perf__worker_wait(perf__worker_t *w, int64_t deadline_ns);

/* Wake everyone waiting on the worker (its thread, and threads waiting for
   it, such as a flush). The _locked form is for a caller holding the lock. */
void perf__worker_notify(perf__worker_t *w);
void perf__worker_notify_locked(perf__worker_t *w);

/* Without the lock: sleep until the monotonic `deadline_ns` or until stop is
   asked, whichever comes first; notifications do not end it. */
void perf__worker_sleep_until(perf__worker_t *w, int64_t deadline_ns);

/* `tid` is the thread of a running worker of this process (from just before
   its fn starts until fn returns). Lock-free. */
bool perf__worker_is_sdk_thread(pid_t tid);

/* A worker is being started: its thread may exist and run before its tid
   is registered. A caller telling new threads from the SDK's looks again
   later. Lock-free. */
bool perf__worker_starting(void);

/* In a child forked from the app (single-threaded, from the fork child
   handler): the registry names the parent's threads, which do not exist
   here; empty it. The workers themselves are left alone: never joined,
   signalled or freed in the child (their memory may be mid-change).
   Async-signal-safe. */
void perf__worker_forget_all(void);

#endif
