/*
 * pg_known.c - the stacks and groups a collector has seen stored
 * (pg_store.h pg_known_*). An app sends the same few hundred stacks in
 * batch after batch; each is about 5 KB of frames as JSON, and sending
 * them all again with every batch, for PostgreSQL to parse and find
 * already stored, was the largest part of both sides' work per batch
 * (bench/README.md "collector_bench", PostgreSQL).
 *
 * An entry is a signature and the arrival time of the last batch that
 * sent its row and committed: the row's last_seen is then at most
 * PG_LAST_SEEN_MOVE behind that time, so for PG_KNOWN_FOR after it a
 * batch may leave the row out and last_seen still trails it by at most
 * PG_LAST_SEEN_STEP, which retention keeps. Set-associative, fixed in
 * size: a signature's set of KNOWN_WAYS entries, the oldest replaced.
 */
#include <stdlib.h>
#include <string.h>

#include "collector/store/pg/pg_store.h"
#include "sdk/base/hash.h"

#define KNOWN_SETS 4096 /* of KNOWN_WAYS entries: 16384 signatures, 768 KiB */
#define KNOWN_WAYS 4

typedef struct known_entry_s {
  char sig[STORE_SIG_CHARS + 1];
  bool used;
  int64_t sent_ns;
} known_entry_t;

struct pg_known_s {
  known_entry_t set[KNOWN_SETS][KNOWN_WAYS];
};

pg_known_t *pg_known_new(void) {
  return calloc(1, sizeof(pg_known_t));
}

void pg_known_free(pg_known_t *k) {
  free(k);
}

void pg_known_clear(pg_known_t *k) {
  if (k) memset(k, 0, sizeof *k);
}

static known_entry_t *set_of(pg_known_t *k, const char *sig) {
  return k->set[perf__mix64(perf__fnv1a(PERF__FNV_OFFSET, sig, strlen(sig))) % KNOWN_SETS];
}

bool pg_known_fresh(pg_known_t *k, const char *sig, int64_t received_ns) {
  if (!k || !sig || strlen(sig) > STORE_SIG_CHARS) return false;
  const known_entry_t *set = set_of(k, sig);
  for (int i = 0; i < KNOWN_WAYS; i++)
    if (set[i].used && strcmp(set[i].sig, sig) == 0)
      return received_ns <= set[i].sent_ns + PG_KNOWN_FOR;
  return false;
}

void pg_known_note(pg_known_t *k, const char *sig, int64_t received_ns) {
  if (!k || !sig || strlen(sig) > STORE_SIG_CHARS) return;
  known_entry_t *set = set_of(k, sig), *e = NULL;
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
