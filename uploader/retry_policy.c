/*
 * retry_policy.c - status classification, backoff and Retry-After (see
 * retry_policy.h).
 */
#include "uploader/retry_policy.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static time_t parse_http_date(const char *v);
static int month_index(const char *name);

perf__upload_action_t perf__upload_action(long status) {
  if (status >= 200 && status < 300) return PERF__UPLOAD_DONE;
  /* No response, throttled, or a proxy / gateway that could not reach the
     collector: the batch is fine, the moment is not. */
  if (status == 0 || status == 429 || status == 502 || status == 503 || status == 504)
    return PERF__UPLOAD_RETRY;
  /* Auth (a rotated key: the next process may carry the new one) and the
     answers of proxies and gateways in front of the collector. */
  if (status == 401 || status == 403 || status == 404 || status == 408)
    return PERF__UPLOAD_RETRY_LONG;
  /* 400 malformed, 413 too large, 415 media type, and every other 4xx: the
     batch itself is bad; sending the same bytes again cannot help. */
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

int64_t perf__long_backoff_ms(unsigned attempt, int64_t cap_ms, double random01) {
  return cap_ms + perf__backoff_ms(attempt, cap_ms, 12 * cap_ms, random01);
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
  time_t at = parse_http_date(value);
  if (at == -1) return -1;
  if (at <= now) return 0;
  int64_t ms = ((int64_t)at - (int64_t)now) * 1000;
  return ms > PERF__RETRY_AFTER_CAP_MS ? PERF__RETRY_AFTER_CAP_MS : ms;
}

/* An HTTP-date (RFC 9110 5.6.7) in its three forms: IMF-fixdate "Sun, 06
   Nov 1994 08:49:37 GMT", the obsolete RFC 850 "Sunday, 06-Nov-94 08:49:37
   GMT" and asctime "Sun Nov  6 08:49:37 1994". Parsed by hand, not with
   strptime, whose day and month names follow the app's locale. -1 when
   malformed. */
static time_t parse_http_date(const char *v) {
  char mon[4] = "";
  int d = 0, y = 0, h = 0, mi = 0, s = 0, end = 0;
  const char *comma = strchr(v, ',');
  bool ok;
  if (comma && strchr(comma, '-')) {
    ok = sscanf(comma + 1, " %2d-%3[A-Za-z]-%2d %2d:%2d:%2d GMT%n", &d, mon, &y, &h, &mi, &s,
                &end) == 6;
    y += y < 70 ? 2000 : 1900; /* two-digit years: RFC 9110's 50-year rule, roughly */
  } else if (comma) {
    ok = sscanf(comma + 1, " %2d %3[A-Za-z] %4d %2d:%2d:%2d GMT%n", &d, mon, &y, &h, &mi, &s,
                &end) == 6;
  } else {
    ok = sscanf(v, "%*3[A-Za-z] %3[A-Za-z] %2d %2d:%2d:%2d %4d%n", mon, &d, &h, &mi, &s, &y,
                &end) == 6;
  }
  const char *rest = (comma ? comma + 1 : v) + end;
  while (ok && isspace((unsigned char)*rest))
    rest++;
  int m = month_index(mon);
  if (!ok || *rest || m < 0 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return -1;
  struct tm tm = {
      .tm_year = y - 1900, .tm_mon = m, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = s};
  return timegm(&tm);
}

static int month_index(const char *name) {
  static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
  if (strlen(name) != 3) return -1;
  for (int i = 0; i < 12; i++)
    if (strncmp(months + 3 * i, name, 3) == 0) return i;
  return -1;
}
