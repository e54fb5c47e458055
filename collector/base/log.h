/*
 * log.h - perf-collector's log: one line on stderr per message, any
 * thread. A line reads
 *
 *   2026-12-07T18:30:01.123+00:00 perf-collector: listening on 127.0.0.1:4318, ...
 *
 * the local time in RFC 3339 with its UTC offset, then the message. A
 * message's own line breaks never reach the log: each line is one event,
 * for journald, grep and a log shipper alike (libmicrohttpd's messages,
 * which carry its HTML error pages, are reduced to words first: server.c).
 */
#ifndef PERF_COLLECTOR_LOG_H
#define PERF_COLLECTOR_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* A message (printf format; a trailing newline is optional) as one line. */
void collector_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void collector_vlog(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* text as one line, in place: every run of white space (newlines too) one
   space, none at either end; with html, tags removed too ("<b>" and "</b>"
   go, the words between stay). Returns its length. */
size_t collector_log_one_line(char *text, bool html);

/* now as "YYYY-MM-DDTHH:MM:SS.mmm+HH:MM" (local time and its offset);
   out holds at least COLLECTOR_LOG_TIME_SIZE bytes. */
#define COLLECTOR_LOG_TIME_SIZE 40
void collector_log_time(char *out);

#endif
