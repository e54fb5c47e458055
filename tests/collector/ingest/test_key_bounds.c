/*
 * test_key_bounds.c - what one key may create per window
 * (collector/ingest/key_bounds.c), driven directly with its own clock:
 * values counted once per batch and only when not known, the window's end
 * and Retry-After, 413 (retry 0) for a batch alone past a bound, a bound of
 * 0 unbounded, the known values' two generations (the older forgotten when
 * the newer fills), the table of keys full (further keys share one
 * window).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collector/ingest/key_bounds.h"

static key_bounds_t *bounds(unsigned window_s, uint64_t stacks, uint64_t labels) {
  key_bounds_config_t c;
  key_bounds_default(&c);
  c.window_s = window_s;
  c.max_new[KEY_BOUND_STACKS] = stacks;
  c.max_new[KEY_BOUND_LABELS] = labels;
  key_bounds_t *kb = key_bounds_new(&c);
  CHECK(kb != NULL);
  return kb;
}

/* n stack values "s<first + i>". */
static key_value_t *stacks(size_t first, size_t n) {
  key_value_t *v = calloc(n ? n : 1, sizeof *v);
  CHECK(v != NULL);
  for (size_t i = 0; i < n; i++) {
    char sig[32];
    snprintf(sig, sizeof sig, "s%zu", first + i);
    v[i] = key_value_of(KEY_BOUND_STACKS, sig, NULL);
  }
  return v;
}

static bool admit(key_bounds_t *kb, const char *key, size_t first, size_t n, double now,
                  key_refusal_t *why) {
  key_value_t *v = stacks(first, n);
  bool ok = key_bounds_admit(kb, key, v, n, now, why);
  if (ok) key_bounds_learn(kb, v, n);
  free(v);
  return ok;
}

static void case_window(void) {
  key_bounds_t *kb = bounds(100, 10, 0);
  key_refusal_t why;
  CHECK(admit(kb, "k", 0, 6, 1000, &why));
  CHECK(!admit(kb, "k", 100, 6, 1030, &why));
  CHECK_EQ_INT(why.kind, KEY_BOUND_STACKS);
  CHECK_EQ_INT(why.batch_new, 6);
  CHECK_EQ_INT(why.window_used, 6);
  CHECK_EQ_INT(why.bound, 10);
  CHECK_EQ_INT(why.retry_after_s, 70);       /* the window began at 1000 */
  CHECK(admit(kb, "k", 0, 6, 1031, &why));   /* known: nothing new */
  CHECK(admit(kb, "k", 100, 4, 1032, &why)); /* 10 of 10 */
  CHECK(!admit(kb, "k", 200, 1, 1099.5, &why));
  CHECK_EQ_INT(why.retry_after_s, 1);
  CHECK(admit(kb, "k", 200, 10, 1100, &why)); /* a new window */
  CHECK(admit(kb, "other", 300, 10, 1100, &why));
  /* One batch alone past the bound: never (retry 0). */
  CHECK(!admit(kb, "fresh", 400, 11, 1100, &why));
  CHECK_EQ_INT(why.retry_after_s, 0);
  CHECK_EQ_INT(why.batch_new, 11);
  key_bounds_free(kb);
}

