/*
 * test_store_contract.c - the contract of collector/store/store.h, driven
 * through store_ops_t directly (no HTTP, no ingest) against every backend
 * of the registry: each case runs on SQLite, and again as pg_<case> on the
 * tests' PostgreSQL (PERF_TEST_DB=pg). A batch is built by hand with known
 * figures, and every read must answer exactly those figures.
 *  - registry: the rows built in and the backend each location selects;
 *  - idempotent_batch_id: a batch stored twice is stored once;
 *  - reads_answer_the_batch: every read op against the batch's figures, its
 *    filters, orders and limits;
 *  - hang_picks_one_at_a_time: hangs with one majority key, two in one
 *    batch and one in the next, join one group (each pick sees the groups
 *    the earlier hangs made);
 *  - retention_deletes_older_batches: delete_older_than takes the batches
 *    received before the cutoff with their events, and keeps the rest;
 *  - resymbolize_moves_a_stack: a renamed stack's samples, CPU time and
 *    group move to its new signature;
 *  - known_rows_written_once: a stack's and a group's rows are written by
 *    the batch that stores them and left as they are by the batches of
 *    the next STORE_KNOWN_FOR, after a reopen too (last_seen in steps,
 *    known_rows.h); on SQLite a row another connection deleted is
 *    written again;
 *  - check_health_and_jobs: check and health answer STORE_OK; a job one
 *    store claimed another store on the same database cannot claim until
 *    it is released (backends that have jobs);
 *  - alerts: rules added, listed in order and deleted (then not found);
 *    an alert claimed once, by this store or another on the same
 *    database, its delivery updated and listed newest first per rule;
 *    an app's versions by their first batch; the groups new since a time
 *    (none named before it, per kind) within the batches scanned.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collector/model/hang_key.h"
#include "collector/store/known_rows.h"
#include "collector/store/store.h"
#include "collector_rig.h"
#include "tempdir.h"

#define S_NS INT64_C(1000000000)
#define RECEIVED_NS (INT64_C(1700000000) * S_NS)

typedef struct fixture_s {
  const store_ops_t *ops;
  store_t *st;
  char location[256];
} fixture_t;

static void open_store(fixture_t *f) {
  rig_db_location(f->location, sizeof f->location, tempdir_make("store_contract"));
  const char *why = NULL;
  const store_backend_t *b = store_backend_for(f->location, &why);
  CHECKF(b != NULL, "no backend for %s: %s", f->location, why);
  CHECK(b->schemes != NULL || !rig_pg());
  f->ops = b->ops;
  store_config_t config = {STORE_DURABLE_FULL, 0, 0};
  CHECKF(f->ops->open(f->location, &config, &f->st) == STORE_OK, "%s: open %s", f->ops->name,
         f->location);
}

static void close_store(fixture_t *f) {
  f->ops->close(f->st);
}

/* ---- a batch with known figures ------------------------------------------ */

/* Two stacks: A = leaf_a <- main, B = leaf_b <- main (innermost first). */
static const char *const NAMES_A[] = {"leaf_a", "main"};
static const char *const NAMES_B[] = {"leaf_b", "main"};
static const char FRAMES_A[] = "[{\"function\":\"leaf_a\",\"module\":\"/usr/bin/app\","
                               "\"address\":\"0x1010\",\"offset\":16},"
                               "{\"function\":\"main\",\"module\":\"/usr/bin/app\","
                               "\"address\":\"0x2020\",\"offset\":32}]";
static const char FRAMES_B[] = "[{\"function\":\"leaf_b\",\"module\":\"/usr/bin/app\","
                               "\"address\":\"0x1110\",\"offset\":16},"
                               "{\"function\":\"main\",\"module\":\"/usr/bin/app\","
                               "\"address\":\"0x2020\",\"offset\":32}]";

typedef struct built_s {
  store_group_t ga, gb; /* the stacks' own groups (the CPU grouping) */
  store_stack_t stacks[2];
  store_group_t groups[2];
  store_stack_count_t cpu_counts[2], hang_counts[1];
  store_state_count_t cpu_states[1];
  store_event_t events[2];
  store_tag_t tags[1];
  store_loop_stats_t loop;
  store_batch_t batch;
} built_t;

static void group_of(const char *const *names, size_t n, store_group_t *g) {
  CHECK(hang_key_group(names, n, g) == 0);
}

/* One batch: a CPU event (A 30 samples 300 ms CPU, B 10 samples 100 ms,
   1 s long, thread 11 running 40 samples) and a hang 2 s later (A 5
   samples, 500 ms, thread 12, grouped as A's stack), tag env=prod, 3
   events dropped for the rate limit, a watched loop. */
