/*
 * stopped_time.h - when the whole process was stopped (SIGSTOP, a
 * debugger, a job-control stop), as seen by one monitor thread.
 *
 * A stopped process's threads do not run, the monitor's included: it wakes
 * late. Late by CPU starvation, it slept once (one voluntary context
 * switch) and then waited, runnable, for a CPU (involuntary); stopped while
 * asleep, the stop wakes it to switch out a second time, voluntarily, until
 * SIGCONT, and it sleeps again after. So a late wake with two or more
 * voluntary switches during the sleep (getrusage(RUSAGE_THREAD)) was a
 * stop, and its lateness the stop's length (measured on 2 cores with four
 * busy processes: stops of 1 s gave +2, late wakes of 20-70 ms from
 * starvation +1; the run delay of /proc/thread-self/schedstat is no help:
 * under load it counted whole stops). A stop that begins while the monitor
 * is awake is not seen: a look takes microseconds, but a hang's capture
 * waits for its thread (up to the sampler's timeout), so a stop that lands
 * in a capture stays in that hang's duration. Suspend of the machine
 * needs nothing: CLOCK_MONOTONIC, every SDK clock, does not count it.
 * Owned by one thread; no locks.
 */
#ifndef PERF_MONITORS_STOPPED_TIME_H
#define PERF_MONITORS_STOPPED_TIME_H

#include <stdbool.h>
#include <stdint.h>

#define PERF__STOPS_KEPT 8 /* the last stops remembered */

typedef struct {
  int64_t end_ns, length_ns;
} perf__stop_t;

typedef struct {
  perf__stop_t stops[PERF__STOPS_KEPT]; /* ring, oldest overwritten */
  unsigned next;
  long switches; /* voluntary context switches before the sleep; -1: unknown */
} perf__stopped_time_t;

void perf__stopped_time_init(perf__stopped_time_t *st);

/* Around a sleep meant to end at wake_at_ns: note a stop when the thread
   woke late (beyond a few ms of slack) and switched out more than once. */
void perf__stopped_time_before_sleep(perf__stopped_time_t *st);
void perf__stopped_time_after_sleep(perf__stopped_time_t *st, int64_t wake_at_ns);

/* Nanoseconds of [from_ns, to_ns] the process was stopped (as far as it
   is remembered). */
int64_t perf__stopped_within(const perf__stopped_time_t *st, int64_t from_ns, int64_t to_ns);

#endif
