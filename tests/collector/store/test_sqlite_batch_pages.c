/*
 * test_sqlite_batch_pages.c - what a batch costs the SQLite store in pages
 * and that the reads it defers work for stay exact, through store_ops_t
 * directly (no HTTP). Each batch is one CPU event counting 400 distinct
 * stacks, so a row per stack lands in every index of stack_counts.
 *  - pages_per_batch: once the store holds 20 such batches, each further
 *    batch's commit appends at most 60 pages to the write-ahead log
 *    (counted in the -wal file, no checkpoint between): the stack counts'
 *    index by signature is filled by the fold (sqlite_store.c), not by
 *    each batch: filled by each batch, it dirties a leaf per stack
 *    counted (99 pages a batch here, 44 without it);
 *  - new_groups_before_the_fold: with no fold run (interval 3600 s), the
 *    alerts' new groups since a time see every stack counted before it:
 *    of two batches, the stacks both named are not new, the one only the
 *    second named is;
 *  - old_database_indexed_at_open: a database made before the index by
 *    signature was filled apart (its full index stack_counts_sig, no
 *    sig_indexed column) has every stack count in the partial index as
 *    soon as the store is open, its full index gone, and the alerts'
 *    new groups answer over it as before;
 *  - hang_group_of_another_connection: a hang joins the group with its
 *    key that another connection stored after this one's last pick, not
 *    the group keyed by a part of its key this one stored, though the
 *    store keeps the stored groups' signatures to look up only those of a
 *    key's prefixes (sqlite_hang_groups.c).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "collector/model/hang_key.h"
#include "collector/store/store.h"
#include "collector_rig.h"
#include "tempdir.h"

#define S_NS INT64_C(1000000000)
#define RECEIVED_NS (INT64_C(1700000000) * S_NS)
#define STACKS 400
#define WARM_BATCHES 20
#define MEASURED_BATCHES 5
#define MAX_PAGES_PER_BATCH 60

typedef struct fixture_s {
  store_t *st;
  char location[256];
} fixture_t;

/* A store with no fold while the test runs (the last one at close). */
static void open_store(fixture_t *f, const char *name) {
  snprintf(f->location, sizeof f->location, "%s/store.db", tempdir_make(name));
  store_config_t config = {STORE_DURABLE_FULL, 3600, 0};
  CHECKF(store_sqlite_ops.open(f->location, &config, &f->st) == STORE_OK, "open %s", f->location);
}

/* The stacks f<i> <- main, each its own group (the CPU grouping). */
typedef struct stacks_s {
  store_stack_t stacks[STACKS];
  store_group_t groups[STACKS];
} stacks_t;

static void make_stacks(stacks_t *s) {
  for (int i = 0; i < STACKS; i++) {
    char leaf[16];
    snprintf(leaf, sizeof leaf, "f%d", i);
    const char *names[] = {leaf, "main"};
    CHECK(hang_key_group(names, 2, &s->groups[i]) == 0);
    s->stacks[i] = (store_stack_t){.frames_json = "[]"};
    memcpy(s->stacks[i].signature, s->groups[i].signature, sizeof s->groups[i].signature);
  }
}

static void free_stacks(stacks_t *s) {
  for (int i = 0; i < STACKS; i++)
    free((char *)s->groups[i].names_json);
}

/* Batch id (2 bytes) received at ns: one CPU event counting stacks
   [first, first + n), 2 samples each on thread 7. */
