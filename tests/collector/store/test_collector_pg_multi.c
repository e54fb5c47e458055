/*
 * test_collector_pg_multi.c - several collectors on one PostgreSQL:
 * hand-made batches spread over two collectors on one database, some
 * posted to both at once (a retry racing its original), one collector
 * killed with SIGKILL mid-run and its batches retried on the other, as a
 * load balancer would: every acknowledged batch is stored exactly once,
 * with its events. And the background jobs' coordination: the retention
 * job waits while another instance holds its advisory lock; the versioned
 * schema: two collectors starting on an empty database migrate it once, a
 * database at the previous version is migrated with its rows kept, a
 * database newer than the collector is refused; a connection cut under a
 * running collector; /healthz while the database refuses connections; day
 * partitions made ahead and dropped whole by retention. Runs only
 * against the pg_server fixture (PERF_TEST_DB=pg).
 */
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "test_util.h"

#define BATCHES 200   /* seeds 1..BATCHES: distinct batch ids (batch_post.c) */
#define BOTH_EVERY 10 /* every tenth batch is posted to both collectors at once */
#define KILL_AT 60    /* A is killed once this many batches are acknowledged */

typedef struct poster_s {
  collector_t *a, *b;
  unsigned first; /* seeds first, first + 2, ... */
  atomic_int *acked_total;
  int acked[BATCHES + 1]; /* per seed: 200s */
  int both;               /* batches posted to both at once */
} poster_t;

static const uint64_t UNITS[9] = {1, 2, 3, 0, 0, 0, 0, 0, 0};

static long post_to(const collector_t *c, unsigned seed, reply_t *r) {
  loop_batch_t sp = {"multi", "1.0", "prod", 1000000000, 500000000, UNITS, 9, 2, 1, 300};
  return batch_post_loop(c, &sp, seed, r);
}

typedef struct racer_s {
  const collector_t *c;
  unsigned seed;
  long status;
  reply_t *r;
} racer_t;

static void *race(void *arg) {
  racer_t *x = arg;
  x->status = post_to(x->c, x->seed, x->r);
  return NULL;
}

/* Post seed as a load balancer would: to its collector, or on any failure
   (A killed: no answer, a 5xx) to the other one, until one says 200. */
static void *post_all(void *arg) {
  poster_t *p = arg;
  reply_t *r = malloc(sizeof *r), *r2 = malloc(sizeof *r2);
  CHECK(r && r2);
  for (unsigned seed = p->first; seed <= BATCHES; seed += 2) {
    const collector_t *to = seed % 4 < 2 ? p->a : p->b;
    if (seed % BOTH_EVERY == 0) { /* the same batch to both at once */
      racer_t x = {p->a, seed, 0, r}, y = {p->b, seed, 0, r2};
      pthread_t t;
      CHECK(pthread_create(&t, NULL, race, &x) == 0);
      race(&y);
      CHECK(pthread_join(t, NULL) == 0);
      p->acked[seed] += (x.status == 200) + (y.status == 200);
      if (x.status == 200 && y.status == 200) /* stored by one, found by the other */
        CHECKF((strncmp(r->body, "stored", 6) == 0) + (strncmp(r2->body, "stored", 6) == 0) == 1 &&
                   (strncmp(r->body, "duplicate", 9) == 0) +
                           (strncmp(r2->body, "duplicate", 9) == 0) ==
                       1,
               "batch %u: %.20s / %.20s", seed, r->body, r2->body);
      if (x.status == 200 || y.status == 200) {
        atomic_fetch_add(p->acked_total, 1);
        p->both++;
        continue;
      }
    }
    for (int tries = 0; tries < 20; tries++) {
      long status = post_to(to, seed, r);
      if (status == 200) {
        p->acked[seed]++;
        atomic_fetch_add(p->acked_total, 1);
        break;
      }
      to = to == p->a ? p->b : p->a;
    }
    CHECKF(p->acked[seed] > 0, "batch %u: never acknowledged", seed);
  }
  free(r);
  free(r2);
  return NULL;
}

static long long count_seed(const char *db, const char *what, unsigned seed) {
  char hex[33], sql[256];
  for (int i = 0; i < 16; i++) /* the id batch_post_answer makes */
    snprintf(hex + 2 * i, 3, "%02x", (uint8_t)(seed * 37 + (unsigned)i + (unsigned)getpid()));
  snprintf(sql, sizeof sql, what, hex);
  return db_count(db, sql);
}

/* Nothing left to fold, every event and sample counted once in both
   levels of the rollups. */
static void check_folded(const char *db) {
  CHECK_EQ_INT(db_count(db, "SELECT count(*) FROM rollup_groups_delta"), 0);
  CHECK_EQ_INT(db_count(db, "SELECT count(*) FROM rollup_stacks_delta"), 0);
  long long hangs = db_count(db, "SELECT count(*) FROM events WHERE kind = 'hang'"
                                 " AND group_sig IS NOT NULL"),
            samples = db_count(db, "SELECT sum(samples) FROM stack_counts");
  CHECK(hangs > 0 && samples > 0);
  CHECK_EQ_INT(db_count(db, "SELECT sum(events) FROM rollup_groups WHERE kind = 'hang'"), hangs);
  CHECK_EQ_INT(db_count(db, "SELECT sum(events) FROM rollup_groups_day WHERE kind = 'hang'"),
               hangs);
  CHECK_EQ_INT(db_count(db, "SELECT sum(samples) FROM rollup_stacks"), samples);
  CHECK_EQ_INT(db_count(db, "SELECT sum(samples) FROM rollup_stacks_day"), samples);
}