static void case_repeats_and_kinds(void) {
  key_bounds_t *kb = bounds(100, 3, 0); /* labels unbounded */
  key_refusal_t why;
  key_value_t v[8];
  for (int i = 0; i < 6; i++)
    v[i] = key_value_of(KEY_BOUND_STACKS, i % 2 ? "a" : "b", NULL); /* 2 distinct */
  v[6] = key_value_of(KEY_BOUND_LABELS, "a", NULL);                 /* another kind */
  v[7] = key_value_of(KEY_BOUND_VERSIONS, "app", "1.0");
  CHECK(key_value_of(KEY_BOUND_VERSIONS, "app", "1.0").hash ==
        key_value_of(KEY_BOUND_VERSIONS, "app", "1.0").hash);
  CHECK(key_value_of(KEY_BOUND_VERSIONS, "ap", "p1.0").hash !=
        key_value_of(KEY_BOUND_VERSIONS, "app", "1.0").hash);
  CHECK(key_bounds_admit(kb, "k", v, 8, 0, &why));
  key_value_t more = key_value_of(KEY_BOUND_STACKS, "c", NULL);
  CHECK(key_bounds_admit(kb, "k", &more, 1, 1, &why)); /* 3 of 3: nothing was learned */
  more = key_value_of(KEY_BOUND_STACKS, "d", NULL);
  CHECK(!key_bounds_admit(kb, "k", &more, 1, 2, &why));
  for (int i = 0; i < 2000; i++) {
    char label[16];
    snprintf(label, sizeof label, "l%d", i);
    more = key_value_of(KEY_BOUND_LABELS, label, NULL);
    CHECK(key_bounds_admit(kb, "k", &more, 1, 3, &why));
  }
  key_bounds_free(kb);
}

/* A bound of 1 tells known from new: a known value passes for free. */
static void case_generations(void) {
  key_bounds_t *kb = bounds(1000000, 1, 0);
  key_refusal_t why;
  size_t n = KEY_BOUNDS_KNOWN;
  key_value_t *v = stacks(0, n);
  key_bounds_learn(kb, v, n);                      /* the newer generation full */
  CHECK(key_bounds_admit(kb, "k", v, n, 0, &why)); /* all known */
  key_value_t *next = stacks(n, n);
  key_bounds_learn(kb, next, n); /* s0.. move to the older generation */
  CHECK(key_bounds_admit(kb, "k", v, 1, 1, &why));
  key_value_t *third = stacks(2 * n, 1);
  key_bounds_learn(kb, third, 1);                     /* s0.. forgotten */
  CHECK(key_bounds_admit(kb, "k", next, n, 2, &why)); /* still known */
  CHECK(key_bounds_admit(kb, "k", v, 1, 3, &why));    /* new: 1 of 1 */
  CHECK(!key_bounds_admit(kb, "k", v + 1, 1, 4, &why));
  free(v);
  free(next);
  free(third);
  key_bounds_free(kb);
}

static void case_keys_full(void) {
  key_bounds_t *kb = bounds(100, 1, 0);
  key_refusal_t why;
  char key[32];
  for (int i = 0; i < KEY_BOUNDS_MAX_KEYS; i++) {
    snprintf(key, sizeof key, "key%d", i);
    CHECK(admit(kb, key, (size_t)i, 1, 0, &why));
  }
  /* Past the table: one shared window for every further key. */
  CHECK(admit(kb, "late-1", 100000, 1, 0, &why));
  CHECK(!admit(kb, "late-2", 100001, 1, 0, &why));
  CHECK(!admit(kb, "key0", 100002, 1, 0, &why)); /* its own window, full */
  key_bounds_free(kb);
}

static void case_off(void) {
  key_bounds_config_t c;
  key_bounds_default(&c);
  CHECK_EQ_INT(c.window_s, KEY_BOUNDS_WINDOW_S);
  CHECK_EQ_INT(c.max_new[KEY_BOUND_STACKS], KEY_BOUNDS_STACKS);
  c.window_s = 0;
  CHECK(key_bounds_new(&c) == NULL);
  key_refusal_t why;
  key_value_t v = key_value_of(KEY_BOUND_STACKS, "x", NULL);
  CHECK(key_bounds_admit(NULL, "k", &v, 1, 0, &why));
  key_bounds_learn(NULL, &v, 1);
  CHECK(strcmp(key_bound_flag(KEY_BOUND_TAGS), "--max-new-tags") == 0);
  CHECK(strcmp(key_bound_noun(KEY_BOUND_VERSIONS), "versions") == 0);
}

static const test_case_t g_cases[] = {
    TEST_CASE(window), TEST_CASE(repeats_and_kinds), TEST_CASE(generations), TEST_CASE(keys_full),
    TEST_CASE(off),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
