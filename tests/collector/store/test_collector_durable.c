/*
 * test_collector_durable.c - what a 200 from perf-collector promises, with
 * the real collector as a child process:
 *  - kill -9 under load: every batch acknowledged with 200 before the kill
 *    is in the database, once, after a restart on the same file
 *    (--durability full, the default, and --durability process);
 *  - the database file deleted, replaced (another file renamed over it),
 *    or its write-ahead log deleted while the collector runs: /healthz
 *    answers 503 naming the path and what happened, a batch gets exactly
 *    503 with Retry-After and is stored nowhere (not even in the file the
 *    collector still has open), until a restart; the same batch sent again
 *    after it (the SDK's retry) is stored;
 *  - the real SDK (sink = http) through such a loss: its batch gets 503,
 *    stays in its spool, and is delivered once the collector is back;
 *  - PostgreSQL (server_crash): the server's processes killed with
 *    SIGKILL while the processes that write its WAL in the background were
 *    stopped: every batch acknowledged with 200 is there once the server
 *    recovered (the collector's own flush made it durable), and the
 *    collector stores the next one on a new connection.
 */
#include <dirent.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "perf/v1/perf.pb-c.h"
#include "perf_sdk.h"
#include "tempdir.h"

#define LOAD_THREADS 2
#define LOAD_BATCHES 400 /* per thread, at most */
#define KILL_AFTER 100   /* batches acknowledged (all threads) before the kill -9 */
#define LOAD_DEADLINE_S 90

/* A batch id: a tag of this run, the sending thread, its number. */
static void make_id(uint8_t id[16], unsigned thread, unsigned n) {
  uint32_t tag = (uint32_t)getpid();
  memset(id, 0xd5, 16);
  memcpy(id, &tag, sizeof tag);
  id[4] = (uint8_t)thread;
  id[5] = (uint8_t)(n >> 8);
  id[6] = (uint8_t)n;
}

/* A small batch of app `app`: one CPU event, one stack of two named
   frames, 5 samples. The status; the answer in *r. */
static long send_small(const collector_t *c, const char *app, const uint8_t id[16], reply_t *r) {
  Perf__V1__Resource res;
  Perf__V1__Batch b;
  batch_begin(&b, &res, app, NULL, NULL, NULL);
  char *strings[] = {"", "durable_leaf", "durable_root"};
  uint32_t frame_ids[] = {1, 2};
  Perf__V1__Stack st = PERF__V1__STACK__INIT, *sts[] = {&st};
  st.n_frames = 2, st.frames = frame_ids;
  st.end = PERF__V1__STACK_END__STACK_END_COMPLETE;
  Perf__V1__StackCount sc = PERF__V1__STACK_COUNT__INIT, *scs[] = {&sc};
  sc.stack = 1, sc.samples = 5, sc.tid = 7;
  Perf__V1__Event ev = PERF__V1__EVENT__INIT, *evs[] = {&ev};
  ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_CPU;
  ev.start_unix_nanos = 1700000000000000000LL + id[6];
  ev.duration_nanos = 1000000;
  ev.tid = 7;
  ev.n_stack_counts = 1, ev.stack_counts = scs;
  batch_frames_t frames;
  batch_set_frames(&b, &frames, strings, ARRAY_LEN(strings));
  b.n_stacks = 1, b.stacks = sts;
  b.n_events = 1, b.events = evs;
  return batch_send(c, &b, id, r);
}

/* Rows of `sql` (one ?1 blob parameter: id) in db. */
/* sql's count with ?1 the batch id id, as a literal of db's SQL. */
static long long count_by_id(const char *db, const char *sql, const uint8_t id[16]) {
  char hex[33], lit[48], q[512];
  for (int i = 0; i < 16; i++)
    snprintf(hex + 2 * i, 3, "%02x", id[i]);
  snprintf(lit, sizeof lit, rig_pg() ? "'\\x%s'::bytea" : "x'%s'", hex);
  const char *at = strstr(sql, "?1");
  CHECK(at != NULL);
  snprintf(q, sizeof q, "%.*s%s%s", (int)(at - sql), sql, lit, at + 2);
  return db_count(db, q);
}