static void put(fixture_t *f, const stacks_t *s, unsigned id, int64_t ns, int first, int n) {
  store_stack_count_t counts[STACKS];
  for (int i = 0; i < n; i++)
    counts[i] = (store_stack_count_t){s->groups[first + i].signature, 7, 2, 2000};
  store_event_t event = {.kind = "cpu",
                         .start_ns = ns,
                         .duration_ns = S_NS,
                         .tid = 7,
                         .cpu_percent = 90,
                         .reason = "cpu",
                         .dominant_stack_sig = counts[0].stack_sig,
                         .counts = counts,
                         .n_counts = (size_t)n};
  store_batch_t b = {.received_ns = ns,
                     .app = "pages",
                     .version = "1",
                     .environment = "test",
                     .host = "h",
                     .pid = 1,
                     .stacks = s->stacks + first,
                     .n_stacks = (size_t)n,
                     .events = &event,
                     .n_events = 1,
                     .groups = s->groups + first,
                     .n_groups = (size_t)n};
  b.id[0] = (uint8_t)(id >> 8);
  b.id[1] = (uint8_t)id;
  CHECK_EQ_INT(store_sqlite_ops.put_batch(f->st, &b), STORE_OK);
}

/* The -wal file's frames (its header says the page size) and its salt,
   which a restart of the log after a checkpoint changes. */
typedef struct wal_s {
  long long frames;
  uint64_t salt;
} wal_t;

static wal_t wal_of(const fixture_t *f) {
  char path[300];
  snprintf(path, sizeof path, "%s-wal", f->location);
  FILE *in = fopen(path, "rb");
  CHECKF(in != NULL, "%s", path);
  unsigned char h[32];
  CHECK(fread(h, 1, sizeof h, in) == sizeof h);
  CHECK(fseek(in, 0, SEEK_END) == 0);
  long size = ftell(in);
  fclose(in);
  long page = (long)h[8] << 24 | (long)h[9] << 16 | (long)h[10] << 8 | h[11];
  CHECK(page >= 512);
  wal_t w = {(size - 32) / (page + 24), 0};
  for (int i = 16; i < 24; i++)
    w.salt = w.salt << 8 | h[i];
  return w;
}

static void case_pages_per_batch(void) {
  fixture_t f;
  open_store(&f, "sqlite_batch_pages");
  stacks_t s;
  make_stacks(&s);
  for (unsigned i = 0; i < WARM_BATCHES; i++)
    put(&f, &s, i, RECEIVED_NS + i * S_NS, 0, STACKS);
  wal_t before = wal_of(&f);
  for (unsigned i = 0; i < MEASURED_BATCHES; i++)
    put(&f, &s, WARM_BATCHES + i, RECEIVED_NS + (WARM_BATCHES + i) * S_NS, 0, STACKS);
  wal_t after = wal_of(&f);
  CHECKF(after.salt == before.salt, "the log restarted while measured: %lld frames before",
         before.frames);
  long long per_batch = (after.frames - before.frames) / MEASURED_BATCHES;
  printf("%lld pages a batch of %d stack counts (%lld in the log after %d batches)\n", per_batch,
         STACKS, before.frames, WARM_BATCHES);
  CHECKF(per_batch <= MAX_PAGES_PER_BATCH, "%lld pages a batch, at most %d expected", per_batch,
         MAX_PAGES_PER_BATCH);
  store_sqlite_ops.close(f.st);
  CHECK_EQ_INT(db_count(f.location, "SELECT count(*) FROM stack_counts"),
               (WARM_BATCHES + MEASURED_BATCHES) * STACKS);
  CHECK_EQ_INT(db_count(f.location, "SELECT count(*) FROM stack_counts WHERE sig_indexed = 1"),
               (WARM_BATCHES + MEASURED_BATCHES) * STACKS);
  free_stacks(&s);
}

typedef struct news_s {
  char sig[4][STORE_SIG_CHARS + 1];
  size_t n;
} news_t;

static int on_new(const store_new_group_t *g, void *user) {
  news_t *n = user;
  CHECK(strcmp(g->kind, "cpu") == 0);
  CHECK(n->n < 4);
  snprintf(n->sig[n->n++], sizeof n->sig[0], "%s", g->group_sig);
  return 0;
}

