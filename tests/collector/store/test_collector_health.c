/*
 * test_collector_health.c - GET /healthz tells the truth about the store,
 * and answers while every batch waits for it (the real collector as a
 * child process, batches posted from several threads):
 *  - sqlite_locked: another process holds the SQLite database's write lock
 *    (BEGIN EXCLUSIVE): /healthz answers "locked" (503) within its bound
 *    while batches wait for the lock, the batches get 503;
 *    once the lock is gone, 200 "ok" and batches are stored;
 *  - disk_full (root: a small tmpfs in a mount namespace of its own): the
 *    database's file system full: "disk full" (503); freed: "ok";
 *  - stop_while_waiting: SIGTERM while batches wait for that lock: every
 *    batch answered (503), exit 0;
 *  - pg_locked (PostgreSQL): another session holds LOCK TABLE batches while
 *    8 clients post: /healthz answers "locked" within its bound every
 *    time, and once the lock is released every batch is stored, once;
 *  - pg_slow (PostgreSQL): another session locks the stacks table (the
 *    lock probe on batches passes, every batch waits): /healthz says
 *    "slow" once a batch has waited 5 s, and every batch is stored after;
 *  - pg_busy (PostgreSQL, --threads 1): past the 4 batches that may wait
 *    for the one in the store, batches are refused at once (503 busy);
 *  - pg_reads_locked (PostgreSQL, --threads 1): another session locks the
 *    tables the dashboard reads (batches, stacks, groups); with a flame
 *    read waiting for the lock, 7 more reads (flame, top-stacks, folded):
 *    exactly 4 wait for the read thread and 3 are refused at once (503
 *    "collector busy" + Retry-After); meanwhile /healthz answers "locked"
 *    within 3 s and a batch's headers are checked (400 at once) while a
 *    whole batch waits; released, every waiting read is answered 200 with
 *    what it answered before the lock, the batch stored once;
 *  - pg_reads_stop (PostgreSQL, --threads 1): SIGTERM while a read waits
 *    for that lock and 4 more wait for the read thread: reads sent after
 *    the signal are refused at once (503 "collector stopping"); released,
 *    the read in the store is answered 200, the waiting ones 503, exit 0;
 *  - sqlite_reads_wait (--threads 1): another process holds SQLite's write
 *    lock, so each batch holds the store for 5 s: reads of the dashboard
 *    wait behind it while /healthz answers "locked" within 3 s, and every
 *    read is answered 200 with what it answered before.
 * Each case runs in its own process: `test_collector_health <case>`.
 */
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "perf/v1/perf.pb-c.h"
#include "tempdir.h"

#define CLIENTS 8
/* SQLite stores one batch at a time and each waits 5 s for a lock held
   elsewhere before its 503: 3 clients answered within curl's 30 s. */
#define SQLITE_CLIENTS 3
#define HEALTH_BOUND_S 5.0 /* /healthz's answer: the probe's 2.5 s at most, and room */

/* ---- batches from several clients ------------------------------------------ */

typedef struct client_s {
  const collector_t *c;
  unsigned n;
  const char *path; /* a GET of it; NULL: a batch (n its id) */
  reply_t *reply;   /* a GET's whole answer (clients_free frees it) */
  pthread_t tid;
  _Atomic long status; /* 0 until the answer (body and time first) is in */
  char body[160];
  double answered_s; /* now_s() when the answer came */
} client_t;

static void make_id(uint8_t id[16], unsigned n) {
  uint32_t tag = (uint32_t)getpid();
  memset(id, 0x4e, 16);
  memcpy(id, &tag, sizeof tag);
  id[4] = (uint8_t)n;
}

/* One small batch (one hang event, one stack), id from n. */
static long send_one(const collector_t *c, unsigned n, reply_t *r) {
  uint8_t id[16];
  make_id(id, n);
  batch_one_event_t o;
  batch_one_event_init(&o, id, "health", "/usr/bin/health", "health_function");
  Perf__V1__Frame frame = PERF__V1__FRAME__INIT, *frs[] = {&frame};
  frame.module = 1, frame.address = 0x1000, frame.function = 1;
  o.b.n_frames = 1, o.b.frames = frs;
  uint32_t ids[] = {1};
  o.st.n_frames = 1, o.st.frames = ids;
  o.sc.tid = 9, o.sc.samples = 3;
  o.ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
  o.ev.start_unix_nanos = 1700000000000000000 + (int64_t)n * 1000000;
  o.ev.duration_nanos = 300000000;
  o.ev.tid = 9;
  return batch_send(c, &o.b, id, r);
}