static void case_two_collectors(void) {
  collector_t a, b;
  collector_start(&a, (const char *[]){"--rate-limit", "0", NULL});
  collector_start(&b, (const char *[]){"--rate-limit", "0", NULL}); /* the same database */
  CHECK(strcmp(a.db, b.db) == 0);
  pid_t a_pid = a.pid;
  atomic_int acked_total = 0;
  poster_t *p = calloc(2, sizeof *p);
  CHECK(p != NULL);
  pthread_t threads[2];
  for (unsigned i = 0; i < 2; i++) {
    p[i] = (poster_t){.a = &a, .b = &b, .first = 1 + i, .acked_total = &acked_total};
    CHECK(pthread_create(&threads[i], NULL, post_all, &p[i]) == 0);
  }
  double end = now_s() + 60;
  while (atomic_load(&acked_total) < KILL_AT && now_s() < end)
    usleep(1000);
  CHECK(atomic_load(&acked_total) >= KILL_AT);
  CHECK(kill(a_pid, SIGKILL) == 0);
  CHECK_EQ_INT(spawn_wait(a_pid, 30), 128 + SIGKILL);
  for (unsigned i = 0; i < 2; i++)
    CHECK(pthread_join(threads[i], NULL) == 0);
  CHECKF(atomic_load(&acked_total) < BATCHES + 1, "every batch counted once");
  g_running = b.pid;
  collector_stop_healthy(&b);
  int both = p[0].both + p[1].both, twice = 0;
  for (unsigned seed = 1; seed <= BATCHES; seed++) {
    const poster_t *q = &p[(seed - 1) % 2];
    CHECKF(q->acked[seed] >= 1, "batch %u not acknowledged", seed);
    twice += q->acked[seed] == 2;
    CHECKF(count_seed(a.db, "SELECT count(*) FROM batches WHERE id = '\\x%s'", seed) == 1,
           "batch %u: acknowledged, not stored once", seed);
    CHECKF(count_seed(a.db,
                      "SELECT count(*) FROM events e WHERE e.batch_id = '\\x%s'"
                      " AND e.kind = 'hang'",
                      seed) == 2,
           "batch %u: its 2 hangs not stored once", seed);
  }
  CHECK_EQ_INT(db_count(a.db, "SELECT count(*) FROM batches WHERE app = 'multi'"), BATCHES);
  CHECK_EQ_INT(db_count(a.db, "SELECT count(*) FROM loop_stats"), BATCHES);
  CHECK(both >= 1);
  /* Both folded every second while taking batches, A's last rows folded
     by B (its last fold when stopped): every sample counted once. */
  check_folded(a.db);
  fprintf(stderr,
          "%d batches over 2 collectors, %d posted to both at once (%d got two 200s),"
          " A killed after %d\n",
          BATCHES, both, twice, KILL_AT);
  free(p);
}

/* The retention job takes its advisory lock with pg_try_advisory_xact_lock
   (collector/store/pg/pg_store.h PG_LOCK_RETENTION): while another instance (here
   the test) holds it, nothing is deleted; once released, the old batch
   goes. */
static void case_retention_lock(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(post_to(&c, 1, r), 200);
  CHECK_EQ_INT(post_to(&c, 2, r), 200);
  collector_stop_healthy(&c);
  free(r);
  db_exec(
      c.db,
      "UPDATE batches SET received_ns = 1 WHERE id = (SELECT id FROM batches ORDER BY id LIMIT 1)");
  PGconn *holder = PQconnectdb(c.db);
  CHECK(PQstatus(holder) == CONNECTION_OK);
  PGresult *res = PQexec(holder, "SELECT pg_advisory_lock(x'70657266002'::bigint)");
  CHECK(PQresultStatus(res) == PGRES_TUPLES_OK);
  PQclear(res);
  collector_restart(&c,
                    (const char *[]){"--retention-days", "1", "--retention-interval", "1", NULL});
  /* Three runs of the job (one a second) while the lock is held. */
  double until = now_s() + 3.5;
  while (now_s() < until) {
    CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 2);
    usleep(200000);
  }
  res = PQexec(holder, "SELECT pg_advisory_unlock(x'70657266002'::bigint)");
  CHECK(PQresultStatus(res) == PGRES_TUPLES_OK);
  PQclear(res);
  PQfinish(holder);
  double end = now_s() + 30;
  while (db_count(c.db, "SELECT count(*) FROM batches") != 1 && now_s() < end)
    usleep(50000);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 1);
  collector_stop_healthy(&c);
}

/* perf-collector on db (port from free_port, no rate limit) with its
   stderr to log. */
static pid_t spawn_on(const char *db, const char *log, char *listen, size_t listen_len) {
  snprintf(listen, listen_len, "127.0.0.1:%u", (unsigned)free_port());
  char *argv[] = {PERF_COLLECTOR_PATH, "--listen",     listen,         "--db", (char *)db,
                  "--symbols-dir",     "/nonexistent", "--rate-limit", "0",    NULL};
  return spawn(argv, log);
}

static bool file_has(const char *path, const char *text) {
  char buf[8192] = "";
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return strstr(buf, text) != NULL;
}

/* Two collectors started at once on an empty database: both serve, the
   schema is at version 1 once (schema_version has one row). Then a
   database a newer collector migrated (version 999): refused at start,
   exit 1, the reason said. */
/* A database at schema version 1 made from one at the current version:
   the rollups and partitions taken away, the raw tables plain again
   (with their indexes' names of version 1) and stack_counts without
   cpu_us. */
#define PLAIN(t, cols, seq)                                                                        \
  "CREATE TABLE " t "_v1 AS SELECT " cols " FROM " t ";"                                           \
  "ALTER SEQUENCE " seq " OWNED BY NONE; DROP TABLE " t "; ALTER TABLE " t "_v1 RENAME TO " t ";"  \
  "ALTER TABLE " t " ADD PRIMARY KEY (id); ALTER TABLE " t " ALTER COLUMN id SET DEFAULT"          \
  " nextval('" seq "'); ALTER SEQUENCE " seq " OWNED BY " t ".id;"
static const char VERSION_1[] =
    "DROP TABLE alerts; DROP TABLE alert_rules;"
    "DROP TABLE loop_stats_by_loop; DROP TABLE rollup_groups_delta; DROP TABLE rollup_stacks_delta;"
    "DROP SEQUENCE wal_flush_mark; DROP TABLE stack_epoch; DROP TABLE rollup_groups;"
    "DROP TABLE rollup_stacks; DROP TABLE rollup_groups_day;"
    "DROP TABLE rollup_stacks_day; DROP FUNCTION perf_dbin;" PLAIN(
        "events",
        "id, batch_id, kind, start_ns, duration_ns, tid, cpu_percent, reason,"
        " dominant_stack_sig, group_sig, label",
        "events_id_seq") PLAIN("stack_counts", "id, event_id, stack_sig, tid, samples",
                               "stack_counts_id_seq")
        PLAIN("event_states", "id, event_id, tid, state, syscall, fd, samples",
              "event_states_id_seq") "DROP FUNCTION perf_day_partitions;"
                                     "CREATE INDEX events_batch ON events(batch_id);"
                                     "CREATE INDEX events_group ON events(group_sig);"
                                     "CREATE INDEX events_start ON events(start_ns);"
                                     "CREATE INDEX stack_counts_event ON stack_counts(event_id);"
                                     "CREATE INDEX stack_counts_sig ON stack_counts(stack_sig);"
                                     "CREATE INDEX event_states_event ON event_states(event_id);"
                                     "UPDATE schema_version SET version = 1";

