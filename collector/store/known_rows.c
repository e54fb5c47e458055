/*
 * known_rows.c - the stacks and groups a collector's store has seen
 * stored (known_rows.h). An app sends the same few hundred stacks in
 * batch after batch; each is about 5 KB of frames as JSON. Writing them
 * all again with every batch was the largest part of a batch's work on
 * either backend: PostgreSQL parsed them and found them stored; SQLite
 * rewrote each row (its last_seen) and so a page of the stacks and of
 * the groups per row, written to the WAL at the commit and again at the
 * checkpoint (bench/README.md "collector_bench").
 *
 * An entry is a signature and the arrival time of the last batch that
 * wrote its row and committed: the row's last_seen is then at most
 * STORE_LAST_SEEN_MOVE behind that time, so for STORE_KNOWN_FOR after it
 * a batch may leave the row out and last_seen still trails it by at most
 * STORE_LAST_SEEN_STEP, which retention keeps. Set-associative, fixed in
 * size: a signature's set of KNOWN_WAYS entries, the oldest replaced.
 */
#include <stdlib.h>
#include <string.h>

#include "collector/store/known_rows.h"
#include "sdk/base/hash.h"

#define KNOWN_SETS 4096 /* of KNOWN_WAYS entries: 16384 signatures, 768 KiB */
#define KNOWN_WAYS 4

typedef struct known_entry_s {
  char sig[STORE_SIG_CHARS + 1];
  bool used;
  int64_t sent_ns;
} known_entry_t;

struct store_known_s {
  known_entry_t set[KNOWN_SETS][KNOWN_WAYS];
};

store_known_t *store_known_new(void) {
  return calloc(1, sizeof(store_known_t));
}

void store_known_free(store_known_t *k) {
  free(k);
}

void store_known_clear(store_known_t *k) {
  if (k) memset(k, 0, sizeof *k);
}

static size_t set_of(const char *sig) {
  return perf__mix64(perf__fnv1a(PERF__FNV_OFFSET, sig, strlen(sig))) % KNOWN_SETS;
}

bool store_known_fresh(const store_known_t *k, const char *sig, int64_t received_ns) {
  if (!k || !sig || strlen(sig) > STORE_SIG_CHARS) return false;
  const known_entry_t *set = k->set[set_of(sig)];
  for (int i = 0; i < KNOWN_WAYS; i++)
    if (set[i].used && strcmp(set[i].sig, sig) == 0)
      return received_ns <= set[i].sent_ns + STORE_KNOWN_FOR;
  return false;
}

void store_known_note(store_known_t *k, const char *sig, int64_t received_ns) {
  if (!k || !sig || strlen(sig) > STORE_SIG_CHARS) return;
  known_entry_t *set = k->set[set_of(sig)], *e = NULL;
  for (int i = 0; i < KNOWN_WAYS && !e; i++)
    if (set[i].used && strcmp(set[i].sig, sig) == 0) e = &set[i];
  for (int i = 0; i < KNOWN_WAYS && !e; i++)
    if (!set[i].used) e = &set[i];
  if (!e) {
    e = &set[0];
    for (int i = 1; i < KNOWN_WAYS; i++)
      if (set[i].sent_ns < e->sent_ns) e = &set[i];
  }
  strcpy(e->sig, sig);
  e->used = true;
  e->sent_ns = received_ns;
}