static void case_new_groups_before_the_fold(void) {
  fixture_t f;
  open_store(&f, "sqlite_batch_pages");
  stacks_t s;
  make_stacks(&s);
  put(&f, &s, 1, RECEIVED_NS, 0, 2);             /* f0, f1 */
  put(&f, &s, 2, RECEIVED_NS + 10 * S_NS, 1, 2); /* f1, f2 */
  CHECK_EQ_INT(db_count(f.location, "SELECT count(*) FROM stack_counts WHERE sig_indexed = 1"), 0);
  news_t n = {0};
  CHECK_EQ_INT(store_sqlite_ops.new_groups(f.st, "pages", RECEIVED_NS + 5 * S_NS,
                                           RECEIVED_NS + 5 * S_NS, on_new, &n),
               STORE_OK);
  CHECK_EQ_INT(n.n, 1);
  CHECKF(strcmp(n.sig[0], s.groups[2].signature) == 0, "new: %s, f2 is %s", n.sig[0],
         s.groups[2].signature);
  memset(&n, 0, sizeof n);
  CHECK_EQ_INT(store_sqlite_ops.new_groups(f.st, "pages", RECEIVED_NS, RECEIVED_NS, on_new, &n),
               STORE_OK);
  CHECK_EQ_INT(n.n, 3);
  store_sqlite_ops.close(f.st);
  free_stacks(&s);
}

static void case_old_database_indexed_at_open(void) {
  fixture_t f;
  open_store(&f, "sqlite_batch_pages");
  stacks_t s;
  make_stacks(&s);
  put(&f, &s, 1, RECEIVED_NS, 0, 2);             /* f0, f1 */
  put(&f, &s, 2, RECEIVED_NS + 10 * S_NS, 1, 2); /* f1, f2 */
  store_sqlite_ops.close(f.st);
  db_exec(f.location, "DROP INDEX stack_counts_unindexed; DROP INDEX stack_counts_sig_indexed;"
                      " ALTER TABLE stack_counts DROP COLUMN sig_indexed;"
                      " CREATE INDEX stack_counts_sig ON stack_counts(stack_sig)");
  store_config_t config = {STORE_DURABLE_FULL, 3600, 0};
  CHECK(store_sqlite_ops.open(f.location, &config, &f.st) == STORE_OK);
  CHECK_EQ_INT(db_count(f.location, "SELECT count(*) FROM stack_counts WHERE sig_indexed = 1"), 4);
  CHECK_EQ_INT(db_count(f.location, "SELECT count(*) FROM sqlite_master WHERE name IN"
                                    " ('stack_counts_sig', 'stack_counts_sig_indexed',"
                                    " 'stack_counts_unindexed')"),
               2);
  CHECK_EQ_INT(db_count(f.location, "SELECT count(*) FROM sqlite_master WHERE name ="
                                    " 'stack_counts_sig'"),
               0);
  news_t n = {0};
  CHECK_EQ_INT(store_sqlite_ops.new_groups(f.st, "pages", RECEIVED_NS + 5 * S_NS,
                                           RECEIVED_NS + 5 * S_NS, on_new, &n),
               STORE_OK);
  CHECK_EQ_INT(n.n, 1);
  CHECK(strcmp(n.sig[0], s.groups[2].signature) == 0);
  store_sqlite_ops.close(f.st);
  free_stacks(&s);
}

/* Batch id at ns: one hang, 3 samples on each of its n stacks (2 frames
   each); its group's signature into sig. */
