/*
 * retry_policy.c - status classification, backoff and Retry-After (see
 * retry_policy.h).
 */
#include "uploader/retry_policy.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>

perf__upload_action_t perf__upload_action(long status) {
  if (status >= 200 && status < 300) return PERF__UPLOAD_DONE;
  /* No response, throttled, or a proxy / gateway that could not reach the
     collector: the batch is fine, the moment is not. */
  if (status == 0 || status == 429 || status == 502 || status == 503 || status == 504)
    return PERF__UPLOAD_RETRY;
  /* 400 malformed, 401/403 auth, 413 too large, 415 media type, and every
     other 4xx: sending the same bytes again cannot help. */
  if (status >= 400 && status < 500) return PERF__UPLOAD_REJECTED;
  if (status >= 500 && status < 600) return PERF__UPLOAD_RETRY_LIMITED;
  return PERF__UPLOAD_REJECTED; /* 1xx/3xx as a final answer: not our protocol */
}

int64_t perf__backoff_ms(unsigned attempt, int64_t base_ms, int64_t cap_ms, double random01) {
  if (attempt == 0) attempt = 1;
  int64_t ceiling = base_ms;
  for (unsigned i = 1; i < attempt && ceiling < cap_ms; i++)
    ceiling *= 2;
  if (ceiling > cap_ms) ceiling = cap_ms;
  if (random01 < 0) random01 = 0;
  if (random01 >= 1) random01 = 0.999999;
  return (int64_t)(random01 * (double)(ceiling + 1));
}

int64_t perf__retry_after_ms(const char *value, time_t now) {
  if (!value) return -1;
  while (isspace((unsigned char)*value))
    value++;
  if (!*value) return -1;
  if (isdigit((unsigned char)*value)) {
    char *end;
    errno = 0;
    unsigned long long secs = strtoull(value, &end, 10);
    while (isspace((unsigned char)*end))
      end++;
    if (*end) return -1;
    if (errno == ERANGE || secs > PERF__RETRY_AFTER_CAP_MS / 1000) return PERF__RETRY_AFTER_CAP_MS;
    return (int64_t)secs * 1000;
  }
  /* An HTTP-date ("Wed, 21 Oct 2026 07:28:00 GMT"); curl_getdate also takes
     the obsolete RFC 850 and asctime forms the RFC says to accept. */
  time_t at = curl_getdate(value, NULL);
  if (at == -1) return -1;
  if (at <= now) return 0;
  int64_t ms = ((int64_t)at - (int64_t)now) * 1000;
  return ms > PERF__RETRY_AFTER_CAP_MS ? PERF__RETRY_AFTER_CAP_MS : ms;
}