static void build(built_t *b, uint8_t id, int64_t received_ns, int64_t start_ns) {
  memset(b, 0, sizeof *b);
  group_of(NAMES_A, 2, &b->ga);
  group_of(NAMES_B, 2, &b->gb);
  b->stacks[0] = (store_stack_t){.frames_json = FRAMES_A};
  b->stacks[1] = (store_stack_t){.frames_json = FRAMES_B};
  memcpy(b->stacks[0].signature, b->ga.signature, sizeof b->ga.signature);
  memcpy(b->stacks[1].signature, b->gb.signature, sizeof b->gb.signature);
  b->groups[0] = b->ga;
  b->groups[1] = b->gb;
  b->cpu_counts[0] = (store_stack_count_t){b->ga.signature, 11, 30, 300000};
  b->cpu_counts[1] = (store_stack_count_t){b->gb.signature, 11, 10, 100000};
  b->hang_counts[0] = (store_stack_count_t){b->ga.signature, 12, 5, -1};
  b->cpu_states[0] = (store_state_count_t){11, "running", "", "", 40};
  b->events[0] = (store_event_t){.kind = "cpu",
                                 .start_ns = start_ns,
                                 .duration_ns = S_NS,
                                 .tid = 11,
                                 .cpu_percent = 90,
                                 .reason = "cpu above 50%",
                                 .dominant_stack_sig = b->ga.signature,
                                 .counts = b->cpu_counts,
                                 .n_counts = 2,
                                 .states = b->cpu_states,
                                 .n_states = 1};
  b->events[1] = (store_event_t){.kind = "hang",
                                 .start_ns = start_ns + 2 * S_NS,
                                 .duration_ns = S_NS / 2,
                                 .tid = 12,
                                 .reason = "loop busy",
                                 .dominant_stack_sig = b->ga.signature,
                                 .group_sig = b->ga.signature,
                                 .counts = b->hang_counts,
                                 .n_counts = 1};
  b->tags[0] = (store_tag_t){"env", "prod", 3};
  b->loop.watched_ns = 10 * S_NS;
  b->loop.busy_ns = 2 * S_NS;
  b->loop.units[0] = 7;
  b->batch = (store_batch_t){.received_ns = received_ns,
                             .app = "contract",
                             .version = "1.0",
                             .environment = "test",
                             .host = "h",
                             .pid = 42,
                             .tags = b->tags,
                             .n_tags = 1,
                             .stacks = b->stacks,
                             .n_stacks = 2,
                             .events = b->events,
                             .n_events = 2,
                             .groups = b->groups,
                             .n_groups = 2,
                             .loop_stats = &b->loop};
  b->batch.id[0] = id;
  b->batch.drops[STORE_DROP_RATE_LIMITED] = 3;
}

static void unbuild(built_t *b) {
  free((char *)b->ga.names_json);
  free((char *)b->gb.names_json);
}

static store_top_query_t all(const char *kind) {
  return (store_top_query_t){.kind = kind, .from_ns = 0, .to_ns = INT64_MAX};
}

static store_stats_t stats(const fixture_t *f) {
  store_stats_t s;
  CHECK(f->ops->stats(f->st, &s) == STORE_OK);
  return s;
}

/* ---- rows collected ------------------------------------------------------ */

#define MAX_ROWS 16

typedef struct top_s {
  char sig[MAX_ROWS][STORE_SIG_CHARS + 1];
  uint64_t events[MAX_ROWS], samples[MAX_ROWS], cpu_us[MAX_ROWS];
  int64_t total_ns[MAX_ROWS], max_ns[MAX_ROWS];
  size_t n;
} top_t;

/* A group's rows summed (rows come per version, label and bin). */
static int on_top(const store_top_row_t *row, void *user) {
  top_t *t = user;
  size_t i = 0;
  while (i < t->n && strcmp(t->sig[i], row->group_sig) != 0)
    i++;
  if (i == t->n) {
    CHECK(t->n < MAX_ROWS);
    snprintf(t->sig[t->n++], sizeof t->sig[0], "%s", row->group_sig);
  }
  t->events[i] += row->events;
  t->samples[i] += row->samples;
  t->cpu_us[i] += row->cpu_us;
  t->total_ns[i] += row->total_ns;
  if (row->max_ns > t->max_ns[i]) t->max_ns[i] = row->max_ns;
  return 0;
}

static top_t top(const fixture_t *f, const store_top_query_t *q) {
  top_t t = {0};
  CHECK(f->ops->top_rows(f->st, q, on_top, &t) == STORE_OK);
  return t;
}

static size_t top_find(const top_t *t, const char *sig) {
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->sig[i], sig) == 0) return i;
  CHECKF(false, "group %s not in the top rows", sig);
  return 0;
}

typedef struct stacks_s {
  char sig[MAX_ROWS][STORE_SIG_CHARS + 1];
  uint64_t samples[MAX_ROWS], cpu_us[MAX_ROWS];
  int64_t wall_ns[MAX_ROWS];
  size_t n;
} stacks_t;

static int on_stack(const store_stack_row_t *row, void *user) {
  stacks_t *s = user;
  CHECK(s->n < MAX_ROWS);
  snprintf(s->sig[s->n], sizeof s->sig[0], "%s", row->stack_sig);
  s->samples[s->n] = row->samples;
  s->cpu_us[s->n] = row->cpu_us;
  s->wall_ns[s->n++] = row->wall_ns;
  return 0;
}

typedef struct events_s {
  int64_t id[MAX_ROWS], start_ns[MAX_ROWS];
  char kind[MAX_ROWS][16], tags[MAX_ROWS][128];
  size_t n;
} events_t;

static int on_event(const store_event_row_t *row, void *user) {
  events_t *e = user;
  CHECK(e->n < MAX_ROWS);
  e->id[e->n] = row->id;
  e->start_ns[e->n] = row->start_ns;
  snprintf(e->kind[e->n], sizeof e->kind[0], "%s", row->kind);
  snprintf(e->tags[e->n++], sizeof e->tags[0], "%s", row->tags_json ? row->tags_json : "");
  return 0;
}

static events_t events(const fixture_t *f, const store_top_query_t *q, int64_t limit) {
  events_t e = {0};
  CHECK(f->ops->event_rows(f->st, q, limit, on_event, &e) == STORE_OK);
  return e;
}