static void *client_main(void *arg) {
  client_t *cl = arg;
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long status = cl->path ? get_key(cl->c, GOOD_KEY, cl->path, r) : send_one(cl->c, cl->n, r);
  snprintf(cl->body, sizeof cl->body, "%.*s", (int)sizeof cl->body - 1, r->body);
  cl->answered_s = now_s();
  if (cl->path)
    cl->reply = r;
  else
    free(r);
  atomic_store(&cl->status, status ? status : -1);
  return NULL;
}

static void clients_start(client_t *cl, unsigned n, const collector_t *c, unsigned first) {
  for (unsigned i = 0; i < n; i++) {
    cl[i] = (client_t){.c = c, .n = first + i};
    CHECK(pthread_create(&cl[i].tid, NULL, client_main, &cl[i]) == 0);
  }
}

static void clients_join(client_t *cl, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    CHECK(pthread_join(cl[i].tid, NULL) == 0);
}

/* n clients GETting paths[i % n_paths], started one after the other. */
static void readers_start(client_t *cl, unsigned n, const collector_t *c, const char *const *paths,
                          unsigned n_paths) {
  for (unsigned i = 0; i < n; i++) {
    cl[i] = (client_t){.c = c, .path = paths[i % n_paths]};
    CHECK(pthread_create(&cl[i].tid, NULL, client_main, &cl[i]) == 0);
  }
}

static void clients_free(client_t *cl, unsigned n) {
  for (unsigned i = 0; i < n; i++)
    free(cl[i].reply);
}

/* GET /healthz, answered within bound_s: its status, the answer in *r;
 *took (may be NULL) how long it took. */
static long health_within(const collector_t *c, reply_t *r, double *took, double bound_s) {
  double t0 = now_s();
  long status = get(c, "/healthz", r);
  double t = now_s() - t0;
  CHECKF(status != 0 && t < bound_s, "/healthz: status %ld after %.2f s (bound %.0f s)", status, t,
         bound_s);
  if (took) *took = t;
  return status;
}

static long health(const collector_t *c, reply_t *r, double *took) {
  return health_within(c, r, took, HEALTH_BOUND_S);
}

/* /healthz until it answers `status` with a body beginning `prefix`, within
   seconds; every answer within its bound. */
static void health_becomes(const collector_t *c, long status, const char *prefix, double seconds,
                           reply_t *r) {
  double deadline = now_s() + seconds;
  long got;
  while (((got = health(c, r, NULL)) != status || strncmp(r->body, prefix, strlen(prefix)) != 0) &&
         now_s() < deadline)
    usleep(50000);
  CHECKF(got == status && strncmp(r->body, prefix, strlen(prefix)) == 0,
         "/healthz after %.0f s: %ld %s (wanted %ld %s)", seconds, got, r->body, status, prefix);
}

/* ---- SQLite ------------------------------------------------------------------ */

/* A process holding the database's write lock (BEGIN EXCLUSIVE) until its
   pipe closes. */
typedef struct locker_s {
  pid_t pid;
  int release; /* close: the locker rolls back and exits */
} locker_t;

static void sqlite_lock(const char *db, locker_t *l) {
  int ready[2], release[2];
  CHECK(pipe(ready) == 0 && pipe(release) == 0);
  fflush(NULL);
  l->pid = fork();
  CHECK(l->pid >= 0);
  if (l->pid == 0) {
    close(ready[0]);
    close(release[1]);
    sqlite3 *h = NULL;
    if (sqlite3_open(db, &h) != SQLITE_OK) _exit(2);
    sqlite3_busy_timeout(h, 10000);
    if (sqlite3_exec(h, "BEGIN EXCLUSIVE", NULL, NULL, NULL) != SQLITE_OK) _exit(3);
    if (write(ready[1], "x", 1) != 1) _exit(4);
    char b;
    while (read(release[0], &b, 1) > 0) {
    }
    sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(h);
    _exit(0);
  }
  close(ready[1]);
  close(release[0]);
  char b;
  CHECKF(read(ready[0], &b, 1) == 1, "the locker could not take the write lock");
  close(ready[0]);
  l->release = release[1];
}

