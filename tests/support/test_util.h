/*
 * test_util.h - small helpers the test programs share: the monotonic clock,
 * a sleep that is not cut short by signals, a whole file as text, a thread
 * found by name, a thread seen blocked in a system call, and a process
 * burning a core.
 * Static inline: a program uses what it needs.
 */
#ifndef PERF_TEST_UTIL_H
#define PERF_TEST_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* CLOCK_MONOTONIC in nanoseconds and milliseconds. */
static inline int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline long long now_ms(void) {
  return now_ns() / 1000000;
}

/* The calling thread's CPU time in nanoseconds (a stop or a loaded
   machine does not advance it). */
static inline int64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Sleep ms milliseconds, going on after a signal handler ran. */
static inline void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The whole file (malloc'd, NUL-terminated), or "" when it does not exist
   (nothing was written to it). Any other error fails the case. */
static inline char *read_text(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    CHECKF(errno == ENOENT, "%s: %s", path, strerror(errno));
    char *empty = strdup("");
    CHECK(empty != NULL);
    return empty;
  }
  size_t len = 0, cap = 1 << 16, n;
  char *text = malloc(cap);
  CHECK(text != NULL);
  while ((n = fread(text + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len - 1 == 0) {
      cap *= 2;
      text = realloc(text, cap);
      CHECK(text != NULL);
    }
  }
  fclose(f);
  text[len] = '\0';
  return text;
}

/* Whether /proc shows thread tid of this process blocked in system call
   nr (/proc/self/task/<tid>/syscall starts with its number; "running"
   when it is not in one). */
static inline bool thread_in_syscall(pid_t tid, long nr) {
  char path[64], text[128];
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
  FILE *f = fopen(path, "r");
  CHECKF(f != NULL, "%s: %s", path, strerror(errno));
  bool in = fgets(text, sizeof text, f) && text[0] != 'r' && atol(text) == nr;
  fclose(f);
  return in;
}

/* The id of this process's first thread named `name` (its comm), 0 when
   none is. */
static inline pid_t thread_named(const char *name) {
  DIR *d = opendir("/proc/self/task");
  CHECK(d != NULL);
  pid_t found = 0;
  for (struct dirent *de; !found && (de = readdir(d));) {
    char path[300], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
    FILE *f = de->d_name[0] != '.' ? fopen(path, "r") : NULL;
    if (!f) continue;
    if (fgets(comm, sizeof comm, f) && strcmp(strtok(comm, "\n"), name) == 0)
      found = (pid_t)atol(de->d_name);
    fclose(f);
  }
  closedir(d);
  return found;
}

/* Until thread tid is blocked in system call nr, polled every millisecond;
   fails after wait_ms. */
static inline void wait_in_syscall(pid_t tid, long nr, int wait_ms) {
  long long end = now_ms() + wait_ms;
  while (!thread_in_syscall(tid, nr)) {
    CHECKF(now_ms() < end, "thread %d not blocked in system call %ld after %d ms", (int)tid, nr,
           wait_ms);
    sleep_ms(1);
  }
}

/* A process burning a core until cpu_hog_stop (or its parent dies): a
   compiler beside the program under test. */
static inline pid_t cpu_hog_start(void) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    volatile unsigned long x = 0;
    for (;;)
      x = x * 2862933555777941757UL + 3;
  }
  return pid;
}

static inline void cpu_hog_stop(pid_t pid) {
  CHECK(kill(pid, SIGKILL) == 0);
  CHECK(waitpid(pid, NULL, 0) == pid);
}

#endif