typedef struct counts_s {
  char sig[MAX_ROWS][STORE_SIG_CHARS + 1];
  uint64_t samples[MAX_ROWS];
  int64_t cpu_us[MAX_ROWS];
  size_t n, events;
} counts_t;

static int on_detail_event(const store_event_row_t *row, void *user) {
  (void)row;
  ((counts_t *)user)->events++;
  return 0;
}

static int on_count(const store_count_row_t *row, void *user) {
  counts_t *c = user;
  CHECK(c->n < MAX_ROWS);
  CHECK(row->frames_json != NULL);
  snprintf(c->sig[c->n], sizeof c->sig[0], "%s", row->stack_sig);
  c->samples[c->n] = row->samples;
  c->cpu_us[c->n++] = row->cpu_us;
  return 0;
}

typedef struct states_s {
  uint32_t tid[MAX_ROWS];
  char state[MAX_ROWS][16];
  uint64_t samples[MAX_ROWS];
  size_t n;
} states_t;

static int on_state(const store_state_count_t *row, void *user) {
  states_t *s = user;
  CHECK(s->n < MAX_ROWS);
  s->tid[s->n] = row->tid;
  snprintf(s->state[s->n], sizeof s->state[0], "%s", row->state);
  s->samples[s->n++] = row->samples;
  return 0;
}

/* state_rows' sums: a whole read (one event_states row, under the default
   limit). */
static int on_state_sum(const store_state_sum_t *row, void *user) {
  CHECK_EQ_INT(row->rows, 1);
  CHECK_EQ_INT(row->rows_limit, STORE_READ_ROWS_MAX);
  return on_state(&row->count, user);
}

typedef struct buckets_s {
  int64_t start_ns[MAX_ROWS];
  uint64_t events[MAX_ROWS];
  size_t n;
} buckets_t;

static int on_bucket(const store_bucket_row_t *row, void *user) {
  buckets_t *b = user;
  CHECK(b->n < MAX_ROWS);
  b->start_ns[b->n] = row->start_ns;
  b->events[b->n++] = row->events;
  return 0;
}

typedef struct group_frames_s {
  size_t index[MAX_ROWS];
  bool has_leaf_a[MAX_ROWS];
  size_t n;
} group_frames_t;

static int on_group_stack(size_t index, const char *frames_json, void *user) {
  group_frames_t *g = user;
  CHECK(g->n < MAX_ROWS);
  g->index[g->n] = index;
  g->has_leaf_a[g->n++] = strstr(frames_json, "leaf_a") != NULL;
  return 0;
}

/* ---- the cases ------------------------------------------------------------ */

static void case_registry(void) {
  size_t n;
  const store_backend_t *rows = store_backends(&n);
  CHECK_EQ_INT(n, PERF_STORE_SQLITE + PERF_STORE_PG); /* a row per backend built in */
  const char *why = NULL;
#if PERF_STORE_PG
  CHECK(store_backend_for("postgresql:///perf?host=/tmp", &why)->ops == &store_pg_ops);
  CHECK(store_backend_for("postgres://db.internal/perf", &why)->ops == &store_pg_ops);
#else
  CHECK(store_backend_for("postgresql:///perf?host=/tmp", &why) == NULL);
  CHECK(strstr(why, "PERF_STORE_PG=OFF") != NULL);
#endif
#if PERF_STORE_SQLITE
  CHECK(store_backend_for("/var/lib/perf/perf.db", &why)->ops == &store_sqlite_ops);
  CHECK(store_backend_for("perf.db", &why)->schemes == NULL);
#else
  CHECK(store_backend_for("perf.db", &why) == NULL);
  CHECK(strstr(why, "PERF_STORE_SQLITE=OFF") != NULL);
#endif
  for (size_t i = 0; i < n; i++) {
    const store_ops_t *o = rows[i].ops;
    CHECKF(o->open && o->close && o->put_batch && o->delete_older_than && o->stats && o->check &&
               o->top_rows && o->stack_rows && o->event_rows && o->time_buckets && o->drops &&
               o->loop_totals && o->event_detail && o->event_states && o->state_rows &&
               o->group_stacks && o->resymbolize,
           "%s: a required op is missing", o->name);
    CHECKF(!o->claim_job == !o->release_job, "%s: claim_job without release_job", o->name);
  }
}

static void case_idempotent_batch_id(void) {
  fixture_t f;
  open_store(&f);
  built_t b;
  build(&b, 1, RECEIVED_NS, RECEIVED_NS);
  CHECK_EQ_INT(f.ops->put_batch(f.st, &b.batch), STORE_OK);
  store_stats_t once = stats(&f);
  CHECK_EQ_INT(once.batches, 1);
  CHECK_EQ_INT(once.events, 2);
  CHECK_EQ_INT(once.stacks, 2);
  CHECK_EQ_INT(once.stack_counts, 3);
  CHECK_EQ_INT(f.ops->put_batch(f.st, &b.batch), STORE_DUPLICATE);
  store_stats_t twice = stats(&f);
  CHECK_EQ_INT(twice.batches, 1);
  CHECK_EQ_INT(twice.events, 2);
  CHECK_EQ_INT(twice.stack_counts, 3);
  store_top_query_t q = all("cpu");
  top_t t = top(&f, &q);
  CHECK_EQ_INT(t.samples[top_find(&t, b.ga.signature)], 30);
  unbuild(&b);
  close_store(&f);
}

