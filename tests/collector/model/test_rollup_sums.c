/*
 * test_rollup_sums.c - rollup rows summed per key in memory
 * (collector/model/rollup_sums.c), as a fold's GROUP BY sums them: values
 * summed, least and greatest per key; keys that differ in one integer,
 * one text, or only where one text ends and the next begins kept apart;
 * keys in the order first added, their texts copies; thousands of keys
 * (the index grown); a sum past 64 bits refused, the key unchanged.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "collector/model/rollup_sums.h"

static const rollup_merge_t MERGE[] = {ROLLUP_SUM, ROLLUP_LEAST, ROLLUP_GREATEST};

/* A row of (bucket, dbin) and two texts, its values (n, first, last). */
static int add(rollup_sums_t *s, int64_t bucket, int64_t dbin, const char *a, const char *b,
               int64_t n, int64_t first, int64_t last) {
  const int64_t ints[] = {bucket, dbin};
  const char *const text[] = {a, b};
  const size_t len[] = {strlen(a), strlen(b)};
  const int64_t values[] = {n, first, last};
  return rollup_sums_add(s, ints, text, len, values);
}

static void check_sum(const rollup_sum_t *k, int64_t bucket, int64_t dbin, const char *a,
                      const char *b, int64_t n, int64_t first, int64_t last) {
  CHECK_EQ_INT(k->ints[0], bucket);
  CHECK_EQ_INT(k->ints[1], dbin);
  CHECK(strcmp(k->text[0], a) == 0 && k->text_len[0] == strlen(a));
  CHECK(strcmp(k->text[1], b) == 0 && k->text_len[1] == strlen(b));
  CHECK_EQ_INT(k->values[0], n);
  CHECK_EQ_INT(k->values[1], first);
  CHECK_EQ_INT(k->values[2], last);
}

static void case_merged(void) {
  rollup_sums_t *s = rollup_sums_new(2, 2, 3, MERGE);
  CHECK(s != NULL);
  char a[8];
  strcpy(a, "app");
  CHECK_EQ_INT(add(s, 600, 3, a, "S1", 2, 50, 60), 0);
  strcpy(a, "xxx"); /* the table kept its own copy */
  CHECK_EQ_INT(add(s, 600, 3, "app", "S1", 5, 40, 55), 0);
  CHECK_EQ_INT(add(s, 600, 3, "app", "S1", 1, 45, 70), 0);
  CHECK_EQ_INT(add(s, 1200, 3, "app", "S1", 7, 1, 1), 0); /* another bucket */
  CHECK_EQ_INT(add(s, 600, 4, "app", "S1", 7, 1, 1), 0);  /* another bin */
  CHECK_EQ_INT(add(s, 600, 3, "ap", "pS1", 7, 1, 1), 0);  /* the same bytes, cut elsewhere */
  CHECK_EQ_INT(add(s, 600, 3, "app", "", 7, 1, 1), 0);
  CHECK_EQ_INT(rollup_sums_count(s), 5);
  check_sum(rollup_sums_at(s, 0), 600, 3, "app", "S1", 8, 40, 70);
  check_sum(rollup_sums_at(s, 1), 1200, 3, "app", "S1", 7, 1, 1);
  check_sum(rollup_sums_at(s, 2), 600, 4, "app", "S1", 7, 1, 1);
  check_sum(rollup_sums_at(s, 3), 600, 3, "ap", "pS1", 7, 1, 1);
  check_sum(rollup_sums_at(s, 4), 600, 3, "app", "", 7, 1, 1);
  rollup_sums_free(s);
}

static void case_many_keys(void) {
  rollup_sums_t *s = rollup_sums_new(2, 2, 3, MERGE);
  CHECK(s != NULL);
  char sig[32];
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < 5000; i++) {
      snprintf(sig, sizeof sig, "%016x", i);
      CHECK_EQ_INT(add(s, 600 * (i % 7), 0, "app", sig, i, round, round), 0);
    }
  CHECK_EQ_INT(rollup_sums_count(s), 5000);
  for (int i = 0; i < 5000; i++) {
    snprintf(sig, sizeof sig, "%016x", i);
    check_sum(rollup_sums_at(s, (size_t)i), 600 * (i % 7), 0, "app", sig, 3 * (int64_t)i, 0, 2);
  }
  rollup_sums_free(s);
}

static void case_overflow(void) {
  rollup_sums_t *s = rollup_sums_new(2, 2, 3, MERGE);
  CHECK(s != NULL);
  CHECK_EQ_INT(add(s, 600, 0, "app", "S1", INT64_MAX - 1, 10, 10), 0);
  CHECK_EQ_INT(add(s, 600, 0, "app", "S1", 2, 5, 20), -2);
  check_sum(rollup_sums_at(s, 0), 600, 0, "app", "S1", INT64_MAX - 1, 10, 10);
  CHECK_EQ_INT(add(s, 600, 0, "app", "S1", 1, 5, 20), 0);
  check_sum(rollup_sums_at(s, 0), 600, 0, "app", "S1", INT64_MAX, 5, 20);
  rollup_sums_free(s);
}

static const test_case_t g_cases[] = {
    TEST_CASE(merged),
    TEST_CASE(many_keys),
    TEST_CASE(overflow),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