static void sqlite_unlock(locker_t *l) {
  close(l->release);
  int st;
  CHECK(waitpid(l->pid, &st, 0) == l->pid);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "locker status 0x%x", st);
}

static void case_sqlite_locked(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(send_one(&c, 100, r), 200);
  locker_t l;
  sqlite_lock(c.db, &l);
  client_t cl[SQLITE_CLIENTS];
  clients_start(cl, SQLITE_CLIENTS, &c, 0);
  /* While the batches wait for the lock (5 s each, then 503): "locked". */
  for (int i = 0; i < 3; i++) {
    double took;
    CHECK_EQ_INT(health(&c, r, &took), 503);
    CHECKF(strncmp(r->body, "locked: database ", 17) == 0 && strstr(r->body, c.db), "/healthz: %s",
           r->body);
    fprintf(stderr, "/healthz with the write lock held elsewhere: 503 in %.0f ms: %s", took * 1000,
            r->body);
  }
  clients_join(cl, SQLITE_CLIENTS);
  for (unsigned i = 0; i < SQLITE_CLIENTS; i++)
    CHECKF(cl[i].status == 503, "client %u: %ld %s", i, cl[i].status, cl[i].body);
  sqlite_unlock(&l);
  health_becomes(&c, 200, "ok", 10, r);
  for (unsigned i = 0; i < CLIENTS; i++)
    CHECK_EQ_INT(send_one(&c, i, r), 200);
  free(r);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), CLIENTS + 1);
}

/* SIGTERM while batches wait for a lock held elsewhere (--threads 1): the
   collector answers every one (the one in the store 503 once its wait
   ends, the waiting one 503 "collector stopping") and exits 0. The stop
   comes once the first batch was answered, 5 s after the clients sent
   theirs: the others are in the collector by then. */
static void case_stop_while_waiting(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--threads", "1", NULL});
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  locker_t l;
  sqlite_lock(c.db, &l);
  client_t cl[SQLITE_CLIENTS];
  clients_start(cl, SQLITE_CLIENTS, &c, 0);
  double deadline = now_s() + 30;
  unsigned answered = 0;
  while (!answered && now_s() < deadline) {
    for (unsigned i = 0; i < SQLITE_CLIENTS; i++)
      answered += atomic_load(&cl[i].status) != 0;
    usleep(20000);
  }
  CHECK_EQ_INT(answered, 1);
  CHECK_EQ_INT(health(&c, r, NULL), 503);
  CHECK(kill(c.pid, SIGTERM) == 0);
  int status = spawn_wait(c.pid, 30);
  g_running = 0;
  CHECKF(status == 0, "collector exit status %d", status);
  clients_join(cl, SQLITE_CLIENTS);
  for (unsigned i = 0; i < SQLITE_CLIENTS; i++)
    CHECKF(cl[i].status == 503, "client %u: %ld %s", i, (long)cl[i].status, cl[i].body);
  sqlite_unlock(&l);
  free(r);
}

static char g_mount[256];
static pid_t g_mount_owner;

static void unmount_tmpfs(void) {
  if (g_mount[0] && getpid() == g_mount_owner) umount2(g_mount, MNT_DETACH);
}

/* Fill path's file system: a file written until ENOSPC. */
static void fill(const char *path) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  static char block[65536];
  while (fwrite(block, 1, sizeof block, f) == sizeof block && fflush(f) == 0) {
  }
  fclose(f);
}

static void case_disk_full(void) {
  if (geteuid() != 0) {
    printf("note: skipped, not root: cannot mount a tmpfs\n");
    return;
  }
  /* A mount namespace of our own (the collector, a child, shares it): the
     tmpfs disappears with this process whatever happens. */
  if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
    printf("note: no private mount namespace (%s)\n", strerror(errno));
  snprintf(g_mount, sizeof g_mount, "%s/mnt", tempdir_make("perf-health"));
  CHECK(mkdir(g_mount, 0700) == 0);
  g_mount_owner = getpid();
  atexit(unmount_tmpfs);
  if (mount("tmpfs", g_mount, "tmpfs", 0, "size=8m,mode=0700") != 0) {
    printf("note: skipped, mounting a tmpfs is not permitted here (%s)\n", strerror(errno));
    g_mount[0] = '\0';
    return;
  }
  char db[300], filler[300];
  snprintf(db, sizeof db, "%s/collector.db", g_mount);
  snprintf(filler, sizeof filler, "%s/filler", g_mount);
  collector_t c;
  collector_start(&c, (const char *[]){"--db", db, NULL});
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(send_one(&c, 1, r), 200);
  CHECK_EQ_INT(health(&c, r, NULL), 200);
  fill(filler);
  CHECK_EQ_INT(health(&c, r, NULL), 503);
  CHECKF(strncmp(r->body, "disk full: ", 11) == 0 && strstr(r->body, g_mount), "/healthz: %s",
         r->body);
  fprintf(stderr, "/healthz with the disk full: %s", r->body);
  CHECK(unlink(filler) == 0);
  CHECK_EQ_INT(health(&c, r, NULL), 200);
  CHECK_EQ_INT(send_one(&c, 2, r), 200);
  free(r);
  collector_stop_healthy(&c);
}

