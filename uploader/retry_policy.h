/*
 * retry_policy.h - what the uploader does with a response: the wire
 * protocol's status rules, exponential backoff with full jitter, and the
 * Retry-After header (seconds or HTTP-date, capped at 24 h). Pure functions
 * of their inputs (the random draw and "now" are passed in), so they are
 * tested without a network. Uploader thread only.
 */
#ifndef PERF_RETRY_POLICY_H
#define PERF_RETRY_POLICY_H

#include <stdint.h>
#include <time.h>

typedef enum perf__upload_action_e {
  PERF__UPLOAD_DONE = 0,          /* 2xx: stored; delete the batch */
  PERF__UPLOAD_RETRY = 1,         /* keep it and try again after a delay */
  PERF__UPLOAD_REJECTED = 2,      /* can never succeed: set it aside, count the reason */
  PERF__UPLOAD_RETRY_LIMITED = 3, /* other 5xx: retry, but only a bounded number of times */
  /* 401/403 (a key rotated or revoked), 404/408 (what proxies answer): not
     the batch's fault, and a later key or route may take it. Keep it and
     retry after a long backoff (perf__long_backoff_ms). */
  PERF__UPLOAD_RETRY_LONG = 4,
} perf__upload_action_t;

/* The action for an HTTP status; status 0 means a network error (no
   response: refused, reset, timeout, DNS), which is retried. */
perf__upload_action_t perf__upload_action(long status);

/* Backoff before attempt `attempt` (1 = the first retry): a uniform draw in
   [0, min(cap, base * 2^(attempt-1))] ("full jitter"); `random01` in [0, 1)
   is the caller's random draw. Milliseconds. */
int64_t perf__backoff_ms(unsigned attempt, int64_t base_ms, int64_t cap_ms, double random01);

/* Backoff for PERF__UPLOAD_RETRY_LONG: at least cap_ms, then a full-jitter
   draw on top whose ceiling doubles from cap_ms up to 12 * cap_ms (default
   cap 5 min: the first retry after 5-10 min, later ones within 5-65 min). */
int64_t perf__long_backoff_ms(unsigned attempt, int64_t cap_ms, double random01);

/* The delay a Retry-After header value asks for, in milliseconds: a number
   of seconds or an HTTP-date (RFC 9110), relative to `now` (Unix seconds);
   capped at 24 h; 0 for a date in the past. -1 when the value is absent or
   malformed (the caller then uses its backoff). */
int64_t perf__retry_after_ms(const char *value, time_t now);

#define PERF__RETRY_AFTER_CAP_MS (24LL * 3600 * 1000)

#endif
