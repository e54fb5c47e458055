/*
 * alert_send.h - one webhook POST with libcurl: a JSON body, a whole-
 * transfer timeout, http and https only, no redirects followed, no
 * signals. Runs on the alert thread (curl_global_init is main.c's).
 */
#ifndef PERF_COLLECTOR_ALERT_SEND_H
#define PERF_COLLECTOR_ALERT_SEND_H

#include <stddef.h>

/* POST body (len bytes, application/json) to url within timeout_s: the
   answer's HTTP status, or 0 when none came (refused, timed out, reset). */
long alert_post(const char *url, const char *body, size_t len, unsigned timeout_s);

/* Whether an answer is worth another try: none (0), 429 or a 5xx. */
int alert_retryable(long status);

#endif