static void case_schema(void) {
  collector_t c;
  collector_start(&c, NULL);
  collector_stop_healthy(&c);
  db_exec(c.db, "SET client_min_messages = warning; DROP SCHEMA public CASCADE;"
                "CREATE SCHEMA public");
  char logs[2][160], listens[2][32];
  collector_t two[2];
  for (int i = 0; i < 2; i++) {
    snprintf(logs[i], sizeof logs[i], "%s/start%d.log", c.dir, i);
    two[i] = c;
    two[i].pid = spawn_on(c.db, logs[i], listens[i], sizeof listens[i]);
    snprintf(two[i].url, sizeof two[i].url, "http://%s", listens[i]);
  }
  for (int i = 0; i < 2; i++) {
    g_running = two[i].pid;
    CHECKF(healthy_within(&two[i], 30), "collector %d did not start:\n%s", i, read_text(logs[i]));
  }
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM schema_version"), 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT max(version) FROM schema_version"), 11);
  CHECK(file_has(logs[0], "migrated to version 11") + file_has(logs[1], "migrated to version 11") ==
        1);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(post_to(&two[0], 1, r), 200);
  for (int i = 0; i < 2; i++)
    collector_stop_healthy(&two[i]);

  /* From the previous versions: a database at version 1 (plain tables,
     stack_counts without cpu_us, no rollups), made from this one, is
     migrated to 11 at start: its rows kept, moved into their days'
     partitions and rolled up. */
  long long events = db_count(c.db, "SELECT count(*) FROM events");
  long long counts = db_count(c.db, "SELECT count(*) FROM stack_counts");
  db_exec(c.db, VERSION_1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM pg_class WHERE relname = 'events_default'"), 0);
  collector_restart(&c, NULL);
  CHECK_EQ_INT(db_count(c.db, "SELECT max(version) FROM schema_version"), 11);
  CHECK_EQ_INT(db_count(c.db, "SELECT epoch FROM stack_epoch"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events"), events);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stack_counts"), counts);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events_default"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stack_counts_default"), 0);
  CHECK(db_count(c.db, "SELECT count(*) FROM events e JOIN batches b ON b.id = e.batch_id"
                       " WHERE e.received_ns = b.received_ns") == events);
  CHECK(db_count(c.db, "SELECT count(*) FROM events WHERE kind = 'hang'") >= 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT sum(events) FROM rollup_groups WHERE kind = 'hang'"),
               db_count(c.db, "SELECT count(*) FROM events WHERE kind = 'hang'"
                              " AND group_sig IS NOT NULL"));
  CHECK_EQ_INT(db_count(c.db, "SELECT sum(samples) FROM rollup_stacks"),
               db_count(c.db, "SELECT sum(samples) FROM stack_counts"));
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stack_counts WHERE cpu_us IS NULL"),
               db_count(c.db, "SELECT count(*) FROM stack_counts"));
  CHECK(db_count(c.db, "SELECT count(*) FROM stack_counts") >= 2);
  CHECK_EQ_INT(post_to(&c, 2, r), 200);
  long status = 0;
  json_t *top = get_json(&c, "/api/v1/top-stacks?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(top, "stacks")), 2); /* both batches' groups */
  json_decref(top);
  collector_stop_healthy(&c);

  /* From version 5 (no delta tables: its collectors upserted the rollup
     tables at each batch): migrated to 11, the rollups' sums kept (version
     8 builds them again); a batch then rolls up into the delta rows, which
     the reads add. */
  db_exec(c.db, "DROP TABLE rollup_groups_delta; DROP TABLE rollup_stacks_delta;"
                "DROP SEQUENCE wal_flush_mark; UPDATE schema_version SET version = 5");
  collector_restart(&c, (const char *[]){"--rollup-fold-interval", "3600", NULL});
  CHECK_EQ_INT(db_count(c.db, "SELECT max(version) FROM schema_version"), 11);
  CHECK_EQ_INT(rolled_sum(c.db, "rollup_stacks", "samples", "true"),
               db_count(c.db, "SELECT sum(samples) FROM stack_counts"));
  CHECK_EQ_INT(post_to(&c, 3, r), 200);
  CHECK(db_count(c.db, "SELECT count(*) FROM rollup_stacks_delta") > 0);
  CHECK_EQ_INT(rolled_sum(c.db, "rollup_stacks_day", "samples", "true"),
               db_count(c.db, "SELECT sum(samples) FROM stack_counts"));
  top = get_json(&c, "/api/v1/top-stacks?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(top, "stacks")),
               db_count(c.db, "SELECT count(DISTINCT group_sig) FROM events WHERE kind = 'hang'"));
  json_decref(top);
  collector_stop_healthy(&c);

  /* From version 6 (no wal_flush_mark, whose setval makes a batch durable
     under --durability full): migrated to 11; a batch is stored and a
     duplicate of it acknowledged, each marked. */
  db_exec(c.db, "DROP SEQUENCE wal_flush_mark; UPDATE schema_version SET version = 6");
  long long batches = db_count(c.db, "SELECT count(*) FROM batches");
  collector_restart(&c, NULL);
  CHECK_EQ_INT(db_count(c.db, "SELECT max(version) FROM schema_version"), 11);
  CHECK_EQ_INT(post_to(&c, 4, r), 200);
  CHECK_EQ_INT(post_to(&c, 4, r), 200);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), batches + 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT last_value FROM wal_flush_mark"), 1);
  CHECK(db_count(c.db, "SELECT count(*) FROM wal_flush_mark WHERE is_called") == 1);
  collector_stop_healthy(&c);

  /* From version 8 (events without their loop): migrated to 11, the events
     stored before of no known loop (NULL, not "main": loop=main finds
     none of them), a batch's hangs then of loop "main" (its SDK named
     none). */
  db_exec(c.db, "ALTER TABLE events DROP COLUMN loop_name; UPDATE schema_version SET version = 8");
  events = db_count(c.db, "SELECT count(*) FROM events");
  CHECK(events >= 1);
  collector_restart(&c, NULL);
  CHECK_EQ_INT(db_count(c.db, "SELECT max(version) FROM schema_version"), 11);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events WHERE loop_name IS NULL"), events);
  json_t *mains = get_json(&c, "/api/v1/events?loop=main", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(mains, "events")), 0);
  json_decref(mains);