static void check_integrity(const char *db) {
  if (rig_pg()) return; /* PostgreSQL: the server's own business */
  sqlite3 *h = NULL;
  sqlite3_stmt *s = NULL;
  CHECK(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
  CHECK(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &s, NULL) == SQLITE_OK);
  CHECK(sqlite3_step(s) == SQLITE_ROW);
  CHECKF(strcmp((const char *)sqlite3_column_text(s, 0), "ok") == 0, "integrity_check: %s",
         (const char *)sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  sqlite3_close(h);
}

/* SIGTERM and a clean exit (0), whatever /healthz says. */
static void stop_clean(collector_t *c) {
  CHECK(kill(c->pid, SIGTERM) == 0);
  CHECK_EQ_INT(spawn_wait(c->pid, 30), 0);
  g_running = 0;
}

/* ---- the database deleted or replaced ------------------------------------ */

/* The collector found path `path` `happened` (text of its answer): /healthz
   503 naming both, a batch exactly 503 with Retry-After naming them and
   not stored (the events API still reads the file the collector has
   open), the gauge and the reason counted; twice (the state stays). */
static void expect_lost(const collector_t *c, const char *path, const char *happened) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  uint8_t id[16];
  make_id(id, 9, 1);
  for (int round = 1; round <= 2; round++) {
    CHECK_EQ_INT(get(c, "/healthz", r), 503);
    CHECKF(strstr(r->body, path) && strstr(r->body, happened), "/healthz: %s", r->body);
    CHECK_EQ_INT(send_small(c, "after-loss", id, r), 503);
    CHECKF(strcmp(r->retry_after, "10") == 0, "Retry-After '%s'", r->retry_after);
    CHECKF(strstr(r->body, path) && strstr(r->body, happened), "POST: %s", r->body);
  }
  long status = 0;
  json_t *j = get_json(c, "/api/v1/events?app=after-loss", &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(j, "events")), 0);
  json_decref(j);
  CHECK_EQ_INT(get_key(c, GOOD_KEY, "/metrics", r), 200);
  CHECKF(strstr(r->body, "\nperf_collector_db_lost 1\n") != NULL, "%s", r->body);
  CHECKF(strstr(r->body, "perf_collector_batches_rejected_total{reason=\"db_lost\"} 2\n") != NULL,
         "%s", r->body);
  free(r);
}

/* One batch stored (200), then `damage` done to the files; expect_lost;
   a stop (SIGTERM, or kill -9 when kill9), a restart on the path, and the
   refused batch sent again is stored (200, once). before_kept: the first
   batch is still there after the restart (its file was not taken away). */
static void lost_then_restart(void (*damage)(const char *db), const char *path_suffix,
                              const char *happened, bool before_kept, bool kill9) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  uint8_t before[16], refused[16];
  make_id(before, 8, 1);
  make_id(refused, 9, 1);
  CHECK_EQ_INT(send_small(&c, "before-loss", before, r), 200);
  CHECK_EQ_INT(get(&c, "/healthz", r), 200);
  damage(c.db);
  char path[sizeof c.db + 8];
  snprintf(path, sizeof path, "%s%s", c.db, path_suffix);
  expect_lost(&c, path, happened);
  if (kill9) {
    CHECK(kill(c.pid, SIGKILL) == 0);
    CHECK_EQ_INT(spawn_wait(c.pid, 30), 128 + SIGKILL);
    g_running = 0;
  } else {
    stop_clean(&c);
  }

  collector_restart(&c, NULL);
  CHECK_EQ_INT(send_small(&c, "after-loss", refused, r), 200);
  CHECKF(strncmp(r->body, "stored", 6) == 0, "%s", r->body);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(count_by_id(c.db, "SELECT count(*) FROM batches WHERE id = ?1", refused), 1);
  CHECK_EQ_INT(count_by_id(c.db, "SELECT count(*) FROM batches WHERE id = ?1", before),
               before_kept ? 1 : 0);
  check_integrity(c.db);
  free(r);
}

static void delete_db(const char *db) {
  CHECK(unlink(db) == 0);
}

/* Another SQLite database made beside it and renamed over it (what a
   restore from a backup or a careless deploy does). */