static void case_reads_answer_the_batch(void) {
  fixture_t f;
  open_store(&f);
  built_t b;
  build(&b, 2, RECEIVED_NS, RECEIVED_NS);
  CHECK_EQ_INT(f.ops->put_batch(f.st, &b.batch), STORE_OK);

  store_top_query_t cpu = all("cpu"), hang = all("hang"), any = all(NULL);
  top_t t = top(&f, &cpu);
  CHECK_EQ_INT(t.n, 2);
  size_t a = top_find(&t, b.ga.signature), bb = top_find(&t, b.gb.signature);
  CHECK_EQ_INT(t.events[a], 1);
  CHECK_EQ_INT(t.samples[a], 30);
  CHECK_EQ_INT(t.cpu_us[a], 300000);
  CHECK_EQ_INT(t.samples[bb], 10);
  CHECK_EQ_INT(t.cpu_us[bb], 100000);
  t = top(&f, &hang);
  CHECK_EQ_INT(t.n, 1);
  CHECK_EQ_INT(t.events[0], 1);
  CHECK_EQ_INT(t.samples[0], 5);
  CHECK_EQ_INT(t.total_ns[0], S_NS / 2);
  CHECK_EQ_INT(t.max_ns[0], S_NS / 2);
  CHECK(strcmp(t.sig[0], b.ga.signature) == 0);

  /* stack_rows: heaviest first (CPU time); a hang stack's own time is the
     hang's duration (its only stack). */
  stacks_t s = {0};
  CHECK(f.ops->stack_rows(f.st, &cpu, on_stack, &s) == STORE_OK);
  CHECK_EQ_INT(s.n, 2);
  CHECK(strcmp(s.sig[0], b.ga.signature) == 0);
  CHECK_EQ_INT(s.cpu_us[0], 300000);
  CHECK_EQ_INT(s.samples[1], 10);
  memset(&s, 0, sizeof s);
  CHECK(f.ops->stack_rows(f.st, &hang, on_stack, &s) == STORE_OK);
  CHECK_EQ_INT(s.n, 1);
  CHECK_EQ_INT(s.samples[0], 5);
  CHECK_EQ_INT(s.wall_ns[0], S_NS / 2);

  /* event_rows: newest first, limited, with the batch's tags; a tag
     filter the batch lacks matches nothing. */
  events_t e = events(&f, &any, 10);
  CHECK_EQ_INT(e.n, 2);
  CHECK(strcmp(e.kind[0], "hang") == 0 && strcmp(e.kind[1], "cpu") == 0);
  CHECK(strstr(e.tags[0], "\"env\"") && strstr(e.tags[0], "\"prod\""));
  CHECK_EQ_INT(events(&f, &any, 1).n, 1);
  store_top_query_t staging = any;
  staging.tags[0] = (store_tag_t){"env", "staging", 3};
  staging.n_tags = 1;
  CHECK_EQ_INT(events(&f, &staging, 10).n, 0);
  store_top_query_t prod = staging;
  prod.tags[0].value = "prod";
  CHECK_EQ_INT(events(&f, &prod, 10).n, 2);
  store_top_query_t later = any;
  later.from_ns = RECEIVED_NS + S_NS; /* after the CPU event's start */
  CHECK_EQ_INT(events(&f, &later, 10).n, 1);

  /* event_detail: counts by CPU time; an unknown id is STORE_NOT_FOUND. */
  int64_t cpu_id = e.id[1];
  counts_t c = {0};
  CHECK_EQ_INT(f.ops->event_detail(f.st, cpu_id, on_detail_event, on_count, &c), STORE_OK);
  CHECK_EQ_INT(c.events, 1);
  CHECK_EQ_INT(c.n, 2);
  CHECK(strcmp(c.sig[0], b.ga.signature) == 0);
  CHECK_EQ_INT(c.samples[0], 30);
  CHECK_EQ_INT(c.cpu_us[0], 300000);
  CHECK_EQ_INT(c.cpu_us[1], 100000);
  counts_t none = {0};
  CHECK_EQ_INT(
      f.ops->event_detail(f.st, e.id[0] + e.id[1] + 1000, on_detail_event, on_count, &none),
      STORE_NOT_FOUND);
  CHECK_EQ_INT(none.events + none.n, 0);

  /* event_states and state_rows. */
  states_t st = {0};
  CHECK(f.ops->event_states(f.st, cpu_id, on_state, &st) == STORE_OK);
  CHECK_EQ_INT(st.n, 1);
  CHECK_EQ_INT(st.tid[0], 11);
  CHECK(strcmp(st.state[0], "running") == 0);
  CHECK_EQ_INT(st.samples[0], 40);
  memset(&st, 0, sizeof st);
  CHECK(f.ops->state_rows(f.st, &cpu, on_state_sum, &st) == STORE_OK);
  CHECK_EQ_INT(st.n, 1);
  CHECK_EQ_INT(st.tid[0], 0);
  CHECK_EQ_INT(st.samples[0], 40);

  /* time_buckets: one minute bucket holding the CPU event. */
  buckets_t bk = {0};
  int64_t minute = 60 * S_NS;
  CHECK(f.ops->time_buckets(f.st, &cpu, minute, 100, on_bucket, &bk) == STORE_OK);
  CHECK_EQ_INT(bk.n, 1);
  CHECK_EQ_INT(bk.start_ns[0], RECEIVED_NS / minute * minute);
  CHECK_EQ_INT(bk.events[0], 1);

  /* drops and loop totals. */
  store_drops_t d;
  CHECK(f.ops->drops(f.st, &any, &d) == STORE_OK);
  CHECK_EQ_INT(d.batches, 1);
  CHECK_EQ_INT(d.dropped[STORE_DROP_RATE_LIMITED], 3);
  CHECK_EQ_INT(d.dropped[STORE_DROP_QUEUE_FULL], 0);
  store_loop_totals_t lt;
  CHECK(f.ops->loop_totals(f.st, &any, &lt) == STORE_OK);
  CHECK_EQ_INT(lt.batches, 1);
  CHECK_EQ_INT(lt.hangs, 1);
  CHECK_EQ_INT(lt.sum.watched_ns, 10 * S_NS);
  CHECK_EQ_INT(lt.sum.busy_ns, 2 * S_NS);
  CHECK_EQ_INT(lt.sum.units[0], 7);

  /* group_stacks: in the order asked, each group's own stack. */
  const char *sigs[] = {b.gb.signature, b.ga.signature};
  group_frames_t g = {0};
  CHECK(f.ops->group_stacks(f.st, sigs, 2, on_group_stack, &g) == STORE_OK);
  CHECK(g.n >= 2);
  CHECK_EQ_INT(g.index[0], 0);
  CHECK(!g.has_leaf_a[0]);
  CHECK_EQ_INT(g.index[g.n - 1], 1);
  CHECK(g.has_leaf_a[g.n - 1]);
  unbuild(&b);
  close_store(&f);
}

