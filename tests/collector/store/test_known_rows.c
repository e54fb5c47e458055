/*
 * test_known_rows.c - the stacks and groups a collector's store saw
 * stored (collector/store/known_rows.c): a signature is fresh for
 * STORE_KNOWN_FOR after the batch that sent it and not a nanosecond more
 * (what keeps last_seen within the hour retention keeps), a later note
 * moves that, clear forgets all, a signature longer than the table keeps
 * is never known, and the table stays bounded with the newest kept.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "collector/store/known_rows.h"

#define T0 1795247520000000000LL

static void sig_of(unsigned i, char sig[STORE_SIG_CHARS + 1]) {
  snprintf(sig, STORE_SIG_CHARS + 1, "%016x%016x", i * 2654435761u, i);
}

static void case_window(void) {
  store_known_t *k = store_known_new();
  CHECK(k != NULL);
  CHECK(!store_known_fresh(k, "aaaa", T0));
  store_known_note(k, "aaaa", T0);
  CHECK(store_known_fresh(k, "aaaa", T0));
  CHECK(store_known_fresh(k, "aaaa", T0 - STORE_LAST_SEEN_STEP)); /* an earlier arrival */
  CHECK(store_known_fresh(k, "aaaa", T0 + STORE_KNOWN_FOR));
  CHECK(!store_known_fresh(k, "aaaa", T0 + STORE_KNOWN_FOR + 1));
  CHECK(!store_known_fresh(k, "aaab", T0));
  /* Sent again later: fresh from there. */
  store_known_note(k, "aaaa", T0 + STORE_KNOWN_FOR + 1);
  CHECK(store_known_fresh(k, "aaaa", T0 + 2 * STORE_KNOWN_FOR + 1));
  CHECK(!store_known_fresh(k, "aaaa", T0 + 2 * STORE_KNOWN_FOR + 2));
  store_known_clear(k);
  CHECK(!store_known_fresh(k, "aaaa", T0));
  store_known_free(k);
}

static void case_edges(void) {
  store_known_t *k = store_known_new();
  CHECK(k != NULL);
  char longer[STORE_SIG_CHARS + 2];
  memset(longer, 'f', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  store_known_note(k, longer, T0);
  CHECK(!store_known_fresh(k, longer, T0));
  char full[STORE_SIG_CHARS + 1];
  sig_of(7, full);
  store_known_note(k, full, T0);
  CHECK(store_known_fresh(k, full, T0));
  CHECK(!store_known_fresh(NULL, full, T0));
  CHECK(!store_known_fresh(k, NULL, T0));
  store_known_free(k);
}

/* 100,000 signatures noted one after the other: at most 16,384 known,
   and the last 200 all are (a full set drops its oldest). */
static void case_bounded(void) {
  enum { N = 100000, KEPT = 16384, LAST = 200 };
  store_known_t *k = store_known_new();
  CHECK(k != NULL);
  char sig[STORE_SIG_CHARS + 1];
  for (unsigned i = 0; i < N; i++) {
    sig_of(i, sig);
    store_known_note(k, sig, T0 + i);
  }
  unsigned known = 0;
  for (unsigned i = 0; i < N; i++) {
    sig_of(i, sig);
    known += store_known_fresh(k, sig, T0 + N);
  }
  CHECKF(known <= KEPT, "%u known", known);
  CHECKF(known >= KEPT / 2, "%u known", known);
  for (unsigned i = N - LAST; i < N; i++) {
    sig_of(i, sig);
    CHECKF(store_known_fresh(k, sig, T0 + N), "signature %u forgotten", i);
  }
  store_known_free(k);
}

static const test_case_t g_cases[] = {
    TEST_CASE(window),
    TEST_CASE(edges),
    TEST_CASE(bounded),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
