/*
 * pg_store.h - the PostgreSQL backend's shared state and helpers (libpq),
 * split by responsibility: pg_store.c (open, schema migrations, ingest,
 * retention, stats, the ops table), pg_query.c (the read queries),
 * pg_hang_groups.c (which stored hang group a hang joins),
 * pg_resym.c (re-symbolization), pg_alerts.c (alert rules and alerts). One connection behind a
 * mutex, as the SQLite backend (docs/operations.md "Running on PostgreSQL" says why and what it
 * measured); every parameter is sent as text and cast in the SQL ($1::bigint), so one helper runs
 * every statement.
 */
#ifndef PERF_COLLECTOR_STORE_PG_H
#define PERF_COLLECTOR_STORE_PG_H

#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "collector/store/known_rows.h"
#include "collector/store/store.h"
#include "sdk/base/worker.h"

#define PG_MAX_PARAMS 32

/* Advisory lock keys (pg_advisory_xact_lock / pg_try_advisory_xact_lock):
   one per job two collectors on one database must not run at once. */
#define PG_LOCK_HANG_GROUPS 0x70657266001 /* picking and writing hang groups */
#define PG_LOCK_RETENTION 0x70657266002   /* the retention job */
#define PG_LOCK_RESYMBOLIZE 0x70657266003 /* a re-symbolization */
/* Shared by every batch, exclusive for a re-symbolization: the stacks and
   groups a batch leaves out as stored (store_known_fresh) are not deleted
   before its COMMIT. */
#define PG_LOCK_STACKS 0x70657266004
/* Folding the rollup rows batches appended (pg_fold.c): the fold
   thread tries it, a rebuild waits for it (before it touches a rollup). */
#define PG_LOCK_FOLD 0x70657266005
/* The first key of the two-key advisory locks of named jobs (claim_job:
   debuginfod fetches), 'perf' as an int4; the second is the name's hash. */
#define PG_LOCK_CLASS_JOB "1885696614"

/* A statement's parameter slots in PostgreSQL's SQL, typed where a NULL
   test needs it (collector/store/query_sql.h). */
#define SQL_SLOT(n) "$" n
#define SQL_TEXT(n) "$" n "::text"
#define SQL_INT(n) "$" n "::bigint"

/* last_seen's steps (known_rows.h), written into SQL with PG_XSTR. */
#define PG_LAST_SEEN_STEP STORE_LAST_SEEN_STEP
#define PG_LAST_SEEN_MOVE STORE_LAST_SEEN_MOVE
/* Run by a transaction deleting stored stacks or groups. */
#define PG_BUMP_STACK_EPOCH "UPDATE stack_epoch SET epoch = epoch + 1"
#define PG_XSTR(x) PG_STR(x)
#define PG_STR(x) #x

#define PG_MAX_PREPARED 96
/* Statements queued in one pipeline before its results are read. */
#define PG_MAX_PENDING 64

/* A queued statement (pg_conn.c): what it does, for its error, and
   the prepared statement it makes (its index) or -1. */
typedef struct pg_pending_s {
  const char *what;
  int prepare;
  PGresult **into; /* where its rows go (pg_queue_read); NULL: none kept */
} pg_pending_t;

struct store_s {
  pthread_mutex_t lock;
  PGconn *conn;
  char *conninfo;
  pthread_mutex_t health_lock; /* pg_health's own connection (pg_health.c) */
  PGconn *health;
  store_durability_t durability;
  /* Statements with parameters are prepared on the connection at their
     first use (named by their index here: the SQL texts are constants,
     known by address, and their parameter count: one text may be run
     with different counts) and reused; a reset connection starts over. */
  const char *prepared[PG_MAX_PREPARED];
  int prepared_n[PG_MAX_PREPARED];
  int n_prepared;
  /* Between pg_pipeline_begin and _end: statements are queued (libpq
     pipeline mode), and read back when one needs its rows or at the end. */
  bool pipelined;
  pg_pending_t pending[PG_MAX_PENDING];
  int n_pending;
  int shard;             /* this collector's rows of the rollups (pg_rollups.c) */
  int64_t partition_day; /* the day whose partitions this collector made last */
  /* The stacks and groups seen stored, good while the database's
     stack_epoch (bumped when stacks or groups are deleted) is known_epoch;
     -1: not read on this connection yet. */
  store_known_t *known_stacks, *known_groups;
  int64_t known_epoch;
  /* The fold thread (pg_fold.c) and its own connection, a store of
     its own (folder: NULL in the folder itself). */
  store_t *folder;
  perf__worker_t *fold_worker;
  unsigned fold_interval_s;
  uint64_t read_rows_max; /* store_config_t's, or STORE_READ_ROWS_MAX */
  /* The reads' own connection, a store of its own (reader: NULL in the
     reader itself): a read never waits for a batch's transaction on the
     ingest connection, nor a batch for a read (pg_query.c). */
  store_t *reader;
};