#define HANGS_SQL "SELECT count(*) FROM events WHERE kind IN ('hang', 'fatal_hang')"
  long long old_hangs = db_count(c.db, HANGS_SQL);
  CHECK_EQ_INT(post_to(&c, 5, r), 200);
  CHECK_EQ_INT(db_count(c.db, HANGS_SQL " AND loop_name = 'main'"),
               db_count(c.db, HANGS_SQL) - old_hangs);
  CHECK(db_count(c.db, "SELECT count(*) FROM events WHERE loop_name = 'main'") >= 1);
  collector_stop_healthy(&c);

  /* From version 9 (no loop_stats_by_loop): migrated to 11, the table
     made empty (the batches stored before named no loop). */
  db_exec(c.db, "DROP TABLE loop_stats_by_loop; UPDATE schema_version SET version = 9");
  collector_restart(&c, NULL);
  CHECK_EQ_INT(db_count(c.db, "SELECT max(version) FROM schema_version"), 11);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM loop_stats_by_loop"), 0);
  CHECK_EQ_INT(post_to(&c, 6, r), 200);
  collector_stop_healthy(&c);

  /* From version 10 (no alert tables): migrated to 11, the tables made
     empty; batches stored as before. */
  db_exec(c.db,
          "DROP TABLE alerts; DROP TABLE alert_rules; UPDATE schema_version SET version = 10");
  collector_restart(&c, NULL);
  CHECK_EQ_INT(db_count(c.db, "SELECT max(version) FROM schema_version"), 11);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM alerts"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM alert_rules"), 0);
  CHECK_EQ_INT(post_to(&c, 7, r), 200);
  free(r);
  collector_stop_healthy(&c);

  db_exec(c.db, "UPDATE schema_version SET version = 999");
  char listen[32];
  pid_t pid = spawn_on(c.db, logs[0], listen, sizeof listen);
  CHECK_EQ_INT(spawn_wait(pid, 30), 1);
  CHECKF(file_has(logs[0], "schema version 999 is newer than this collector's (11)"), "see %s",
         logs[0]);
}

/* The collector's connection cut (pg_terminate_backend: a server restart
   or a proxy as the collector sees it): the next batch is stored on a new
   connection (200), and so is the one after; reads work too. */
static void case_connection_lost(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(post_to(&c, 1, r), 200);
  for (unsigned seed = 2; seed <= 3; seed++) {
    CHECK(db_count(c.db, "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM"
                         " pg_stat_activity WHERE datname = current_database()"
                         " AND pid <> pg_backend_pid()) AS t") >= 1);
    CHECKF(post_to(&c, seed, r) == 200, "batch %u after the cut: %.200s", seed, r->body);
  }
  long status = 0;
  json_t *top = get_json(&c, "/api/v1/top-stacks?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  json_decref(top);
  free(r);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 3);
}

#define NOW_NS "(extract(epoch FROM clock_timestamp()) * 1e9)::bigint"
#define HOUR_NS "3600000000000"
#define DAY_NS "86400000000000"

/* A stored stack's or group's last_seen moves only when a batch that
   sends its row is over 30 minutes later (store_pg.h PG_LAST_SEEN_MOVE: a
   batch locks no stored row), and a collector does not send the rows it
   saw stored for 30 minutes after it sent them (STORE_KNOWN_FOR), unless
   stack_epoch changed (what a re-symbolization does when it deletes
   rows); retention deletes a stack or group only when its last_seen is
   more than an hour before the cutoff, so one a kept batch still uses
   stays. */
#define BACK(minutes)                                                                              \
  "UPDATE stacks SET last_seen = last_seen - " #minutes " * 60000000000;"                          \
  "UPDATE groups SET last_seen = last_seen - " #minutes " * 60000000000"
#define AT_LAST_BATCH(table)                                                                       \
  "SELECT count(*) FROM " table " WHERE last_seen = (SELECT max(received_ns) FROM batches)"
#define WITHIN_MOVE(table)                                                                         \
  "SELECT count(*) FROM " table " WHERE last_seen >= (SELECT max(received_ns) FROM batches)"       \
  " - 1800000000000"
static void case_last_seen_step(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(post_to(&c, 1, r), 200);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stacks"), 2);
  long long groups = db_count(c.db, "SELECT count(*) FROM groups");
  CHECK(groups >= 2);
  /* 40 minutes behind, but this collector sent them 30 minutes ago at
     most: the next batch leaves them out, last_seen stays. */
  db_exec(c.db, BACK(40));
  long long trailing = db_count(c.db, "SELECT max(last_seen) FROM stacks");
  CHECK_EQ_INT(post_to(&c, 2, r), 200);
  CHECK_EQ_INT(db_count(c.db, "SELECT max(last_seen) FROM stacks"), trailing);
  /* A collector that knows none of them sends them: 40 minutes behind,
     moved to its batch's arrival (the groups of its hangs were moved by
     their picks at batch 2 already: each pick writes its group). */
  collector_stop_healthy(&c);
  collector_restart(&c, NULL);
  CHECK_EQ_INT(post_to(&c, 3, r), 200);
  CHECK_EQ_INT(db_count(c.db, AT_LAST_BATCH("stacks")), 2);
  CHECK_EQ_INT(db_count(c.db, WITHIN_MOVE("groups")), groups);
  /* 20 minutes behind: sent by a new collector again, but not moved. */
  db_exec(c.db, BACK(20));
  collector_stop_healthy(&c);
  collector_restart(&c, NULL);
  trailing = db_count(c.db, "SELECT max(last_seen) FROM stacks");
  CHECK_EQ_INT(post_to(&c, 4, r), 200);
  CHECK_EQ_INT(db_count(c.db, "SELECT max(last_seen) FROM stacks"), trailing);
  /* The rows deleted and stack_epoch bumped, as a re-symbolization does:
     the same collector sends them again. */
  db_exec(c.db, "DELETE FROM stacks; DELETE FROM groups;"
                "UPDATE stack_epoch SET epoch = epoch + 1");
  CHECK_EQ_INT(post_to(&c, 5, r), 200);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stacks"), 2);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM groups"), groups);
  CHECK_EQ_INT(db_count(c.db, AT_LAST_BATCH("stacks")), 2);
  collector_stop_healthy(&c);
  /* Retention a day back: batches 1 to 4 long gone, batch 5 ten minutes
     inside the day, its stacks and groups last seen 30 minutes before the
     cutoff (40 behind batch 5: within the step), and a stack nothing uses
     last seen 2 hours before the cutoff. */
  db_exec(c.db, "UPDATE batches SET received_ns = 1 WHERE received_ns < (SELECT max(received_ns)"
                " FROM batches);"
                "UPDATE batches SET received_ns = " NOW_NS " - " DAY_NS " + 600000000000"
                " WHERE received_ns > 1;"
                "UPDATE stacks SET last_seen = " NOW_NS " - " DAY_NS " - 1800000000000;"
                "UPDATE groups SET last_seen = " NOW_NS " - " DAY_NS " - 1800000000000;"
                "INSERT INTO stacks(signature, frames, first_seen, last_seen)"
                " VALUES('unused', '[]', 1, " NOW_NS " - " DAY_NS " - 2 * " HOUR_NS ")");
  collector_restart(&c,
                    (const char *[]){"--retention-days", "1", "--retention-interval", "1", NULL});
  double end = now_s() + 30;
  while (db_count(c.db, "SELECT count(*) FROM batches") != 1 && now_s() < end)
    usleep(50000);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 1);
  end = now_s() + 30;
  while (db_count(c.db, "SELECT count(*) FROM stacks WHERE signature = 'unused'") != 0 &&
         now_s() < end)
    usleep(50000);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stacks WHERE signature = 'unused'"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stacks"), 2);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM groups"), groups);
  CHECK_EQ_INT(
      db_count(c.db, "SELECT count(*) FROM stack_counts c"
                     " WHERE NOT EXISTS (SELECT 1 FROM stacks s WHERE s.signature = c.stack_sig)"),
      0);
  free(r);
  collector_stop_healthy(&c);
}