/* ---- PostgreSQL ---------------------------------------------------------------- */

/* A session of its own holding `lock` (a LOCK TABLE statement) in an open
   transaction. */
static PGconn *pg_hold(const char *db, const char *lock) {
  PGconn *s = PQconnectdb(db);
  CHECKF(PQstatus(s) == CONNECTION_OK, "%s", PQerrorMessage(s));
  const char *sql[] = {"BEGIN", lock};
  for (size_t i = 0; i < 2; i++) {
    PGresult *res = PQexec(s, sql[i]);
    CHECKF(PQresultStatus(res) == PGRES_COMMAND_OK, "%s: %s", sql[i], PQerrorMessage(s));
    PQclear(res);
  }
  return s;
}

static void pg_release(PGconn *s) {
  PGresult *res = PQexec(s, "ROLLBACK");
  CHECK(PQresultStatus(res) == PGRES_COMMAND_OK);
  PQclear(res);
  PQfinish(s);
}

/* The clients' batches wait for `lock`; /healthz answers `prefix` while
   they do; released, every batch is stored. */
static void pg_stall(const char *lock, const char *prefix, double within_s) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(health(&c, r, NULL), 200);
  PGconn *s = pg_hold(c.db, lock);
  client_t cl[CLIENTS];
  clients_start(cl, CLIENTS, &c, 0);
  health_becomes(&c, 503, prefix, within_s, r);
  fprintf(stderr, "/healthz with every batch waiting: %s", r->body);
  double worst = 0;
  for (int i = 0; i < 10; i++) { /* and every time after, within its bound */
    double took;
    CHECK_EQ_INT(health(&c, r, &took), 503);
    CHECKF(strncmp(r->body, prefix, strlen(prefix)) == 0, "/healthz: %s", r->body);
    worst = took > worst ? took : worst;
  }
  fprintf(stderr, "/healthz 10 times more while %d batches wait: worst %.0f ms\n", CLIENTS,
          worst * 1000);
  pg_release(s);
  clients_join(cl, CLIENTS);
  for (unsigned i = 0; i < CLIENTS; i++)
    CHECKF(cl[i].status == 200, "client %u: %ld %s", i, cl[i].status, cl[i].body);
  health_becomes(&c, 200, "ok", 10, r);
  free(r);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), CLIENTS);
}

static void case_pg_locked(void) {
  pg_stall("LOCK TABLE batches IN ACCESS EXCLUSIVE MODE", "locked: database: table batches", 5);
}

static void case_pg_slow(void) {
  pg_stall("LOCK TABLE stacks IN ACCESS EXCLUSIVE MODE", "slow: a batch has been in the store", 20);
}

static bool busy(const client_t *cl) {
  return atomic_load(&cl->status) == 503 && strncmp(cl->body, "collector busy: ", 16) == 0;
}

/* --threads 1: one batch in the store, 4 waiting for it (5 in all; 4 when
   the ingest thread had not taken the first yet as the last arrived); the
   others are refused at once (503 "collector busy" + Retry-After), while
   the lock is still held, not held in memory; released, the ones taken
   are stored. */