/* Statement parameters as text (NULL: SQL NULL), numbers formatted into
   their own buffers. */
typedef struct pg_params_s {
  const char *v[PG_MAX_PARAMS];
  Oid type[PG_MAX_PARAMS]; /* text unless a bytea */
  int len[PG_MAX_PARAMS];
  int fmt[PG_MAX_PARAMS]; /* 1: binary (a bytea's bytes, a text of a given length) */
  char num[PG_MAX_PARAMS][24];
  char *owned[PG_MAX_PARAMS]; /* pg_own's */
  int n;
} pg_params_t;

/* $i (1-based) of p: */
void pg_text(pg_params_t *p, int i, const char *text);              /* NULL: SQL NULL */
void pg_textn(pg_params_t *p, int i, const char *text, size_t len); /* len bytes */
void pg_int(pg_params_t *p, int i, int64_t value);
void pg_bytes(pg_params_t *p, int i, const void *bytes, size_t len);
void pg_own(pg_params_t *p, int i, char *text); /* malloc'ed text, freed by pg_params_free */
void pg_params_free(pg_params_t *p);

/* A PostgreSQL array literal built element by element ("{...}", every
   element quoted): a statement inserts many rows with unnest($n::T[]). */
typedef struct pg_array_s {
  char *buf;
  size_t len, cap;
  bool failed;
} pg_array_t;

void pg_array_text(pg_array_t *a, const char *text); /* NULL: a NULL element */
void pg_array_int(pg_array_t *a, int64_t value);
/* The literal (malloc'ed, "{}" for none; NULL when out of memory), for pg_own. */
char *pg_array_end(pg_array_t *a);
/* $first .. $first + n - 1 of p: the literals of a[0 .. n - 1]
   (pg_array_end, pg_own). 0, or -1 when one was out of memory. */
int pg_own_arrays(pg_params_t *p, int first, pg_array_t *a, int n);

/* Run sql with p (NULL: none) on st's connection (the lock is held): the
   result when its status is ok (the caller PQclear's it), else NULL with
   the error on stderr naming what. */
PGresult *pg_run(store_t *st, const char *sql, const pg_params_t *p, const char *what);
/* The same for a statement without rows: 0, or -1. */
int pg_do(store_t *st, const char *sql, const pg_params_t *p, const char *what);
/* A pipeline (a batch's transaction): between the two, pg_do queues its
   statement and returns 0 unless it could not be sent, its failure
   showing at the next pg_run or at pg_pipeline_end; pg_run sends its
   statement after those queued and reads them all in one round trip,
   NULL when any failed (the first failure is reported and is
   pg_last_state's). pg_pipeline_end reads what is left: 0, or -1. */
void pg_pipeline_begin(store_t *st);
int pg_pipeline_end(store_t *st);
/* In a pipeline: sql queued as pg_do queues it, its rows left in *into
   by the next pg_run or pg_pipeline_sync (the caller clears them; *into
   stays NULL when it or a statement before it failed). pg_pipeline_sync
   reads every statement queued, in one round trip, and stays in the
   pipeline: 0, or -1 (the first failure reported). */
int pg_queue_read(store_t *st, const char *sql, const pg_params_t *p, const char *what,
                  PGresult **into);
int pg_pipeline_sync(store_t *st);
/* The session's settings (run at open and after a lost connection is
   made again): client_min_messages, jit off, synchronous_commit as the
   durability says. 0, or -1. */
int pg_session_setup(store_t *st);
/* The SQLSTATE of the last failed pg_run ("" none): deadlocks and
   serialization failures are retried, unique violations are duplicates. */
const char *pg_last_state(store_t *st);

int64_t pg_i64(const PGresult *r, int row, int col);
const char *pg_str(const PGresult *r, int row, int col); /* NULL for SQL NULL */

/* pg_alerts.c: store_ops_t's alert ops, app_versions and new_groups. */
int pg_alert_rule_add(store_t *st, const store_alert_rule_t *rule, int64_t *id);
int pg_alert_rule_delete(store_t *st, int64_t id);
int pg_alert_rules(store_t *st, store_alert_rule_fn fn, void *user);
int pg_alert_claim(store_t *st, const store_alert_t *a, int64_t *id);
int pg_alert_update(store_t *st, const store_alert_t *a);
int pg_alert_rows(store_t *st, int64_t rule_id, int64_t limit, store_alert_fn fn, void *user);
int pg_app_versions(store_t *st, const char *app, store_version_fn fn, void *user);
int pg_new_groups(store_t *st, const char *app, int64_t since_ns, int64_t scan_ns,
                  store_new_group_fn fn, void *user);