/* A hang whose samples all share A's stack: its key is leaf_a <- main. */
static void keyed_hang(store_hang_t *h, perf__named_stack_t *stack, uint64_t *samples) {
  *stack = (perf__named_stack_t){NAMES_A, 2};
  *samples = 5;
  memset(h, 0, sizeof *h);
  h->samples = (perf__hang_samples_t){stack, samples, 1};
  CHECK(hang_key_make(h, 0) == 0);
  CHECK(h->len >= 1);
}

static void case_hang_picks_one_at_a_time(void) {
  fixture_t f;
  open_store(&f);
  built_t b1, b2;
  build(&b1, 3, RECEIVED_NS, RECEIVED_NS);
  build(&b2, 4, RECEIVED_NS + 10 * S_NS, RECEIVED_NS + 10 * S_NS);
  perf__named_stack_t stacks[3];
  uint64_t samples[3];
  store_hang_t hangs[3];
  for (int i = 0; i < 3; i++)
    keyed_hang(&hangs[i], &stacks[i], &samples[i]);
  /* batch 1: the hang twice (its CPU event made a hang too); batch 2: once */
  b1.events[0] = b1.events[1];
  b1.events[0].hang = &hangs[0];
  b1.events[1].hang = &hangs[1];
  b2.events[1].hang = &hangs[2];
  CHECK_EQ_INT(f.ops->put_batch(f.st, &b1.batch), STORE_OK);
  CHECK_EQ_INT(f.ops->put_batch(f.st, &b2.batch), STORE_OK);
  store_top_query_t hang = all("hang");
  top_t t = top(&f, &hang);
  CHECK_EQ_INT(t.n, 1);
  CHECK_EQ_INT(t.events[0], 3);
  CHECK_EQ_INT(t.samples[0], 15);
  CHECK(strcmp(t.sig[0], hangs[0].group.signature) == 0);
  for (int i = 0; i < 3; i++)
    hang_key_release(&hangs[i]);
  unbuild(&b1);
  unbuild(&b2);
  close_store(&f);
}

static void case_retention_deletes_older_batches(void) {
  fixture_t f;
  open_store(&f);
  built_t old, recent;
  build(&old, 5, RECEIVED_NS, RECEIVED_NS);
  build(&recent, 6, RECEIVED_NS + 3600 * S_NS, RECEIVED_NS + 3600 * S_NS);
  CHECK_EQ_INT(f.ops->put_batch(f.st, &old.batch), STORE_OK);
  CHECK_EQ_INT(f.ops->put_batch(f.st, &recent.batch), STORE_OK);
  uint64_t deleted = 0;
  CHECK_EQ_INT(f.ops->delete_older_than(f.st, RECEIVED_NS + 60 * S_NS, &deleted), STORE_OK);
  CHECK_EQ_INT(deleted, 1);
  store_stats_t s = stats(&f);
  CHECK_EQ_INT(s.batches, 1);
  CHECK_EQ_INT(s.events, 2);
  CHECK_EQ_INT(s.stacks, 2); /* seen again by the recent batch */
  store_top_query_t any = all(NULL);
  events_t e = events(&f, &any, 10);
  CHECK_EQ_INT(e.n, 2);
  CHECK(e.start_ns[1] >= RECEIVED_NS + 3600 * S_NS);
  store_drops_t d;
  CHECK(f.ops->drops(f.st, &any, &d) == STORE_OK);
  CHECK_EQ_INT(d.batches, 1);
  /* past the recent batch, and past the slack a backend may keep its
     stacks and groups for */
  int64_t past = RECEIVED_NS + 3600 * S_NS + STORE_RETENTION_SLACK_NS + S_NS;
  CHECK_EQ_INT(f.ops->delete_older_than(f.st, past, NULL), STORE_OK);
  s = stats(&f);
  CHECK_EQ_INT(s.batches + s.events + s.stacks + s.stack_counts, 0);
  unbuild(&old);
  unbuild(&recent);
  close_store(&f);
}

