/*
 * log.c - perf-collector's log lines (log.h): the timestamp, the message
 * made one line (HTML reduced to words on request), one write(2)-sized fputs on unbuffered stderr
 * so lines of different threads never mix. Any thread.
 */
#include "collector/base/log.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOG_LINE_MAX 4096 /* longer messages are cut, ending in "..." */

void collector_log(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  collector_vlog(fmt, ap);
  va_end(ap);
}

void collector_vlog(const char *fmt, va_list ap) {
  char message[LOG_LINE_MAX];
  int n = vsnprintf(message, sizeof message, fmt, ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof message) memcpy(message + sizeof message - 4, "...", 4);
  collector_log_one_line(message, false);
  char when[COLLECTOR_LOG_TIME_SIZE];
  collector_log_time(when);
  char line[LOG_LINE_MAX + COLLECTOR_LOG_TIME_SIZE + 32];
  snprintf(line, sizeof line, "%s perf-collector: %s\n", when, message);
  fputs(line, stderr);
}

size_t collector_log_one_line(char *text, bool html) {
  size_t out = 0;
  bool in_tag = false, space = false, tag_gap = false;
  for (const char *p = text; *p; p++) {
    char c = *p;
    if (html && c == '<' && (p[1] == '/' || p[1] == '!' || isalpha((unsigned char)p[1]))) {
      in_tag = true;
      continue;
    }
    if (in_tag) {
      if (c == '>') in_tag = false, tag_gap = true; /* "</title><body>": words apart */
      continue;
    }
    if (isspace((unsigned char)c)) {
      space = true;
      continue;
    }
    /* a tag between two words is a space; before a quote or a stop, none */
    bool gap = space || (tag_gap && isalnum((unsigned char)c) && out > 0 &&
                         isalnum((unsigned char)text[out - 1]));
    if (gap && out > 0) text[out++] = ' ';
    space = tag_gap = false;
    text[out++] = c;
  }
  text[out] = '\0';
  return out;
}

void collector_log_time(char *out) {
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (!localtime_r(&ts.tv_sec, &tm)) {
    snprintf(out, COLLECTOR_LOG_TIME_SIZE, "%lld", (long long)ts.tv_sec);
    return;
  }
  int off = (int)(tm.tm_gmtoff / 60) % (24 * 60); /* minutes; |offset| < 1 day */
  char sign = off < 0 ? '-' : '+';
  if (off < 0) off = -off;
  char date[24];
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, COLLECTOR_LOG_TIME_SIZE, "%.19s.%03d%c%02d:%02d", date,
           (int)(ts.tv_nsec / 1000000) % 1000, sign, off / 60, off % 60);
}