/* Batches whose statements fill the pipeline's queue (PG_MAX_PENDING,
   64) before a read: `cpus` cpu events (one queued insert each), then two
   hangs (their picks read), each the first batch of a new collector, so
   the picks' statements are prepared in the pipeline too. Over 56 to 71
   cpu events the queue is full at every point of the first pick: each
   batch stored whole, every event and sample. */
static void post_long(int cpus) {
  collector_t c;
  collector_start(&c, NULL);
  char *strings[] = {"", "leaf", "work", "main"};
  uint32_t frames[2][2] = {{1, 3}, {2, 3}};
  Perf__V1__Stack st[2], *sts[2];
  for (int i = 0; i < 2; i++) {
    perf__v1__stack__init(&st[i]);
    st[i].n_frames = 2, st[i].frames = frames[i];
    sts[i] = &st[i];
  }
  int n = cpus + 2;
  Perf__V1__Event ev[80], *evs[80];
  Perf__V1__StackCount sc[80], *scs[80];
  CHECK(n <= 80);
  int64_t now_ns = (int64_t)(now_s() * 1e9);
  for (int i = 0; i < n; i++) {
    perf__v1__event__init(&ev[i]);
    ev[i].kind =
        i < cpus ? PERF__V1__EVENT_KIND__EVENT_KIND_CPU : PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
    ev[i].start_unix_nanos = now_ns - 1000000000 + i * 1000000;
    ev[i].duration_nanos = 500000000;
    ev[i].tid = 7;
    perf__v1__stack_count__init(&sc[i]);
    sc[i].stack = 1 + (uint32_t)(i % 2);
    sc[i].samples = 3;
    sc[i].tid = 7;
    scs[i] = &sc[i];
    ev[i].n_stack_counts = 1, ev[i].stack_counts = &scs[i], ev[i].dominant_stack = sc[i].stack;
    evs[i] = &ev[i];
  }
  char app[32];
  snprintf(app, sizeof app, "long%d", cpus);
  Perf__V1__Resource res;
  Perf__V1__Batch batch;
  batch_begin(&batch, &res, app, NULL, NULL, NULL);
  batch_frames_t f;
  batch_set_frames(&batch, &f, strings, ARRAY_LEN(strings));
  batch.n_stacks = 2, batch.stacks = sts;
  batch.n_events = (size_t)n, batch.events = evs;
  batch_post(&c, &batch, (unsigned)cpus);
  char sql[256];
#define OF_BATCH " FROM events e JOIN batches b ON b.id = e.batch_id AND b.app = '%s'"
  snprintf(sql, sizeof sql, "SELECT count(*)" OF_BATCH, app);
  CHECK_EQ_INT(db_count(c.db, sql), n);
  snprintf(sql, sizeof sql, "SELECT count(*)" OF_BATCH " WHERE e.kind = 'hang'", app);
  CHECK_EQ_INT(db_count(c.db, sql), 2);
  snprintf(sql, sizeof sql,
           "SELECT sum(c.samples)" OF_BATCH " JOIN stack_counts c ON c.event_id = e.id", app);
  CHECK_EQ_INT(db_count(c.db, sql), 3 * n);
  snprintf(sql, sizeof sql, "app = '%s'", app);
  CHECK_EQ_INT(rolled_sum(c.db, "rollup_stacks", "samples", sql), 3 * n);
  collector_stop_healthy(&c);
}

static void case_long_pipeline(void) {
  for (int cpus = 56; cpus <= 71; cpus++)
    post_long(cpus);
}

/* A statement failing in the middle of a batch's pipelined transaction
   (its rollup table renamed away before the collector's first batch, so
   the statement's prepare is what fails): the batch is refused with 503
   and none of it stays (the statements queued before the failure rolled
   back), the log names the failing statement and what the server said;
   with the table back, the statement is prepared again and the next batch
   and the refused one are stored on the same session. */
static void case_pipeline_failure(void) {
  char log[160], listen[32];
  collector_t c;
  collector_start(&c, NULL);
  collector_stop_healthy(&c);
  snprintf(log, sizeof log, "%s/pipeline.log", c.dir);
  c.pid = spawn_on(c.db, log, listen, sizeof listen);
  snprintf(c.url, sizeof c.url, "http://%s", listen);
  g_running = c.pid;
  CHECK(healthy_within(&c, 30));
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  db_exec(c.db, "ALTER TABLE rollup_stacks_delta RENAME TO rollup_stacks_delta_away");
  CHECKF(post_to(&c, 2, r) == 503, "a batch whose rollups cannot be written: %.200s", r->body);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stacks"), 0);
  CHECKF(file_has(log, "postgresql rollups: ERROR:") && file_has(log, "rollup_stacks_delta"),
         "see %s", log);
  db_exec(c.db, "ALTER TABLE rollup_stacks_delta_away RENAME TO rollup_stacks_delta");
  CHECK_EQ_INT(post_to(&c, 3, r), 200);
  CHECK_EQ_INT(post_to(&c, 2, r), 200);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 2);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events e JOIN batches b ON b.id = e.batch_id"),
               db_count(c.db, "SELECT count(*) FROM events"));
  free(r);
  collector_stop_healthy(&c);
}