/* The renamer: a stack with leaf_a is renamed to renamed_a <- main. */
static const char *const NAMES_RENAMED[] = {"renamed_a", "main"};

static int rename_stack(void *user, const char *frames_json, store_stack_t *stack,
                        store_group_t *group) {
  (void)user;
  if (!strstr(frames_json, "\"leaf_a\"")) return 0;
  group_of(NAMES_RENAMED, 2, group);
  memcpy(stack->signature, group->signature, sizeof group->signature);
  char *frames = strdup(frames_json);
  CHECK(frames != NULL);
  memcpy(strstr(frames, "\"leaf_a\""), "\"rnmd_a\"", 8);
  stack->frames_json = frames;
  return 1;
}

static int hang_group(void *user, const char *const *frames_json, const uint64_t *samples, size_t n,
                      store_hang_t *hang) {
  (void)user, (void)samples;
  CHECK(n >= 1);
  memset(hang, 0, sizeof *hang);
  bool renamed = strstr(frames_json[0], "\"rnmd_a\"") != NULL;
  group_of(renamed ? NAMES_RENAMED : NAMES_B, 2, &hang->group);
  return 0;
}

static void hang_free(void *user, store_hang_t *hang) {
  (void)user;
  free((char *)hang->group.names_json);
}

static void case_resymbolize_moves_a_stack(void) {
  fixture_t f;
  open_store(&f);
  built_t b;
  build(&b, 7, RECEIVED_NS, RECEIVED_NS);
  CHECK_EQ_INT(f.ops->put_batch(f.st, &b.batch), STORE_OK);
  store_renamer_t r = {rename_stack, hang_group, hang_free, NULL};
  uint64_t renamed = 0;
  CHECK_EQ_INT(f.ops->resymbolize(f.st, "leaf_a", &r, &renamed), STORE_OK);
  CHECK_EQ_INT(renamed, 1);
  store_group_t g;
  group_of(NAMES_RENAMED, 2, &g);
  store_top_query_t cpu = all("cpu"), hang = all("hang");
  top_t t = top(&f, &cpu);
  CHECK_EQ_INT(t.n, 2);
  size_t i = top_find(&t, g.signature);
  CHECK_EQ_INT(t.samples[i], 30);
  CHECK_EQ_INT(t.cpu_us[i], 300000);
  t = top(&f, &hang);
  CHECK_EQ_INT(t.n, 1);
  CHECK(strcmp(t.sig[0], g.signature) == 0);
  CHECK_EQ_INT(t.samples[0], 5);
  stacks_t s = {0};
  CHECK(f.ops->stack_rows(f.st, &cpu, on_stack, &s) == STORE_OK);
  CHECK_EQ_INT(s.n, 2);
  CHECK(strcmp(s.sig[0], g.signature) == 0);
  CHECK_EQ_INT(stats(&f).stacks, 2);
  free((char *)g.names_json);
  unbuild(&b);
  close_store(&f);
}

static void case_check_health_and_jobs(void) {
  fixture_t f;
  open_store(&f);
  char why[512] = "";
  CHECKF(f.ops->check(f.st, why, sizeof why) == STORE_OK, "check: %s", why);
  if (f.ops->health) CHECKF(f.ops->health(f.st, why, sizeof why) == STORE_OK, "health: %s", why);
  if (f.ops->claim_job) {
    fixture_t other = f;
    store_config_t config = {STORE_DURABLE_FULL, 0, 0};
    CHECK(other.ops->open(f.location, &config, &other.st) == STORE_OK);
    CHECK_EQ_INT(f.ops->claim_job(f.st, "contract:job"), 1);
    CHECK_EQ_INT(other.ops->claim_job(other.st, "contract:job"), 0);
    CHECK_EQ_INT(other.ops->claim_job(other.st, "contract:other"), 1);
    f.ops->release_job(f.st, "contract:job");
    CHECK_EQ_INT(other.ops->claim_job(other.st, "contract:job"), 1);
    other.ops->release_job(other.st, "contract:job");
    other.ops->release_job(other.st, "contract:other");
    close_store(&other);
  } else {
    CHECK(!rig_pg()); /* one collector a database: SQLite */
  }
  close_store(&f);
}

static int on_rule(const store_alert_rule_t *r, void *user) {
  json_array_append_new(user, json_pack("{s:I,s:s,s:s,s:s,s:s?,s:s?,s:I}", "id", (json_int_t)r->id,
                                        "kind", r->kind, "url", r->url, "format", r->format, "app",
                                        r->app, "event_kind", r->event_kind, "created_ns",
                                        (json_int_t)r->created_ns));
  return 0;
}

static int on_alert_row(const store_alert_t *a, void *user) {
  json_array_append_new(user, json_pack("{s:I,s:s,s:s,s:I,s:I,s:I,s:s,s:s}", "rule",
                                        (json_int_t)a->rule_id, "key", a->alert_key, "state",
                                        a->state, "status", (json_int_t)a->status, "attempts",
                                        (json_int_t)a->attempts, "time", (json_int_t)a->time_ns,
                                        "summary", a->summary, "link", a->link));
  return 0;
}

static int on_version(const char *version, int64_t first_ns, void *user) {
  json_array_append_new(user, json_pack("[sI]", version, (json_int_t)first_ns));
  return 0;
}

static int on_new_group(const store_new_group_t *g, void *user) {
  json_array_append_new(user,
                        json_pack("[ssI]", g->kind, g->group_sig, (json_int_t)g->first_seen_ns));
  return 0;
}