static void replace_db(const char *db) {
  char other[160];
  snprintf(other, sizeof other, "%s.other", db);
  sqlite3 *h = NULL;
  CHECK(sqlite3_open(other, &h) == SQLITE_OK);
  CHECK(sqlite3_exec(h, "CREATE TABLE unrelated(x)", NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(h);
  CHECK(rename(other, db) == 0);
}

static void delete_wal(const char *db) {
  char wal[160];
  snprintf(wal, sizeof wal, "%s-wal", db);
  CHECK(unlink(wal) == 0);
}

static void case_db_deleted(void) {
  lost_then_restart(delete_db, "", "was deleted or moved away while open", false, false);
}

/* The old file's log stays at the path (SQLite keeps it when its database
   moved): emptied when the loss was found, it replays nothing of the old
   file into the new one at the restart, after a clean stop or a kill -9. */
static void case_db_replaced(void) {
  lost_then_restart(replace_db, "", "was replaced by another file", false, false);
}

static void case_db_replaced_kill9(void) {
  lost_then_restart(replace_db, "", "was replaced by another file", false, true);
}

/* The log deleted: the commits it held reach the database at the clean
   stop (SQLite checkpoints from the log it has open), so the first batch
   is still there after the restart. */
static void case_wal_deleted(void) {
  lost_then_restart(delete_wal, "-wal", "write-ahead log", true, false);
}

/* The real SDK's batch through a lost database: refused with 503 (kept,
   retried after Retry-After), delivered after the restart on the same
   address, stored once. */
static void case_sdk_keeps_batch(void) {
  collector_t c;
  collector_start(&c, NULL);
  delete_db(c.db);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get(&c, "/healthz", r), 503);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  char data_dir[128];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", tempdir_make("perf-durable"));
  cfg.app_name = "durable-sdk";
  cfg.sink = PERF_SINK_HTTP;
  cfg.endpoint = c.url;
  cfg.api_key = GOOD_KEY;
  cfg.data_dir = data_dir;
  cfg.batch_max_delay_ms = 100;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("through the loss"), PERF_OK);
  perf_sdk_stats_t st;
  double deadline = now_s() + 30;
  do {
    CHECKF(now_s() < deadline, "the SDK never got an answer to retry");
    usleep(20000);
    CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  } while (st.batches_retried < 1);
  CHECK_EQ_INT(st.batches_sent, 0);
  CHECK_EQ_INT(get_key(&c, GOOD_KEY, "/metrics", r), 200);
  CHECKF(strstr(r->body, "perf_collector_batches_rejected_total{reason=\"db_lost\"} 1\n") != NULL,
         "%s", r->body);
  CHECKF(strstr(r->body, "\nperf_collector_batches_accepted_total 0\n") != NULL, "%s", r->body);
  stop_clean(&c);

  uint16_t port = c.port;
  collector_restart(&c, NULL);
  CHECKF(c.port == port, "port %u taken meanwhile: the SDK cannot follow", (unsigned)port);
  CHECK_EQ_INT(perf_sdk_flush(60000), PERF_OK); /* after the 503's Retry-After: 10 */
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK(st.batches_written >= 1);
  CHECK_EQ_INT(st.batches_sent, st.batches_written);
  CHECK_EQ_INT(st.batches_dropped_server, 0);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  collector_stop_healthy(&c);
  uint8_t none[16] = {0};
  CHECK_EQ_INT(count_by_id(c.db,
                           "SELECT count(*) FROM events e JOIN batches b ON b.id = e.batch_id"
                           " WHERE b.app = 'durable-sdk' AND e.reason = 'through the loss'"
                           " AND b.id IS NOT ?1",
                           none),
               1);
  free(r);
}

/* ---- kill -9 under load --------------------------------------------------- */

typedef struct poster_s {
  const collector_t *c;
  unsigned thread;
  atomic_size_t *acked_all;
  atomic_bool *killed;
  size_t acked;
  uint8_t ids[LOAD_BATCHES][16]; /* those answered 200 */
  long refused_before_kill;      /* a non-200 before the kill: its status */
} poster_t;

/* Batches until LOAD_BATCHES or the first answer that is not 200 (the
   kill: no answer). */
static void *post_load(void *arg) {
  poster_t *p = arg;
  reply_t *r = malloc(sizeof *r);
  for (unsigned n = 0; r && n < LOAD_BATCHES; n++) {
    uint8_t id[16];
    make_id(id, p->thread, n);
    long status = send_small(p->c, "load", id, r);
    if (status != 200) {
      if (!atomic_load(p->killed)) p->refused_before_kill = status ? status : -1;
      break;
    }
    memcpy(p->ids[p->acked++], id, 16);
    atomic_fetch_add(p->acked_all, 1);
  }
  free(r);
  return NULL;
}

