/*
 * test_stack_cache.c - built stack rows kept between batches
 * (collector/ingest/stack_cache.c): a hit is the row that was put, shared
 * (a reference each: the row lives until the last holder drops it); another
 * symbolizer generation is a miss (and the entry is gone), a passed
 * deadline a miss whose row is handed out as due, kept good by a renewal
 * (and not by a renewal of another row); the byte budget holds with least
 * recently used entries evicted; keys differing in either word are
 * different entries.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collector/ingest/stack_cache.h"

/* A built row of depth labels "fn<seed>_<i>", frames of about pad bytes,
   with one reference (the caller's). */
static stack_built_t *built(unsigned seed, size_t depth, size_t pad) {
  stack_built_t *b = stack_built_new();
  CHECK(b != NULL);
  snprintf(b->signature, sizeof b->signature, "%016x", seed);
  b->frames_json = malloc(pad + 16);
  CHECK(b->frames_json != NULL);
  memset(b->frames_json, 'x', pad);
  snprintf(b->frames_json + pad, 16, "%u", seed);
  b->names_json = strdup("[\"a\"]");
  b->labels = calloc(depth, sizeof *b->labels);
  CHECK(b->names_json && b->labels);
  for (size_t i = 0; i < depth; i++) {
    char l[32];
    snprintf(l, sizeof l, "fn%u_%zu", seed, i);
    CHECK((b->labels[i] = strdup(l)) != NULL);
  }
  b->depth = depth;
  b->named = seed, b->unnamed = seed + 1;
  snprintf(b->unresolved[0], sizeof b->unresolved[0], "ab%u", seed);
  b->n_unresolved = 1;
  return b;
}

/* The row seed's, as built() made it. */
static void check_row(const stack_built_t *b, unsigned seed, size_t depth) {
  char sig[STORE_SIG_CHARS + 1], label[32];
  snprintf(sig, sizeof sig, "%016x", seed);
  CHECK(strcmp(b->signature, sig) == 0);
  CHECK_EQ_INT(b->depth, depth);
  for (size_t i = 0; i < depth; i++) {
    snprintf(label, sizeof label, "fn%u_%zu", seed, i);
    CHECK(strcmp(b->labels[i], label) == 0);
  }
  CHECK_EQ_INT(b->named, seed);
  CHECK_EQ_INT(b->unnamed, seed + 1);
  CHECK_EQ_INT(b->n_unresolved, 1);
}

/* A hit is the row put, one more reference each time; the row outlives
   the cache while a holder keeps it (ASan: no use after free, no leak). */
static void case_hit_is_shared(void) {
  stack_cache_t *c = stack_cache_new(64, 1 << 20);
  CHECK(c != NULL);
  stack_built_t *b = built(7, 5, 100);
  uint64_t key[2] = {11, 12}, other[2] = {11, 13}, third[2] = {10, 12};
  CHECK(stack_cache_get(c, key, 0, 1.0) == NULL);
  stack_cache_put(c, key, 0, 0, b);
  CHECK_EQ_INT(b->refs, 2);
  stack_built_t *got = stack_cache_get(c, key, 0, 1.0);
  CHECK(got == b);
  CHECK_EQ_INT(b->refs, 3);
  check_row(got, 7, 5);
  stack_built_unref(got);
  CHECK(stack_cache_get(c, other, 0, 1.0) == NULL);
  CHECK(stack_cache_get(c, third, 0, 1.0) == NULL);
  got = stack_cache_get(c, key, 0, 1.0);
  stack_built_unref(b);
  stack_cache_free(c); /* the cache's reference dropped: got still holds the row */
  CHECK_EQ_INT(got->refs, 1);
  check_row(got, 7, 5);
  stack_built_unref(got);
}