static void case_pg_busy(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--threads", "1", NULL});
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  PGconn *s = pg_hold(c.db, "LOCK TABLE batches IN ACCESS EXCLUSIVE MODE");
  client_t cl[CLIENTS];
  clients_start(cl, CLIENTS, &c, 0);
  double deadline = now_s() + 20;
  unsigned refused = 0;
  while (refused < CLIENTS - 5 && now_s() < deadline) {
    refused = 0;
    for (unsigned i = 0; i < CLIENTS; i++)
      refused += busy(&cl[i]);
    usleep(20000);
  }
  CHECKF(refused >= CLIENTS - 5, "%u refused", refused);
  health_becomes(&c, 503, "locked: ", 5, r); /* and every client has arrived */
  double released = now_s();
  pg_release(s);
  clients_join(cl, CLIENTS);
  unsigned stored = 0;
  refused = 0;
  for (unsigned i = 0; i < CLIENTS; i++) {
    CHECKF(busy(&cl[i]) || cl[i].status == 200, "client %u: %ld %s", i, (long)cl[i].status,
           cl[i].body);
    CHECKF(!busy(&cl[i]) || cl[i].answered_s < released, "client %u refused after the release", i);
    refused += busy(&cl[i]);
    stored += cl[i].status == 200;
  }
  CHECKF(refused == CLIENTS - 5 || refused == CLIENTS - 4, "%u refused", refused);
  free(r);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), stored);
}

/* ---- reads waiting for the store ------------------------------------------ */

#define READ_HEALTH_BOUND_S 3.0 /* /healthz while reads wait: the probe's time, and room */
static const char *const READ_PATHS[] = {"/api/v1/flame?kind=hang", "/api/v1/top-stacks?kind=hang",
                                         "/api/v1/export/folded?kind=hang"};
#define N_READ_PATHS ARRAY_LEN(READ_PATHS)

/* What each of READ_PATHS answers now (200, malloc'ed). */
static void reads_expected(const collector_t *c, char *expected[N_READ_PATHS]) {
  for (size_t i = 0; i < N_READ_PATHS; i++)
    expected[i] = get_text(c, READ_PATHS[i]);
}

static void reads_expected_free(char *expected[N_READ_PATHS]) {
  for (size_t i = 0; i < N_READ_PATHS; i++)
    free(expected[i]);
}

static bool busy_read(const client_t *cl) {
  static const char BUSY[] = "{\"error\":\"collector busy: ";
  return atomic_load(&cl->status) == 503 && strncmp(cl->body, BUSY, strlen(BUSY)) == 0;
}

/* The reads refused as busy, once `want` of them are (within 20 s). */
static unsigned busy_reads_reach(const client_t *rd, unsigned n, unsigned want) {
  unsigned refused = 0;
  double deadline = now_s() + 20;
  while (refused < want && now_s() < deadline) {
    refused = 0;
    for (unsigned i = 0; i < n; i++)
      refused += busy_read(&rd[i]);
    usleep(20000);
  }
  return refused;
}

/* Every reader answered 200 with what its path answered before the store
   was held (before, by READ_PATHS' order) or, when a batch was stored
   meanwhile, after; or refused at once: 503 "collector busy" with
   Retry-After, before released_s. The refusals. */
static unsigned reads_check(const client_t *cl, unsigned n, char *const before[],
                            char *const after[], double released_s) {
  unsigned refused = 0;
  for (unsigned i = 0; i < n; i++) {
    const reply_t *r = cl[i].reply;
    if (busy_read(&cl[i])) {
      CHECKF(r->retry_after[0] != '\0', "reader %u: 503 without Retry-After", i);
      CHECKF(cl[i].answered_s < released_s, "reader %u refused after the release", i);
      refused++;
      continue;
    }
    size_t k = 0;
    while (k < N_READ_PATHS && READ_PATHS[k] != cl[i].path)
      k++;
    CHECK(k < N_READ_PATHS);
    bool same = r->total_len == strlen(before[k]) && memcmp(r->body, before[k], r->total_len) == 0;
    same =
        same || (r->total_len == strlen(after[k]) && memcmp(r->body, after[k], r->total_len) == 0);
    CHECKF(cl[i].status == 200 && same, "reader %u (%s): %ld %s (wanted 200 %s)", i, cl[i].path,
           (long)cl[i].status, cl[i].body, before[k]);
  }
  return refused;
}

/* /healthz `times` times while reads wait: `prefix` (a 503), each within
   READ_HEALTH_BOUND_S. */
static void health_while_reads_wait(const collector_t *c, const char *prefix, int times,
                                    reply_t *r) {
  double worst = 0;
  for (int i = 0; i < times; i++) {
    double took;
    CHECK_EQ_INT(health_within(c, r, &took, READ_HEALTH_BOUND_S), 503);
    CHECKF(strncmp(r->body, prefix, strlen(prefix)) == 0, "/healthz: %s", r->body);
    worst = took > worst ? took : worst;
  }
  fprintf(stderr, "/healthz %d times while reads wait: worst %.0f ms: %s", times, worst * 1000,
          r->body);
}