/* GET /healthz asks the database: with the collector's database refusing
   connections (ALLOW_CONNECTIONS false) and its sessions ended, 503 naming
   what the server said, within the check's 2 s; a batch is refused with
   503 too (the SDK keeps it); once the database accepts again, 200 and the
   next batch is stored. */
static void case_health_database(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get(&c, "/healthz", r), 200);
  char admin[256], sql[256];
  snprintf(admin, sizeof admin, "postgresql:///postgres?host=%s&user=perf",
           getenv("PERF_TEST_PG_DIR"));
  const char *name = c.db + strlen("postgresql:///"); /* collector_rig.c: the database name */
  int name_len = (int)strcspn(name, "?");
  snprintf(sql, sizeof sql, "ALTER DATABASE %.*s ALLOW_CONNECTIONS false", name_len, name);
  db_exec(admin, sql);
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
           " WHERE datname = '%.*s') AS t",
           name_len, name);
  CHECK(db_count(admin, sql) >= 1);
  /* The sessions end when their backends see the signal: poll. */
  double deadline = now_s() + 20;
  long status;
  while ((status = get(&c, "/healthz", r)) == 200 && now_s() < deadline)
    usleep(20000);
  CHECK_EQ_INT(status, 503);
  CHECKF(strstr(r->body, "database: connect:") && strstr(r->body, "not currently accepting"),
         "healthz: %.300s", r->body);
  CHECKF(post_to(&c, 1, r) == 503, "a batch while the database refuses: %.200s", r->body);
  snprintf(sql, sizeof sql, "ALTER DATABASE %.*s ALLOW_CONNECTIONS true", name_len, name);
  db_exec(admin, sql);
  CHECK_EQ_INT(get(&c, "/healthz", r), 200);
  CHECKF(post_to(&c, 2, r) == 200, "a batch once the database is back: %.200s", r->body);
  free(r);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 1);
}

/* Day partitions: a batch's day (and the next) gets its partitions before
   it is stored, nothing lands in the default ones; retention drops a
   whole day's partitions (here a day of 1970 the rows were moved into)
   and leaves the rollups equal to the rows that remain. */
#define OLD_DAY "100"
#define OLD_NS "(100 * 86400000000000 + 5)"
static void case_partitions(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--rate-limit", "0", NULL});
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  for (unsigned seed = 1; seed <= 12; seed++)
    CHECK_EQ_INT(post_to(&c, seed, r), 200);
  collector_stop_healthy(&c);
  long long events = db_count(c.db, "SELECT count(*) FROM events");
  CHECK(events > 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events_default"), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stack_counts_default"), 0);
  /* the batches' day's partitions and the next day's, made ahead */
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM pg_class WHERE relname IN (SELECT t || '_d' ||"
                              " (max(received_ns) / 86400000000000 + 1)::text FROM batches,"
                              " unnest(ARRAY['events', 'stack_counts', 'event_states']) AS t"
                              " GROUP BY t)"),
               3);
  /* A third of the batches moved into a day of 1970, rows and all. */
  db_exec(c.db,
          "SELECT perf_day_partitions(" OLD_DAY ");"
          "CREATE TEMP TABLE IF NOT EXISTS old AS SELECT id FROM batches"
          " WHERE get_byte(id, 0) % 3 = 0;"
          "UPDATE batches SET received_ns = " OLD_NS " WHERE id IN (SELECT id FROM old);"
          "UPDATE stack_counts SET received_ns = " OLD_NS " WHERE event_id IN"
          " (SELECT e.id FROM events e WHERE e.batch_id IN (SELECT id FROM old));"
          "UPDATE event_states SET received_ns = " OLD_NS " WHERE event_id IN"
          " (SELECT e.id FROM events e WHERE e.batch_id IN (SELECT id FROM old));"
          "UPDATE events SET received_ns = " OLD_NS " WHERE batch_id IN (SELECT id FROM old);");
  long long old_events = db_count(c.db, "SELECT count(*) FROM events_d" OLD_DAY);
  long long old_batches =
      db_count(c.db, "SELECT count(*) FROM batches WHERE received_ns = " OLD_NS);
  CHECK(old_events > 0 && old_events < events && old_batches > 0);
  CHECK(db_count(c.db, "SELECT count(*) FROM stack_counts_d" OLD_DAY) > 0);
  collector_start(&c, (const char *[]){"--retention-days", "1", "--retention-interval", "1", NULL});
  double end = now_s() + 30;
  while (db_count(c.db, "SELECT count(*) FROM pg_class WHERE relname = 'events_d" OLD_DAY "'") &&
         now_s() < end)
    usleep(100000);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM pg_class WHERE relname IN ('events_d" OLD_DAY
                              "', 'stack_counts_d" OLD_DAY "', 'event_states_d" OLD_DAY "')"),
               0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events"), events - old_events);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches WHERE received_ns = " OLD_NS), 0);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stack_counts c WHERE NOT EXISTS"
                              " (SELECT 1 FROM events e WHERE e.id = c.event_id)"),
               0);
  CHECK_EQ_INT(db_count(c.db, "SELECT coalesce(sum(events), 0) FROM rollup_groups"
                              " WHERE kind = 'hang'"),
               db_count(c.db, "SELECT count(*) FROM events WHERE kind = 'hang'"
                              " AND group_sig IS NOT NULL"));
  CHECK_EQ_INT(db_count(c.db, "SELECT coalesce(sum(samples), 0) FROM rollup_stacks"),
               db_count(c.db, "SELECT coalesce(sum(samples), 0) FROM stack_counts"));
  free(r);
}

/* The fold (collector/store/pg/pg_fold.c): a collector killed (SIGKILL)
   before folding its batches' rollup rows leaves them in the delta
   tables, and the reads count them; another collector folds them, but not
   while PG_LOCK_FOLD is held elsewhere (here by the test: it tries the
   lock and skips the round); once the lock is free, within its next
   rounds, into its own shard. */