/* list's JSON, compact, against want. */
static void check_json(json_t *list, const char *want, const char *what) {
  char *got = json_dumps(list, JSON_COMPACT);
  CHECKF(got && strcmp(got, want) == 0, "%s: %s, want %s", what, got ? got : "?", want);
  free(got);
  json_decref(list);
}

static void case_alerts(void) {
  fixture_t f;
  open_store(&f);
  store_alert_rule_t r1 = {0, "new_group", "http://h/1", "json", NULL, "cpu", 5};
  store_alert_rule_t r2 = {0, "hang_rate_regression", "http://h/2", "slack", "shop", NULL, 6};
  CHECK_EQ_INT(f.ops->alert_rule_add(f.st, &r1, &r1.id), STORE_OK);
  CHECK_EQ_INT(f.ops->alert_rule_add(f.st, &r2, &r2.id), STORE_OK);
  CHECK(r2.id > r1.id && r1.id > 0);
  CHECK_EQ_INT(f.ops->alert_rule_delete(f.st, r1.id), STORE_OK);
  CHECK_EQ_INT(f.ops->alert_rule_delete(f.st, r1.id), STORE_NOT_FOUND);
  json_t *list = json_array();
  CHECK_EQ_INT(f.ops->alert_rules(f.st, on_rule, list), STORE_OK);
  char want[512];
  snprintf(want, sizeof want,
           "[{\"id\":%lld,\"kind\":\"hang_rate_regression\",\"url\":\"http://h/2\","
           "\"format\":\"slack\",\"app\":\"shop\",\"event_kind\":null,\"created_ns\":6}]",
           (long long)r2.id);
  check_json(list, want, "rules");

  /* One claim per rule and key, whichever store of the database makes it. */
  store_alert_t a = {0, r2.id, "k1", "pending", 0, 0, 100, "one", "http://d/?x=1"};
  CHECK_EQ_INT(f.ops->alert_claim(f.st, &a, &a.id), STORE_OK);
  int64_t again = -1;
  CHECK_EQ_INT(f.ops->alert_claim(f.st, &a, &again), STORE_DUPLICATE);
  fixture_t other = f;
  store_config_t config = {STORE_DURABLE_FULL, 0, 0};
  CHECK(other.ops->open(f.location, &config, &other.st) == STORE_OK);
  CHECK_EQ_INT(other.ops->alert_claim(other.st, &a, &again), STORE_DUPLICATE);
  store_alert_t b = {0, r2.id, "k2", "suppressed", 0, 0, 200, "two", ""};
  CHECK_EQ_INT(other.ops->alert_claim(other.st, &b, &b.id), STORE_OK);
  close_store(&other);
  store_alert_t c = {0, r1.id, "k1", "pending", 0, 0, 150, "three", ""};
  CHECK_EQ_INT(f.ops->alert_claim(f.st, &c, &c.id), STORE_OK); /* another rule's k1 */
  a.state = "delivered", a.status = 200, a.attempts = 2, a.time_ns = 300;
  CHECK_EQ_INT(f.ops->alert_update(f.st, &a), STORE_OK);
  list = json_array();
  CHECK_EQ_INT(f.ops->alert_rows(f.st, r2.id, 10, on_alert_row, list), STORE_OK);
  snprintf(want, sizeof want,
           "[{\"rule\":%lld,\"key\":\"k1\",\"state\":\"delivered\",\"status\":200,"
           "\"attempts\":2,\"time\":300,\"summary\":\"one\",\"link\":\"http://d/?x=1\"},"
           "{\"rule\":%lld,\"key\":\"k2\",\"state\":\"suppressed\",\"status\":0,"
           "\"attempts\":0,\"time\":200,\"summary\":\"two\",\"link\":\"\"}]",
           (long long)r2.id, (long long)r2.id);
  check_json(list, want, "alerts of rule 2");
  list = json_array();
  CHECK_EQ_INT(f.ops->alert_rows(f.st, 0, 2, on_alert_row, list), STORE_OK);
  CHECK_EQ_INT(json_array_size(list), 2); /* the newest two of three: 300, 200 */
  CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(list, 1), "time")), 200);
  json_decref(list);

  /* Versions by their first batch: 1.0 at R, 2.0 at R + 10 s (1.0 again after). */
  built_t x;
  const char *versions[] = {"1.0", "2.0", "1.0"};
  for (int i = 0; i < 3; i++) {
    build(&x, (uint8_t)(10 + i), RECEIVED_NS + i * 10 * S_NS, RECEIVED_NS);
    x.batch.version = versions[i];
    CHECK_EQ_INT(f.ops->put_batch(f.st, &x.batch), STORE_OK);
    unbuild(&x);
  }
  list = json_array();
  CHECK_EQ_INT(f.ops->app_versions(f.st, "contract", on_version, list), STORE_OK);
  snprintf(want, sizeof want, "[[\"1.0\",%lld],[\"2.0\",%lld]]", (long long)RECEIVED_NS,
           (long long)(RECEIVED_NS + 10 * S_NS));
  check_json(list, want, "versions");

  /* New groups: none since R + 5 s (batches at R named them all before);
     from R on, the first batch's: hang A, cpu A and cpu B, by signature. */
  list = json_array();
  CHECK_EQ_INT(f.ops->new_groups(f.st, "contract", RECEIVED_NS + 5 * S_NS, 0, on_new_group, list),
               STORE_OK);
  check_json(list, "[]", "new groups since R + 5 s");
  list = json_array();
  CHECK_EQ_INT(f.ops->new_groups(f.st, "contract", RECEIVED_NS, RECEIVED_NS, on_new_group, list),
               STORE_OK);
  build(&x, 99, RECEIVED_NS, RECEIVED_NS);
  const char *lo = strcmp(x.ga.signature, x.gb.signature) < 0 ? x.ga.signature : x.gb.signature;
  const char *hi = lo == x.ga.signature ? x.gb.signature : x.ga.signature;
  char hang_first[256], cpu[512];
  /* by first batch, then signature, then kind: A's cpu and hang rows together */
  snprintf(cpu, sizeof cpu, "[\"cpu\",\"%s\",%lld]", lo, (long long)RECEIVED_NS);
  snprintf(hang_first, sizeof hang_first, "[\"hang\",\"%s\",%lld]", x.ga.signature,
           (long long)RECEIVED_NS);
  char *got = json_dumps(list, JSON_COMPACT);
  CHECKF(json_array_size(list) == 3 && strstr(got, hang_first) && strstr(got, cpu),
         "new groups: %s", got);
  CHECKF(strstr(got, hi), "new groups: %s has %s", got, hi);
  free(got);
  json_decref(list);
  /* the scan's bound: batches received before it are not read */
  list = json_array();
  CHECK_EQ_INT(
      f.ops->new_groups(f.st, "contract", RECEIVED_NS, RECEIVED_NS + 30 * S_NS, on_new_group, list),
      STORE_OK);
  check_json(list, "[]", "new groups past the scan");
  list = json_array();
  CHECK_EQ_INT(f.ops->new_groups(f.st, "other", RECEIVED_NS, 0, on_new_group, list), STORE_OK);
  check_json(list, "[]", "another app's new groups");
  unbuild(&x);
  close_store(&f);
}