/* The collector's reads of stack rows (a flame's, query_sql.h) waiting
   for a lock held by another session. */
static long long pg_reads_waiting(const char *db) {
  return db_count(db, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                      " AND wait_event_type = 'Lock' AND query LIKE 'WITH a AS MATERIALIZED%'");
}

#define PG_READERS 8 /* one in the store, 4 waiting for it, 3 refused (--threads 1) */

static void case_pg_reads_locked(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--threads", "1", NULL});
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  for (unsigned i = 0; i < 3; i++)
    CHECK_EQ_INT(send_one(&c, i, r), 200);
  char *expected[N_READ_PATHS];
  reads_expected(&c, expected);
  PGconn *s = pg_hold(c.db, "LOCK TABLE batches, stacks, groups IN ACCESS EXCLUSIVE MODE");
  /* The first read in the store, waiting for the lock: the one read
     thread is taken, every later read waits in the queue or is refused. */
  client_t rd[PG_READERS];
  readers_start(rd, 1, &c, READ_PATHS, 1);
  double deadline = now_s() + 20;
  while (pg_reads_waiting(c.db) < 1 && now_s() < deadline)
    usleep(20000);
  CHECKF(pg_reads_waiting(c.db) >= 1, "the first read never waited for the lock");
  readers_start(rd + 1, PG_READERS - 1, &c, READ_PATHS, N_READ_PATHS);
  client_t batch;
  clients_start(&batch, 1, &c, 10);
  health_while_reads_wait(&c, "locked: database: table batches", 5, r);
  /* A batch's headers are checked at once (a bad batch id: 400). */
  double t0 = now_s();
  CHECK_EQ_INT(post_batch(&c, GOOD_KEY, "not-a-batch-id", "x", 1, r), 400);
  CHECKF(now_s() - t0 < READ_HEALTH_BOUND_S && strstr(r->body, "X-Perf-Batch-Id"),
         "a batch's headers: %.2f s, %s", now_s() - t0, r->body);
  unsigned refused = busy_reads_reach(rd, PG_READERS, PG_READERS - 5);
  CHECKF(refused == PG_READERS - 5, "%u reads refused while the lock is held", refused);
  CHECK_EQ_INT(atomic_load(&batch.status), 0); /* still waiting for the lock */
  double released = now_s();
  pg_release(s);
  clients_join(rd, PG_READERS);
  clients_join(&batch, 1);
  CHECKF(batch.status == 200, "the batch: %ld %s", (long)batch.status, batch.body);
  char *after[N_READ_PATHS]; /* with the batch: a read that waited may see it */
  reads_expected(&c, after);
  CHECK_EQ_INT(reads_check(rd, PG_READERS, expected, after, released), PG_READERS - 5);
  reads_expected_free(after);
  health_becomes(&c, 200, "ok", 10, r);
  clients_free(rd, PG_READERS);
  reads_expected_free(expected);
  free(r);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 4);
}

static bool stopping_read(const client_t *cl) {
  static const char STOPPING[] = "{\"error\":\"collector stopping\"}";
  return atomic_load(&cl->status) == 503 && strncmp(cl->body, STOPPING, strlen(STOPPING)) == 0 &&
         cl->reply->retry_after[0] != '\0';
}

#define STOP_PROBES 100 /* reads sent after the SIGTERM, one every 50 ms at most */

/* SIGTERM while reads wait (--threads 1, a flame read in the store waiting
   for PostgreSQL's lock, 7 more reads: 4 waiting behind it, 3 refused, so
   every read is in the collector or answered before the signal): once the
   collector has closed its pools (a read sent after the signal is refused
   at once, 503 "collector stopping", while the lock is still held), the
   lock is released; the read in the store is answered 200 with its
   content, the 4 waiting ones 503 "collector stopping", and the collector
   exits 0. */