static void case_fold(void) {
  collector_t a, b;
  collector_start(&a, (const char *[]){"--rollup-fold-interval", "3600", NULL});
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  for (unsigned seed = 1; seed <= 6; seed++)
    CHECK_EQ_INT(post_to(&a, seed, r), 200);
  CHECK(kill(a.pid, SIGKILL) == 0);
  CHECK_EQ_INT(spawn_wait(a.pid, 30), 128 + SIGKILL);
  long long samples = db_count(a.db, "SELECT sum(samples) FROM stack_counts");
  CHECK_EQ_INT(db_count(a.db, "SELECT count(*) FROM rollup_stacks"), 0);
  CHECK_EQ_INT(rolled_sum(a.db, "rollup_stacks", "samples", "true"), samples);
  PGconn *holder = PQconnectdb(a.db);
  CHECK(PQstatus(holder) == CONNECTION_OK);
  PGresult *res = PQexec(holder, "SELECT pg_advisory_lock(x'70657266005'::bigint)");
  CHECK(PQresultStatus(res) == PGRES_TUPLES_OK);
  PQclear(res);
  collector_start(&b, (const char *[]){"--rollup-fold-interval", "1", NULL});
  CHECK(strcmp(a.db, b.db) == 0);
  double until = now_s() + 2.5; /* two rounds of b's */
  while (now_s() < until) {
    CHECK_EQ_INT(db_count(b.db, "SELECT count(*) FROM rollup_stacks"), 0);
    usleep(200000);
  }
  long status = 0;
  json_t *flame = get_json(&b, "/api/v1/flame?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  json_t *root_value = json_object_get(flame, "samples");
  CHECK(root_value != NULL);
  long long flame_hang = json_integer_value(root_value);
  json_decref(flame);
  CHECK_EQ_INT(flame_hang, rolled_sum(b.db, "rollup_stacks", "samples", "kind = 'hang'"));
  res = PQexec(holder, "SELECT pg_advisory_unlock(x'70657266005'::bigint)");
  CHECK(PQresultStatus(res) == PGRES_TUPLES_OK);
  PQclear(res);
  PQfinish(holder);
  double end = now_s() + 30;
  while (db_count(b.db, "SELECT count(*) FROM rollup_stacks_delta") && now_s() < end)
    usleep(50000);
  check_folded(b.db);
  CHECK_EQ_INT(db_count(b.db, "SELECT count(DISTINCT shard) FROM rollup_stacks"), 1);
  flame = get_json(&b, "/api/v1/flame?kind=hang", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_integer_value(json_object_get(flame, "samples")), flame_hang);
  json_decref(flame);
  free(r);
  collector_stop_healthy(&b);
}

/* ---- picks_like_sqlite: the same hangs, the same groups ------------------ */

#define PICK_BATCHES 40
#define PICK_HANGS 4
#define PICK_STACKS 16
#define PICK_DEPTH 7

static uint64_t g_pick_rng = 0x2545f4914f6cdd1dULL;

static uint32_t pick_rnd(uint32_t n) {
  g_pick_rng ^= g_pick_rng << 13, g_pick_rng ^= g_pick_rng >> 7, g_pick_rng ^= g_pick_rng << 17;
  return (uint32_t)(g_pick_rng % n);
}

/* Batch b of PICK_HANGS hangs over 7 functions: each hang sampled in 2-4
   stacks rooted at f7, 2-7 frames deep, sharing a random part of a random
   first stack's root frames and parting from it into random others, with
   1-20 samples each: keys of every depth, turns off them, groups keyed by
   each other's prefixes. In every third batch the second hang is the
   first again: its group is one the batch's first pick wrote after the
   batch's first reads (PostgreSQL reads it again). The same bytes to both
   collectors. */
static void post_pick_batch(const collector_t *to[2], unsigned b, int64_t t0_ns) {
  char *strings[] = {"", "f1", "f2", "f3", "f4", "f5", "f6", "f7"};
  uint32_t frames[PICK_STACKS][PICK_DEPTH];
  Perf__V1__Stack st[PICK_STACKS], *sts[PICK_STACKS];
  Perf__V1__Event ev[PICK_HANGS], *evs[PICK_HANGS];
  Perf__V1__StackCount sc[PICK_HANGS][4], *scs[PICK_HANGS][4];
  size_t n_stacks = 0;
  for (int i = 0; i < PICK_HANGS; i++) {
    if (i == 1 && b % 3 == 0) {
      ev[1] = ev[0];
      ev[1].start_unix_nanos += 1000000;
      evs[1] = &ev[1];
      continue;
    }
    uint32_t root[PICK_DEPTH], depth = 2 + pick_rnd(PICK_DEPTH - 1), n = 2 + pick_rnd(3);
    root[0] = 7;
    for (uint32_t d = 1; d < depth; d++)
      root[d] = 1 + pick_rnd(6);
    perf__v1__event__init(&ev[i]);
    ev[i].kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
    ev[i].start_unix_nanos = t0_ns + ((int64_t)b * PICK_HANGS + i) * 1000000;
    ev[i].duration_nanos = 400000000;
    ev[i].tid = 7;
    for (uint32_t k = 0; k < n; k++) {
      uint32_t shared = k == 0 ? depth : 1 + pick_rnd(depth), len = shared + pick_rnd(3);
      if (len > PICK_DEPTH) len = PICK_DEPTH;
      uint32_t *f = frames[n_stacks]; /* innermost first */
      for (uint32_t d = 0; d < len; d++)
        f[len - 1 - d] = d < shared ? root[d] : 1 + pick_rnd(6);
      perf__v1__stack__init(&st[n_stacks]);
      st[n_stacks].n_frames = len, st[n_stacks].frames = f;
      sts[n_stacks] = &st[n_stacks];
      perf__v1__stack_count__init(&sc[i][k]);
      sc[i][k].stack = (uint32_t)++n_stacks;
      sc[i][k].samples = 1 + pick_rnd(20);
      sc[i][k].tid = 7;
      scs[i][k] = &sc[i][k];
    }
    ev[i].n_stack_counts = n, ev[i].stack_counts = scs[i], ev[i].dominant_stack = sc[i][0].stack;
    evs[i] = &ev[i];
  }
  Perf__V1__Resource res;
  Perf__V1__Batch batch;
  batch_begin(&batch, &res, "picks", NULL, NULL, NULL);
  batch_frames_t fr;
  batch_set_frames(&batch, &fr, strings, ARRAY_LEN(strings));
  batch.n_stacks = n_stacks, batch.stacks = sts;
  batch.n_events = PICK_HANGS, batch.events = evs;
  for (int i = 0; i < 2; i++)
    batch_post(to[i], &batch, b);
}

/* What the hang groups tables hold (groups with their paths, children
   with their samples, paths' samples), one line of text, in the SQL of
   db's store. */
static char *hang_group_tables(const char *db) {
  static const char *const pg[] = {
      "SELECT string_agg(signature || ' ' || path, ',' ORDER BY signature) FROM hang_groups",
      "SELECT string_agg(group_sig || ' ' || child || ' ' || samples, ','"
      " ORDER BY group_sig, child) FROM hang_group_children",
      "SELECT string_agg(group_sig || ' ' || upper(encode(samples, 'hex')), ','"
      " ORDER BY group_sig) FROM hang_group_path"};
  static const char *const lite[] = {
      "SELECT group_concat(signature || ' ' || path, ',') FROM"
      " (SELECT * FROM hang_groups ORDER BY signature)",
      "SELECT group_concat(group_sig || ' ' || child || ' ' || samples, ',') FROM"
      " (SELECT * FROM hang_group_children ORDER BY group_sig, child)",
      "SELECT group_concat(group_sig || ' ' || hex(samples), ',') FROM"
      " (SELECT * FROM hang_group_path ORDER BY group_sig)"};
  const char *const *sql = db_is_pg(db) ? pg : lite;
  char *parts[3], *all = NULL;
  for (int i = 0; i < 3; i++)
    CHECK((parts[i] = db_text(db, sql[i])) != NULL);
  CHECK(asprintf(&all, "groups %s | children %s | paths %s", parts[0], parts[1], parts[2]) > 0);
  for (int i = 0; i < 3; i++)
    free(parts[i]);
  return all;
}

/* The hangs' groups by start (ms), from the events API. */
static json_t *groups_by_start(const collector_t *c) {
  long status = 0;
  json_t *j = get_json(c, "/api/v1/events?kind=hang&app=picks&limit=1000", &status);
  CHECK_EQ_INT(status, 200);
  json_t *by = json_object(), *e;
  size_t i;
  json_array_foreach(json_object_get(j, "events"), i, e) {
    char key[32];
    snprintf(key, sizeof key, "%lld",
             (long long)json_integer_value(json_object_get(e, "start_ms")));
    json_object_set(by, key, json_object_get(e, "group"));
  }
  json_decref(j);
  return by;
}

/* The hang grouping of the PostgreSQL store (its candidate reads, the
   ranges read ahead with the key's prefixes, one statement for a pick's
   writes) against the SQLite store's on the same batches: every hang in
   the same group, and groups of several hangs among them. It checks the
   outcome only: a read ahead that served another range's rows went
   unnoticed here (tried), the walk over branch points finding the same
   groups later; hang_group_cands_turns and _every_branch_point check
   that the ranges read ahead are the walk's first ones. A batch's hangs
   share root frames, so a later hang's first read, made with the lock
   before any pick of the batch, often covers a group an earlier pick
   wrote: without reading it again, hangs land in other groups here
   (tried). */
static void case_picks_like_sqlite(void) {
  collector_t pg, lite;
  collector_start(&pg, (const char *[]){"--rate-limit", "0", NULL});
  char log[160], listen[32];
  lite = pg;
  snprintf(log, sizeof log, "%s/sqlite.log", pg.dir);
  snprintf(lite.db, sizeof lite.db, "%s/picks.db", pg.dir);
  lite.pid = spawn_on(lite.db, log, listen, sizeof listen);
  snprintf(lite.url, sizeof lite.url, "http://%s", listen);
  g_running = lite.pid;
  CHECKF(healthy_within(&lite, 30), "the SQLite collector did not start: see %s", log);
  const collector_t *to[2] = {&pg, &lite};
  int64_t t0_ns = (int64_t)(now_s() * 1e9) - 60 * 1000000000LL;
  for (unsigned b = 1; b <= PICK_BATCHES; b++)
    post_pick_batch(to, b, t0_ns);
  json_t *want = groups_by_start(&lite), *got = groups_by_start(&pg);
  CHECK_EQ_INT(json_object_size(want), PICK_BATCHES * PICK_HANGS);
  CHECK_EQ_INT(json_object_size(got), PICK_BATCHES * PICK_HANGS);
  const char *start;
  json_t *g;
  size_t differ = 0;
  json_object_foreach(want, start, g) {
    const char *pg_group = json_string_value(json_object_get(got, start));
    if (!pg_group || strcmp(pg_group, json_string_value(g)) != 0) differ++;
  }
  CHECKF(differ == 0, "%zu of %d hangs in another group on PostgreSQL", differ,
         PICK_BATCHES * PICK_HANGS);
  long long groups = db_count(pg.db, "SELECT count(DISTINCT group_sig) FROM events"
                                     " WHERE kind = 'hang'");
  fprintf(stderr, "%d hangs in %lld groups on both stores\n", PICK_BATCHES * PICK_HANGS, groups);
  CHECK(groups > 1 && groups < PICK_BATCHES * PICK_HANGS);
  /* Not only the same groups: the same children and paths' samples
     (a pick made from a stale first read can give the right group and
     write its path's samples without those an earlier pick added). */
  char *lite_tables = hang_group_tables(lite.db), *pg_tables = hang_group_tables(pg.db);
  CHECKF(strcmp(lite_tables, pg_tables) == 0,
         "hang group tables differ:\nSQLite     %s\nPostgreSQL %s", lite_tables, pg_tables);
  free(lite_tables);
  free(pg_tables);
  json_decref(want);
  json_decref(got);
  collector_stop_healthy(&lite);
  collector_stop_healthy(&pg);
}

static const test_case_t g_cases[] = {
    TEST_CASE(two_collectors),
    TEST_CASE(retention_lock),
    TEST_CASE(schema),
    TEST_CASE(connection_lost),
    TEST_CASE(health_database),
    TEST_CASE(partitions),
    TEST_CASE(pipeline_failure),
    TEST_CASE(last_seen_step),
    TEST_CASE(long_pipeline),
    TEST_CASE(fold),
    TEST_CASE(picks_like_sqlite),
};

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--list") != 0 && !rig_pg()) {
    fprintf(stderr, "%s: PostgreSQL only: run with PERF_TEST_DB=pg (ctest pg_...)\n", argv[0]);
    return 1;
  }
  return collector_test_main(argc, argv, g_cases, ARRAY_LEN(g_cases));
}
