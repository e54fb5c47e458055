/*
 * collector_rig.h - perf-collector as a real child process for the
 * collector tests. The executable's path comes from PERF_COLLECTOR_PATH
 * (a compile definition of each test program).
 */
#ifndef PERF_TEST_COLLECTOR_RIG_H
#define PERF_TEST_COLLECTOR_RIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GOOD_KEY "good-key" /* every scope (a bare key) */
#define READ_KEY "read-key" /* the read scope only: the dashboard's */
#define MAX_ARGS 32

typedef struct collector_s {
  pid_t pid;
  uint16_t port;
  char url[64];
  char db[256];  /* a SQLite path, or under PERF_TEST_DB=pg a postgresql:// URI */
  char dir[128]; /* the temp directory: keys file, SQLite database */
} collector_t;

typedef struct reply_s {
  long status;
  char body[262144];
  size_t body_len;  /* what body holds (the first 256 KiB) */
  size_t total_len; /* the whole body's bytes */
  char retry_after[32];
} reply_t;

extern pid_t g_running; /* the collector a failed check leaves behind */

double now_s(void);

/* One request; headers is a NULL-terminated list; chunked sends the body
   without Content-Length. Returns the status (0: no answer). */
long request(const collector_t *c, const char *method, const char *path, const char *const *headers,
             const void *body, size_t len, bool chunked, reply_t *r);
long get(const collector_t *c, const char *path, reply_t *r);

/* GET path with "Authorization: Bearer <key>" (key NULL: none); the
   status, the answer in *r. */
long get_key(const collector_t *c, const char *key, const char *path, reply_t *r);

/* GET path with GOOD_KEY; the body parsed as JSON (the caller frees; a
   body that is not JSON fails the check). */
json_t *get_json(const collector_t *c, const char *path, long *status);

/* The same when the answer must be 200. */
json_t *get_ok(const collector_t *c, const char *path);

/* GET path with GOOD_KEY: 200 and the whole body (malloc'ed text, the
   caller frees it). */
char *get_text(const collector_t *c, const char *path);

/* The value of a sample line of GET /metrics (with GOOD_KEY: it needs the
   read scope): name is the metric's name with its labels, if any, as the
   line has them ("perf_collector_db_bytes",
   "perf_collector_batches_rejected_total{reason=\"db_lost\"}"). A
   missing line fails the check. */
long long metric(const collector_t *c, const char *name);

/* A batch id's 16 bytes as X-Perf-Batch-Id's 32 hex digits. */
void batch_id_hex(const uint8_t id[16], char hex[33]);

/* POST body to /v1/batches with the SDK's headers (protobuf, zstd, the
   batch id id_hex) and key: "Basic ..." sent as it is, any other a bearer
   token ("" an empty one); NULL: no Authorization (and no Expect:
   100-continue). The status, the answer in *r. */
long post_batch(const collector_t *c, const char *key, const char *id_hex, const void *body,
                size_t len, reply_t *r);

/* GET endpoint?query (just endpoint when query is "") must be a 400 whose
   error begins "parameter <param>:". */
void check_bad_parameter(const collector_t *c, const char *endpoint, const char *query,
                         const char *param);

uint16_t free_port(void);
/* atexit: a failed check leaves no collector behind (g_running, and every
   child of spawn's still running) */
void kill_running(void);
pid_t spawn(char *const argv[], const char *stderr_path);
/* Wait up to seconds for pid to exit: its exit status (128 + signal when
   killed by one), or -1 when it had to be killed at the deadline. */
int spawn_wait(pid_t pid, double seconds);
bool healthy_within(const collector_t *c, double seconds);

/* Start perf-collector with a temp db and keys file (GOOD_KEY and
   "second-key" with every scope, READ_KEY with read only) plus extra
   arguments (NULL-ended). */
void collector_start(collector_t *c, const char *const *extra);

/* The same with the keys file's text (NULL: no keys file, open mode). */
void collector_start_keys(collector_t *c, const char *keys_text, const char *const *extra);

/* Start perf-collector again on c->db after the previous one ended, with
   the same keys file (if any) and extra arguments, on the same port when
   it is free (c->port says which it got). */
void collector_restart(collector_t *c, const char *const *extra);

/* Healthy after everything, then a clean stop on SIGTERM (exit 0). */
void collector_stop_healthy(collector_t *c);

/* PERF_TEST_DB=pg (the pg_ variants of the collector tests, ctest
   fixture pg_server): collector_start points the collector at a fresh
   database on the tests' own PostgreSQL (tests/support/pg_server.sh, its
   socket directory in PERF_TEST_PG_DIR) instead of a SQLite file. */
bool rig_pg(void);

/* The location of a fresh store for this process, as collector_start
   picks it: a SQLite file in dir, or under PERF_TEST_DB=pg the URI of a
   fresh database on the tests' PostgreSQL. */
void rig_db_location(char *out, size_t size, const char *dir);

/* A count (the first column of sql's one row) and a statement without
   rows on db, SQLite or PostgreSQL as db says (both speak the SQL the
   tests use: count, sum, UPDATE, DELETE). */
long long db_count(const char *db, const char *sql);
void db_exec(const char *db, const char *sql);
/* Whether db (a collector_t's db) names a PostgreSQL database, not a
   SQLite file. */
bool db_is_pg(const char *db);
/* The first column of sql's one row on db as text (malloc'ed, the
   caller frees it; NULL for SQL NULL). */
char *db_text(const char *db, const char *sql);

/* sum(col) of a rollup table ("rollup_groups", "rollup_stacks_day", ...)
   over the rows where says (SQL), as the reads see it: the delta rows
   not folded yet added (rollup_sql.h), read in the same statement (a fold
   moves them in one transaction). 0 for none. */
long long rolled_sum(const char *db, const char *table, const char *col, const char *where);

/* main() of a collector test program: run the case named in argv[1] with
   curl initialized, SIGPIPE ignored and a leftover collector killed at
   exit. 2 on a usage error. */
struct test_case_s;
int collector_test_main(int argc, char **argv, const struct test_case_s *cases, size_t n);

#endif
