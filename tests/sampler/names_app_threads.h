/*
 * names_app_threads.h - what names_app.cc (C++) and names_c_app.c (C)
 * both need to know before they report: that a thread is parked in a
 * futex wait, and how much CPU the hot thread has used.
 */
#ifndef PERF_NAMES_APP_THREADS_H
#define PERF_NAMES_APP_THREADS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Whether thread tid is blocked in futex(2): /proc/self/task/<tid>/syscall
   starts with the number of the system call it is in. */
static inline bool in_futex(pid_t tid) {
  char path[64], buf[64] = {0};
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  bool ok = fgets(buf, sizeof buf, f) && atoi(buf) == SYS_futex;
  fclose(f);
  return ok;
}

/* The CPU time thread t has used, in seconds (0 when unknown). */
static inline double thread_cpu_s(pthread_t t) {
  clockid_t id;
  struct timespec ts;
  if (pthread_getcpuclockid(t, &id) != 0 || clock_gettime(id, &ts) != 0) return 0;
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