static void case_pg_reads_stop(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--threads", "1", NULL});
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  for (unsigned i = 0; i < 3; i++)
    CHECK_EQ_INT(send_one(&c, i, r), 200);
  char *expected[N_READ_PATHS];
  reads_expected(&c, expected);
  PGconn *s = pg_hold(c.db, "LOCK TABLE batches, stacks, groups IN ACCESS EXCLUSIVE MODE");
  client_t rd[PG_READERS];
  readers_start(rd, 1, &c, READ_PATHS, 1);
  double deadline = now_s() + 20;
  while (pg_reads_waiting(c.db) < 1 && now_s() < deadline)
    usleep(20000);
  CHECKF(pg_reads_waiting(c.db) >= 1, "the first read never waited for the lock");
  readers_start(rd + 1, PG_READERS - 1, &c, READ_PATHS, N_READ_PATHS);
  CHECK_EQ_INT(busy_reads_reach(rd, PG_READERS, PG_READERS - 5), PG_READERS - 5);
  CHECK(kill(c.pid, SIGTERM) == 0);
  static client_t probes[STOP_PROBES];
  unsigned n = 0;
  bool closed = false;
  while (!closed && n < STOP_PROBES) {
    readers_start(&probes[n++], 1, &c, READ_PATHS, 1);
    for (int i = 0; i < 5 && !closed; i++) {
      usleep(10000);
      for (unsigned k = 0; k < n && !closed; k++)
        closed = stopping_read(&probes[k]);
    }
  }
  CHECKF(closed, "no read refused within %u reads after SIGTERM", n);
  pg_release(s);
  int status = spawn_wait(c.pid, 30);
  g_running = 0;
  CHECKF(status == 0, "collector exit status %d", status);
  clients_join(rd, PG_READERS);
  clients_join(probes, n);
  CHECK_EQ_INT(reads_check(rd, 1, expected, expected, now_s()), 0);
  unsigned stopped = 0;
  for (unsigned i = 1; i < PG_READERS; i++) {
    CHECKF(stopping_read(&rd[i]) || busy_read(&rd[i]), "reader %u: %ld %s", i, (long)rd[i].status,
           rd[i].body);
    stopped += stopping_read(&rd[i]);
  }
  CHECK_EQ_INT(stopped, 4);
  for (unsigned i = 0; i < n; i++) /* before the pools closed, a full queue: busy */
    CHECKF(stopping_read(&probes[i]) || busy_read(&probes[i]), "probe %u: %ld %s", i,
           (long)probes[i].status, probes[i].body);
  fprintf(stderr,
          "stopped with reads waiting: 1 answered 200, the 4 waiting and %u sent after "
          "the signal answered 503 collector stopping\n",
          n);
  clients_free(rd, PG_READERS);
  clients_free(probes, n);
  reads_expected_free(expected);
  free(r);
}

#define SQLITE_READERS 4 /* the read thread's one and 3 waiting (--threads 1: 4 may) */

/* --threads 1, the write lock held elsewhere: each batch holds the store
   for SQLite's 5 s wait, the reads wait behind it; /healthz answers. */
static void case_sqlite_reads_wait(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--threads", "1", NULL});
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  for (unsigned i = 0; i < 3; i++)
    CHECK_EQ_INT(send_one(&c, i, r), 200);
  char *expected[N_READ_PATHS];
  reads_expected(&c, expected);
  locker_t l;
  sqlite_lock(c.db, &l);
  client_t cl[SQLITE_CLIENTS], rd[SQLITE_READERS];
  clients_start(cl, SQLITE_CLIENTS, &c, 10);
  readers_start(rd, SQLITE_READERS, &c, READ_PATHS, N_READ_PATHS);
  health_while_reads_wait(&c, "locked: database ", 3, r);
  clients_join(cl, SQLITE_CLIENTS);
  for (unsigned i = 0; i < SQLITE_CLIENTS; i++)
    CHECKF(cl[i].status == 503, "client %u: %ld %s", i, (long)cl[i].status, cl[i].body);
  clients_join(rd, SQLITE_READERS);
  CHECK_EQ_INT(reads_check(rd, SQLITE_READERS, expected, expected, now_s()), 0);
  sqlite_unlock(&l);
  health_becomes(&c, 200, "ok", 10, r);
  clients_free(rd, SQLITE_READERS);
  reads_expected_free(expected);
  free(r);
  collector_stop_healthy(&c);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 3);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(sqlite_locked),   TEST_CASE(disk_full),     TEST_CASE(stop_while_waiting),
      TEST_CASE(pg_locked),       TEST_CASE(pg_slow),       TEST_CASE(pg_busy),
      TEST_CASE(pg_reads_locked), TEST_CASE(pg_reads_stop), TEST_CASE(sqlite_reads_wait),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
