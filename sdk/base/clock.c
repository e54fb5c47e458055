/*
 * clock.c - monotonic and wall clocks and ISO 8601 formatting (see clock.h).
 * Any thread. The SDK's threads sleep through perf__worker (worker.h).
 */
#include "sdk/base/clock.h"

#include <stdio.h>
#include <time.h>

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