static void case_generation_and_deadline(void) {
  stack_cache_t *c = stack_cache_new(64, 1 << 20);
  CHECK(c != NULL);
  stack_built_t *b = built(1, 3, 10), *got;
  uint64_t key[2] = {1, 2}, timed[2] = {3, 4};
  stack_cache_put(c, key, 5, 0, b);
  CHECK(stack_cache_get(c, key, 6, 1.0) == NULL); /* a debug file arrived since */
  CHECK_EQ_INT(b->refs, 1);                       /* and the stale entry is gone */
  CHECK(stack_cache_get(c, key, 5, 1.0) == NULL);
  stack_cache_put(c, timed, 5, 10.0, b); /* good until 10 s */
  CHECK((got = stack_cache_get(c, timed, 5, 9.9)) == b);
  stack_built_unref(got);
  CHECK(stack_cache_get(c, timed, 5, 10.0) == NULL);
  stack_built_unref(b);
  stack_cache_free(c);
}

static void case_due_row_renewed(void) {
  stack_cache_t *c = stack_cache_new(64, 1 << 20);
  CHECK(c != NULL);
  stack_built_t *b = built(1, 3, 10), *other = built(2, 3, 10), *got;
  uint64_t timed[2] = {3, 4}, forever[2] = {5, 6};
  stack_cache_put(c, timed, 5, 10.0, b);
  stack_cache_put(c, forever, 5, 0, other);
  CHECK(stack_cache_get_due(c, forever, 5) == NULL); /* never due */
  CHECK(stack_cache_get(c, timed, 5, 10.0) == NULL);
  CHECK(stack_cache_get_due(c, timed, 6) == NULL); /* another generation */
  CHECK((got = stack_cache_get_due(c, timed, 5)) == b);
  CHECK_EQ_INT(b->refs, 3);                 /* the test's, the cache's, got's */
  stack_cache_renew(c, timed, other, 12.0); /* not the row held: nothing */
  CHECK(stack_cache_get(c, timed, 5, 11.0) == NULL);
  stack_cache_renew(c, timed, got, 12.0);
  stack_built_unref(got);
  CHECK((got = stack_cache_get(c, timed, 5, 11.9)) == b);
  stack_built_unref(got);
  CHECK(stack_cache_get(c, timed, 5, 12.0) == NULL);
  stack_built_unref(b);
  stack_built_unref(other);
  stack_cache_free(c);
}

/* 200 entries of ~10 KiB into a 256 KiB budget: the ones put last are
   there, the first ones are not, and a recently hit one survives. */
static void case_bounded(void) {
  stack_cache_t *c = stack_cache_new(1024, 256 << 10);
  CHECK(c != NULL);
  stack_built_t *keep = built(0, 4, 10000), *got;
  uint64_t keep_key[2] = {1000, 1};
  stack_cache_put(c, keep_key, 0, 0, keep);
  int present = 0;
  for (unsigned i = 1; i <= 200; i++) {
    stack_built_t *b = built(i, 4, 10000);
    uint64_t key[2] = {i, i};
    stack_cache_put(c, key, 0, 0, b);
    stack_built_unref(b);
    CHECK((got = stack_cache_get(c, keep_key, 0, 1.0)) != NULL); /* used: never the oldest */
    stack_built_unref(got);
  }
  for (unsigned i = 1; i <= 200; i++) {
    uint64_t key[2] = {i, i};
    if ((got = stack_cache_get(c, key, 0, 1.0)) != NULL) present++, stack_built_unref(got);
  }
  /* 256 KiB hold at most 25 of them beside the kept one */
  CHECKF(present > 10 && present <= 25, "%d entries present", present);
  uint64_t last[2] = {200, 200}, first[2] = {1, 1};
  CHECK((got = stack_cache_get(c, last, 0, 1.0)) != NULL);
  stack_built_unref(got);
  CHECK(stack_cache_get(c, first, 0, 1.0) == NULL);
  /* An entry over a quarter of the budget is not kept. */
  stack_built_t *huge = built(9, 1, 100 << 10);
  uint64_t huge_key[2] = {9, 9};
  stack_cache_put(c, huge_key, 0, 0, huge);
  CHECK_EQ_INT(huge->refs, 1);
  CHECK(stack_cache_get(c, huge_key, 0, 1.0) == NULL);
  stack_built_unref(huge);
  stack_built_unref(keep);
  stack_cache_free(c);
}

static const test_case_t g_cases[] = {
    TEST_CASE(hit_is_shared),
    TEST_CASE(generation_and_deadline),
    TEST_CASE(due_row_renewed),
    TEST_CASE(bounded),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