static void kill9_under_load(const char *const *extra) {
  collector_t c;
  collector_start(&c, extra);
  static poster_t posters[LOAD_THREADS];
  pthread_t threads[LOAD_THREADS];
  atomic_size_t acked_all = 0;
  atomic_bool killed = false;
  for (unsigned i = 0; i < LOAD_THREADS; i++) {
    posters[i] = (poster_t){.c = &c, .thread = i, .acked_all = &acked_all, .killed = &killed};
    CHECK(pthread_create(&threads[i], NULL, post_load, &posters[i]) == 0);
  }
  double deadline = now_s() + LOAD_DEADLINE_S;
  while (atomic_load(&acked_all) < KILL_AFTER) {
    CHECKF(now_s() < deadline, "only %zu batches acknowledged in %d s", atomic_load(&acked_all),
           LOAD_DEADLINE_S);
    for (unsigned i = 0; i < LOAD_THREADS; i++)
      CHECKF(posters[i].refused_before_kill == 0, "thread %u: a batch got %ld before the kill", i,
             posters[i].refused_before_kill);
    usleep(1000);
  }
  atomic_store(&killed, true);
  CHECK(kill(c.pid, SIGKILL) == 0);
  CHECK_EQ_INT(spawn_wait(c.pid, 30), 128 + SIGKILL);
  g_running = 0;
  size_t acked = 0;
  for (unsigned i = 0; i < LOAD_THREADS; i++) {
    CHECK(pthread_join(threads[i], NULL) == 0);
    CHECKF(posters[i].refused_before_kill == 0, "thread %u: a batch got %ld before the kill", i,
           posters[i].refused_before_kill);
    acked += posters[i].acked;
  }
  CHECKF(acked < LOAD_THREADS * LOAD_BATCHES, "the kill came after the load (%zu acknowledged)",
         acked);

  collector_restart(&c, extra);
  collector_stop_healthy(&c);
  for (unsigned i = 0; i < LOAD_THREADS; i++)
    for (size_t k = 0; k < posters[i].acked; k++) {
      const uint8_t *id = posters[i].ids[k];
      CHECKF(count_by_id(c.db, "SELECT count(*) FROM batches WHERE id = ?1", id) == 1,
             "thread %u batch %zu: acknowledged, not stored", i, k);
      CHECKF(count_by_id(c.db, "SELECT count(*) FROM events WHERE batch_id = ?1", id) == 1,
             "thread %u batch %zu: its event is missing", i, k);
    }
  uint8_t none[16] = {0};
  long long stored =
      count_by_id(c.db, "SELECT count(*) FROM batches WHERE app = 'load' AND id <> ?1", none);
  CHECKF(stored >= (long long)acked && stored <= (long long)acked + LOAD_THREADS,
         "%lld stored, %zu acknowledged (at most one more in flight per thread)", stored, acked);
  check_integrity(c.db);
  fprintf(stderr, "kill -9 after %zu acknowledged batches: all stored (%lld in the db)\n", acked,
          stored);
}

static void case_kill9_under_load(void) {
  kill9_under_load((const char *[]){"--rate-limit", "0", NULL}); /* --durability full */
}

static void case_kill9_under_load_process(void) {
  kill9_under_load((const char *[]){"--rate-limit", "0", "--durability", "process", NULL});
}

/* ---- PostgreSQL: the server crashes --------------------------------------- */

#define CRASH_BATCHES 20
#define MAX_SERVER_PROCS 64

static char g_server_dir[64]; /* this case's own server (pg_server.sh) */

static void server_stop(void) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "sh %s stop %s", PG_SERVER_SH, g_server_dir);
  if (g_server_dir[0] && system(cmd) != 0) fprintf(stderr, "%s failed\n", cmd);
  g_server_dir[0] = '\0';
}

static void server_run(const char *what) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "sh %s %s %s >/dev/null", PG_SERVER_SH, what, g_server_dir);
  CHECKF(system(cmd) == 0, "%s", cmd);
}

/* Process pid's parent and state (/proc/pid/stat; 0 and 0 when gone). */
static pid_t proc_parent(pid_t pid, char *state) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  bool got = f && fgets(line, sizeof line, f);
  if (f) fclose(f);
  const char *end = got ? strrchr(line, ')') : NULL; /* the name may hold anything */
  int ppid = 0;
  *state = 0;
  if (!end || sscanf(end + 1, " %c %d", state, &ppid) != 2) return 0;
  return (pid_t)ppid;
}

/* The live children of ppid, into pids: their count. */
static size_t children_of(pid_t ppid, pid_t *pids) {
  DIR *d = opendir("/proc");
  CHECK(d != NULL);
  size_t n = 0;
  for (struct dirent *e; n < MAX_SERVER_PROCS && (e = readdir(d)) != NULL;) {
    char state;
    pid_t pid = (pid_t)atoi(e->d_name);
    if (pid > 0 && proc_parent(pid, &state) == ppid && state != 'Z') pids[n++] = pid;
  }
  closedir(d);
  return n;
}

