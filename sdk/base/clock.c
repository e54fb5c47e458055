/*
 * clock.c - monotonic and wall clocks, ISO 8601 formatting, and the
 * interruptible sleep the SDK's threads use (see clock.h).
 */
#include "sdk/base/clock.h"

#include <linux/futex.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int64_t perf__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t perf__wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t perf__mono_to_wall_ns(int64_t mono_ns) {
  return perf__wall_ns() - (perf__now_ns() - mono_ns);
}

void perf__format_iso8601(int64_t wall_ns, char *buf, size_t len) {
  time_t secs = (time_t)(wall_ns / 1000000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(wall_ns / 1000000 % 1000));
}

void perf__sleep_until(int64_t deadline_ns, const int *wake, int seen) {
  int64_t left = deadline_ns - perf__now_ns();
  if (left <= 0) return;
  struct timespec ts = {(time_t)(left / 1000000000), (long)(left % 1000000000)};
  /* A change of *wake (with a FUTEX_WAKE) ends the sleep early. */
  syscall(SYS_futex, wake, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}
