/*
 * test_retry_policy.c - the uploader's status rules, backoff with full
 * jitter, and Retry-After parsing (uploader/retry_policy.c).
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "uploader/retry_policy.h"

static void case_status_rules(void) {
  const struct {
    long status;
    perf__upload_action_t action;
  } table[] = {
      {200, PERF__UPLOAD_DONE},          {201, PERF__UPLOAD_DONE},
      {204, PERF__UPLOAD_DONE},          {0, PERF__UPLOAD_RETRY},
      {429, PERF__UPLOAD_RETRY},         {502, PERF__UPLOAD_RETRY},
      {503, PERF__UPLOAD_RETRY},         {504, PERF__UPLOAD_RETRY},
      {400, PERF__UPLOAD_REJECTED},      {401, PERF__UPLOAD_RETRY_LONG},
      {403, PERF__UPLOAD_RETRY_LONG},    {404, PERF__UPLOAD_RETRY_LONG},
      {408, PERF__UPLOAD_RETRY_LONG},    {405, PERF__UPLOAD_REJECTED},
      {413, PERF__UPLOAD_REJECTED},      {415, PERF__UPLOAD_REJECTED},
      {422, PERF__UPLOAD_REJECTED},      {500, PERF__UPLOAD_RETRY_LIMITED},
      {501, PERF__UPLOAD_RETRY_LIMITED}, {599, PERF__UPLOAD_RETRY_LIMITED},
      {302, PERF__UPLOAD_REJECTED},
  };
  for (size_t i = 0; i < ARRAY_LEN(table); i++)
    CHECKF(perf__upload_action(table[i].status) == table[i].action, "status %ld", table[i].status);
}

static void case_long_backoff(void) {
  /* At least the cap; the jitter on top doubles up to 12 caps. */
  CHECK_EQ_INT(perf__long_backoff_ms(1, 300000, 0), 300000);
  CHECK_EQ_INT(perf__long_backoff_ms(1, 300000, 0.5), 300000 + 150000);
  CHECK_EQ_INT(perf__long_backoff_ms(2, 300000, 0.5), 300000 + 300000);
  CHECK_EQ_INT(perf__long_backoff_ms(100, 300000, 0.5), 300000 + 1800000);
}

static void case_backoff(void) {
  /* The ceiling doubles from base up to the cap; the draw spans [0, ceiling]. */
  CHECK_EQ_INT(perf__backoff_ms(1, 500, 60000, 0.999999), 500);
  CHECK_EQ_INT(perf__backoff_ms(2, 500, 60000, 0.999999), 1000);
  CHECK_EQ_INT(perf__backoff_ms(4, 500, 60000, 0.999999), 4000);
  CHECK_EQ_INT(perf__backoff_ms(8, 500, 60000, 0.999999), 60000);
  CHECK_EQ_INT(perf__backoff_ms(1000, 500, 60000, 0.999999), 60000); /* no overflow */
  CHECK_EQ_INT(perf__backoff_ms(5, 500, 60000, 0.0), 0);
  CHECK_EQ_INT(perf__backoff_ms(3, 500, 60000, 0.5), 1000);
  CHECK_EQ_INT(perf__backoff_ms(0, 500, 60000, 0.999999), 500); /* attempt 0 = the first */
  /* Out-of-range draws are clamped, never negative or above the ceiling. */
  CHECK_EQ_INT(perf__backoff_ms(2, 500, 60000, -3.0), 0);
  CHECK(perf__backoff_ms(2, 500, 60000, 7.0) <= 1000);
}

static void case_retry_after_seconds(void) {
  time_t now = 1795000000;
  CHECK_EQ_INT(perf__retry_after_ms("120", now), 120000);
  CHECK_EQ_INT(perf__retry_after_ms("  5 ", now), 5000);
  CHECK_EQ_INT(perf__retry_after_ms("0", now), 0);
  CHECK_EQ_INT(perf__retry_after_ms("86400", now), PERF__RETRY_AFTER_CAP_MS);
  CHECK_EQ_INT(perf__retry_after_ms("999999999999999999999", now), PERF__RETRY_AFTER_CAP_MS);
  CHECK_EQ_INT(perf__retry_after_ms("10abc", now), -1);
  CHECK_EQ_INT(perf__retry_after_ms("abc", now), -1);
  CHECK_EQ_INT(perf__retry_after_ms("", now), -1);
  CHECK_EQ_INT(perf__retry_after_ms(NULL, now), -1);
  CHECK_EQ_INT(perf__retry_after_ms("-5", now), -1);
}

static void case_retry_after_date(void) {
  /* 2026-11-21 09:00:00 UTC */
  time_t now = 1795251600;
  CHECK_EQ_INT(perf__retry_after_ms("Sat, 21 Nov 2026 09:00:30 GMT", now), 30000);
  CHECK_EQ_INT(perf__retry_after_ms("Saturday, 21-Nov-26 09:01:00 GMT", now), 60000);
  CHECK_EQ_INT(perf__retry_after_ms("Sat Nov 21 09:00:10 2026", now), 10000);
  CHECK_EQ_INT(perf__retry_after_ms("Sat, 21 Nov 2026 08:00:00 GMT", now), 0); /* past */
  CHECK_EQ_INT(perf__retry_after_ms("Sun, 29 Nov 2026 09:00:00 GMT", now),
               PERF__RETRY_AFTER_CAP_MS);
  CHECK_EQ_INT(perf__retry_after_ms("Someday, soon", now), -1);
}

static const test_case_t g_cases[] = {
    TEST_CASE(status_rules),        TEST_CASE(backoff),          TEST_CASE(long_backoff),
    TEST_CASE(retry_after_seconds), TEST_CASE(retry_after_date),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