/* last_seen of the stacks (table "stacks") or groups row of sig. */
static long long last_seen(const fixture_t *f, const char *table, const char *sig) {
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT last_seen FROM %s WHERE signature = '%s'", table, sig);
  return db_count(f->location, sql);
}

static void put_at(fixture_t *f, uint8_t id, int64_t received_ns) {
  built_t b;
  build(&b, id, received_ns, received_ns);
  CHECK_EQ_INT(f->ops->put_batch(f->st, &b.batch), STORE_OK);
  unbuild(&b);
}

static void case_known_rows_written_once(void) {
  fixture_t f;
  open_store(&f);
  built_t b;
  build(&b, 1, RECEIVED_NS, RECEIVED_NS);
  CHECK_EQ_INT(f.ops->put_batch(f.st, &b.batch), STORE_OK);
  const char *sig = b.ga.signature;
  put_at(&f, 2, RECEIVED_NS + 60 * S_NS); /* known: neither row written */
  CHECK_EQ_INT(last_seen(&f, "stacks", sig), RECEIVED_NS);
  CHECK_EQ_INT(last_seen(&f, "groups", sig), RECEIVED_NS);
  int64_t later = RECEIVED_NS + STORE_KNOWN_FOR + S_NS; /* no longer known: moved */
  put_at(&f, 3, later);
  CHECK_EQ_INT(last_seen(&f, "stacks", sig), later);
  CHECK_EQ_INT(last_seen(&f, "groups", sig), later);
  /* Reopened, nothing known: a row within STORE_LAST_SEEN_MOVE stays. */
  close_store(&f);
  CHECK(f.ops->open(f.location, &(store_config_t){.durability = STORE_DURABLE_FULL}, &f.st) ==
        STORE_OK);
  put_at(&f, 4, later + 120 * S_NS);
  CHECK_EQ_INT(last_seen(&f, "stacks", sig), later);
  /* Known from batch 4 on (its last_seen trails it by 120 s) and for
     STORE_KNOWN_FOR after it; moved by the first batch past that. */
  int64_t last = later + 120 * S_NS + STORE_KNOWN_FOR;
  put_at(&f, 5, last);
  CHECK_EQ_INT(last_seen(&f, "stacks", sig), later);
  put_at(&f, 6, last + S_NS);
  CHECK_EQ_INT(last_seen(&f, "stacks", sig), last + S_NS);
  if (!rig_pg()) {
    /* Another connection deletes the rows the store knows: written again. */
    db_exec(f.location, "DELETE FROM stacks; DELETE FROM groups");
    put_at(&f, 7, last + 2 * S_NS);
    CHECK_EQ_INT(db_count(f.location, "SELECT count(*) FROM stacks"), 2);
    CHECK_EQ_INT(last_seen(&f, "groups", sig), last + 2 * S_NS);
  }
  store_stats_t s = stats(&f);
  CHECK_EQ_INT(s.batches, rig_pg() ? 6 : 7);
  unbuild(&b);
  close_store(&f);
}

static const test_case_t CASES[] = {
    TEST_CASE(registry),
    TEST_CASE(idempotent_batch_id),
    TEST_CASE(reads_answer_the_batch),
    TEST_CASE(hang_picks_one_at_a_time),
    TEST_CASE(retention_deletes_older_batches),
    TEST_CASE(resymbolize_moves_a_stack),
    TEST_CASE(known_rows_written_once),
    TEST_CASE(check_health_and_jobs),
    TEST_CASE(alerts),
};

int main(int argc, char **argv) {
  return collector_test_main(argc, argv, CASES, ARRAY_LEN(CASES));
}