/* Whether pid's title (PostgreSQL sets "postgres: walwriter" and such in
   its argv) holds what. */
static bool title_has(pid_t pid, const char *what) {
  char path[64], title[256] = "";
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(title, 1, sizeof title - 1, f) : 0;
  if (f) fclose(f);
  title[n] = '\0';
  return strstr(title, what) != NULL;
}

static pid_t postmaster_pid(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/data/postmaster.pid", g_server_dir);
  FILE *f = fopen(path, "r");
  int pid = 0;
  CHECKF(f && fscanf(f, "%d", &pid) == 1 && pid > 0, "%s", path);
  fclose(f);
  return (pid_t)pid;
}

/* The server crashes: SIGKILL to the postmaster and every process of it,
   back when all are gone. This process is their subreaper (case_server_crash)
   and reaps them: a zombie postmaster would still own its lock file. */
static void crash_server(void) {
  pid_t postmaster = postmaster_pid(), kids[MAX_SERVER_PROCS + 1];
  size_t n = children_of(postmaster, kids);
  kids[n++] = postmaster;
  for (size_t i = 0; i < n; i++)
    kill(kids[i], SIGKILL);
  for (double end = now_s() + 30;; usleep(10000)) {
    size_t alive = 0;
    char state;
    for (size_t i = 0; i < n; i++) {
      waitpid(kids[i], NULL, WNOHANG); /* ours once the postmaster is gone */
      if (proc_parent(kids[i], &state)) alive++;
    }
    if (alive == 0) break;
    CHECKF(now_s() < end, "%zu server processes not gone 30 s after SIGKILL", alive);
  }
}

/* --durability full on PostgreSQL: a batch commits asynchronously (its
   hang lock freed sooner) and is flushed before its 200 (store_pg.c,
   durable_mark). With the WAL writer, the background writer and the
   checkpointer stopped, nothing but that flush puts a commit on disk
   before the crash: without it the batches are lost (tried). Folds
   (synchronous commits of their own) are held off by the interval. */
static void case_server_crash(void) {
  snprintf(g_server_dir, sizeof g_server_dir, "/tmp/perf-pgcrash.%ld", (long)getpid());
  atexit(server_stop);
  /* The server's processes adopted by this one when pg_ctl exits. */
  CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  server_run("start");
  CHECK(setenv("PERF_TEST_PG_DIR", g_server_dir, 1) == 0); /* collector_start's server */
  collector_t c;
  collector_start(&c,
                  (const char *[]){"--rate-limit", "0", "--rollup-fold-interval", "3600", NULL});
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  uint8_t id[16];
  make_id(id, 1, 0);
  CHECK_EQ_INT(send_small(&c, "crash", id, r), 200); /* the day's partitions made */

  pid_t kids[MAX_SERVER_PROCS];
  size_t n = children_of(postmaster_pid(), kids), stopped = 0;
  for (size_t i = 0; i < n; i++)
    if (title_has(kids[i], "walwriter") || title_has(kids[i], "background writer") ||
        title_has(kids[i], "checkpointer"))
      stopped += kill(kids[i], SIGSTOP) == 0;
  CHECK_EQ_INT(stopped, 3);
  for (unsigned i = 1; i <= CRASH_BATCHES; i++) {
    make_id(id, 1, i);
    CHECK_EQ_INT(send_small(&c, "crash", id, r), 200);
  }
  crash_server();
  server_run("resume");
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches WHERE app = 'crash'"),
               CRASH_BATCHES + 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM events e JOIN batches b"
                              " ON b.id = e.batch_id WHERE b.app = 'crash'"),
               CRASH_BATCHES + 1);

  make_id(id, 2, 0);
  CHECK_EQ_INT(send_small(&c, "crash", id, r), 200); /* on a new connection */
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches WHERE app = 'crash'"),
               CRASH_BATCHES + 2);
  collector_stop_healthy(&c);
  free(r);
  server_stop();
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(db_deleted),
      TEST_CASE(db_replaced),
      TEST_CASE(db_replaced_kill9),
      TEST_CASE(wal_deleted),
      TEST_CASE(sdk_keeps_batch),
      TEST_CASE(kill9_under_load),
      TEST_CASE(kill9_under_load_process),
      TEST_CASE(server_crash),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