/* pg_resym.c: store_ops_t.resymbolize. */
int pg_resymbolize(store_t *st, const char *needle, const store_renamer_t *r, uint64_t *renamed);

/* pg_hang_groups.c: the group of hang h seen at ns, as
   hang_groups_assign (sqlite_hang_groups.h), inside the caller's transaction
   and under PG_LOCK_HANG_GROUPS. 0, or -1. pick_all: the groups of hangs
   hangs[0..n) picked in their order, sigs[i] (STORE_SIG_CHARS + 1 bytes)
   hangs[i]'s, the same as n calls of assign; in a pipeline, each hang's
   first read queued with what the caller queued before (the lock), one
   round trip for all, and read again when an earlier pick of them wrote
   what it read. */
int pg_hang_groups_assign(store_t *st, const store_hang_t *h, int64_t ns,
                          char sig[STORE_SIG_CHARS + 1]);
int pg_hang_groups_pick_all(store_t *st, const store_hang_t *const *hangs, size_t n, int64_t ns,
                            char *const *sigs);
int pg_hang_groups_prune(store_t *st);

/* pg_rollups.c, inside the caller's transaction: batch b's rollup
   rows (rollup_batch.h; group[i]: the group stored with its event i)
   appended to the delta tables; the delta rows folded into the rollup
   tables, in this collector's shard (wait: for PG_LOCK_FOLD, else nothing
   done when another collector holds it); the buckets of the events
   events_sql (with p) inserts into the temporary table rollup_dirty
   marked; the marked buckets made again from the raw rows (after a fold).
   0, or -1. */
int pg_rollups_add_batch(store_t *st, const store_batch_t *b, const char *const *group);
int pg_rollups_fold(store_t *st, bool wait);
int pg_rollups_mark(store_t *st, const char *events_sql, const pg_params_t *p);
int pg_rollups_rebuild(store_t *st);

/* pg_store.c: a connection to conninfo as a store of its own (no schema
   work, no fold thread), and its end. NULL when it failed (said). */
store_t *pg_connect(const char *conninfo, store_durability_t durability);
void pg_disconnect(store_t *st);

/* The database at the schema this collector knows (pg_migrations.c): 0,
   or -1 with the reason on stderr (also a database newer than this
   collector). */
int pg_migrate(store_t *st);

/* pg_fold.c: the fold thread of st (a connection of its own),
   folding every st->fold_interval_s seconds and once more when stopped.
   0, or -1 (said). */
int pg_fold_start(store_t *st);
void pg_fold_stop(store_t *st);

/* pg_partitions.c: the day partitions of received_ns's day and the
   next made when this collector has not yet (outside any transaction; a
   failure leaves the batch to the default partition); inside retention's
   transaction, the partitions of days wholly before cutoff_ns dropped
   (0, or -1). */
void pg_partitions_ensure(store_t *st, int64_t received_ns);
int pg_partitions_drop_before(store_t *st, int64_t cutoff_ns);

/* pg_query.c */
int pg_top_rows(store_t *st, const store_top_query_t *q, store_row_fn fn, void *user);
int pg_stack_rows(store_t *st, const store_top_query_t *q, store_stack_row_fn fn, void *user);
int pg_event_rows(store_t *st, const store_top_query_t *q, int64_t limit, store_event_row_fn fn,
                  void *user);
int pg_time_buckets(store_t *st, const store_top_query_t *q, int64_t bucket_ns, int64_t limit,
                    store_bucket_row_fn fn, void *user);
int pg_drops(store_t *st, const store_top_query_t *q, store_drops_t *out);
int pg_loop_totals(store_t *st, const store_top_query_t *q, store_loop_totals_t *out);
int pg_event_detail(store_t *st, int64_t id, store_event_row_fn on_event,
                    store_count_row_fn on_count, void *user);
int pg_event_states(store_t *st, int64_t id, store_state_row_fn fn, void *user);
int pg_state_rows(store_t *st, const store_top_query_t *q, store_state_sum_fn fn, void *user);
int pg_group_stacks(store_t *st, const char *const *sigs, size_t n, store_group_stack_fn fn,
                    void *user);

/* GET /healthz (store_ops_t.health): a SELECT 1 on a connection of the
   check's own within 2 s, then a ROW EXCLUSIVE lock on batches within
   500 ms (rolled back); STORE_ERROR with why ("unavailable: database:
   ...") when the server cannot be reached, refuses, or does not answer,
   or ("locked: ...") when another session holds a conflicting lock. */
int pg_health(store_t *st, char *why, size_t why_len);

#endif
