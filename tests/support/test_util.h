/*
 * test_util.h - small helpers the test programs share: the monotonic clock,
 * a sleep that is not cut short by signals, and a whole file as text.
 * Static inline: a program uses what it needs.
 */
#ifndef PERF_TEST_UTIL_H
#define PERF_TEST_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

#endif
