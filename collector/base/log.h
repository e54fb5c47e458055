/*
 * log.h - perf-collector's log: one line on stderr per message, any
 * thread. A line reads
 *
 *   2026-12-07T18:30:01.123+00:00 perf-collector: listening on 127.0.0.1:4318, ...
 *
 * the local time in RFC 3339 with its UTC offset, then the message. A
 * message's own line breaks and HTML markup (libmicrohttpd's error pages)
 * never reach the log: each line is one event, for journald, grep and a
 * log shipper alike.
 */
#ifndef PERF_COLLECTOR_LOG_H
#define PERF_COLLECTOR_LOG_H

#include <stdarg.h>
#include <stddef.h>

/* A message (printf format; a trailing newline is optional) as one line. */
void collector_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void collector_vlog(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* text as one line of plain words, in place: HTML tags removed ("<b>"
   and "</b>" go, the words between stay), every run of white space
   (newlines too) one space, none at either end. Returns its length. */
size_t collector_log_one_line(char *text);

/* now as "YYYY-MM-DDTHH:MM:SS.mmm+HH:MM" (local time and its offset);
   out holds at least COLLECTOR_LOG_TIME_SIZE bytes. */
#define COLLECTOR_LOG_TIME_SIZE 40
void collector_log_time(char *out);

#endif