static void put_hang(fixture_t *f, unsigned id, int64_t ns, const char *const (*names)[2], size_t n,
                     char sig[STORE_SIG_CHARS + 1]) {
  perf__named_stack_t stacks[2];
  uint64_t samples[2];
  store_group_t groups[2];
  store_stack_t rows[2];
  store_stack_count_t counts[2];
  for (size_t i = 0; i < n; i++) {
    stacks[i] = (perf__named_stack_t){names[i], 2};
    samples[i] = 3;
    CHECK(hang_key_group(names[i], 2, &groups[i]) == 0);
    rows[i] = (store_stack_t){.frames_json = "[]"};
    memcpy(rows[i].signature, groups[i].signature, sizeof groups[i].signature);
    counts[i] = (store_stack_count_t){groups[i].signature, 7, 3, -1};
  }
  store_hang_t h = {.samples = {stacks, samples, n}};
  CHECK(hang_key_make(&h, 0) == 0);
  store_event_t event = {.kind = "hang",
                         .start_ns = ns,
                         .duration_ns = S_NS,
                         .tid = 7,
                         .reason = "loop busy",
                         .dominant_stack_sig = counts[0].stack_sig,
                         .counts = counts,
                         .n_counts = n,
                         .hang = &h};
  store_batch_t b = {.received_ns = ns,
                     .app = "pages",
                     .version = "1",
                     .environment = "test",
                     .host = "h",
                     .pid = 1,
                     .stacks = rows,
                     .n_stacks = n,
                     .events = &event,
                     .n_events = 1,
                     .groups = groups,
                     .n_groups = n};
  b.id[0] = (uint8_t)id;
  CHECK_EQ_INT(store_sqlite_ops.put_batch(f->st, &b), STORE_OK);
  char query[200];
  snprintf(query, sizeof query, "SELECT group_sig FROM events WHERE batch_id = x'%02x%030d'", id,
           0);
  char *stored = db_text(f->location, query);
  CHECK(stored != NULL);
  snprintf(sig, STORE_SIG_CHARS + 1, "%s", stored);
  free(stored);
  hang_key_release(&h);
  for (size_t i = 0; i < n; i++)
    free((char *)groups[i].names_json);
}

static void case_hang_group_of_another_connection(void) {
  fixture_t f;
  open_store(&f, "sqlite_batch_pages");
  /* A hang half in b, half in x: its group is keyed main alone, and half
     of its samples at main's end went to b. */
  const char *const split[2][2] = {{"b", "main"}, {"x", "main"}}, *const b[1][2] = {{"b", "main"}};
  char sig_main[STORE_SIG_CHARS + 1], sig[STORE_SIG_CHARS + 1];
  put_hang(&f, 1, RECEIVED_NS, split, 2, sig_main);
  /* Another connection stores the group keyed b <- main. */
  store_group_t g;
  CHECK(hang_key_group(b[0], 2, &g) == 0);
  CHECK(strcmp(g.signature, sig_main) != 0);
  char sql[1024];
  snprintf(sql, sizeof sql,
           "INSERT INTO hang_groups(signature, path) VALUES('%s', 'main' || char(31) || 'b' ||"
           " char(31)); INSERT OR IGNORE INTO groups(signature, frames, first_seen, last_seen)"
           " VALUES('%s', '%s', 1, 1); INSERT INTO hang_group_path(group_sig, samples)"
           " VALUES('%s', x'0a000000000000000a00000000000000')",
           g.signature, g.signature, g.names_json, g.signature);
  db_exec(f.location, sql);
  /* A hang in b alone: keyed b <- main, it joins the group with its key
     (which a pick takes before one keyed by a part of it). */
  put_hang(&f, 2, RECEIVED_NS + S_NS, b, 1, sig);
  CHECKF(strcmp(sig, g.signature) == 0, "the hang joined %s (main's group: %s), not %s", sig,
         sig_main, g.signature);
  free((char *)g.names_json);
  store_sqlite_ops.close(f.st);
}

static const test_case_t CASES[] = {
    TEST_CASE(pages_per_batch),
    TEST_CASE(new_groups_before_the_fold),
    TEST_CASE(old_database_indexed_at_open),
    TEST_CASE(hang_group_of_another_connection),
};

int main(int argc, char **argv) {
  return collector_test_main(argc, argv, CASES, ARRAY_LEN(CASES));
}
