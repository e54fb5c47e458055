/*
 * sqlite_store.c - the embedded default storage backend: one SQLite
 * database in WAL mode with a busy timeout, one connection guarded by a
 * mutex (MHD's worker threads put batches, the retention thread deletes),
 * and every statement prepared once at open. This file: the schema, the
 * statements, open, ingest, retention, stats and the ops table; the reads
 * are sqlite_query.c's, re-symbolization sqlite_resym.c's (sqlite_store.h).
 *
 * A batch leaves out the stacks and groups rows the store knows stored
 * (known_rows.h): rewriting them was a third of the pages a batch wrote.
 *
 * Durability (store_durability_t, --durability): WAL with
 * synchronous=FULL (the WAL fsync'ed at every commit) or NORMAL (written at
 * every commit, fsync'ed at checkpoints). db_identity.h checks, before and
 * after each batch's commit, that the path still names the files open.
 *
 * Schema: batches (id unique), events of a batch, stacks keyed by the
 * signature of their symbolized frames (first and last seen), and
 * stack_counts (samples of a stack on a thread within an event), groups
 * (the top-stacks API's keys: every stack, and every hang group's majority
 * key, referenced by events.group_sig), the hang groups' own tables
 * (sqlite_hang_groups.c: which group a hang joins), and per batch the SDK's
 * drop counters (batches.dropped_*) and its resource's tags (batch_tags),
 * and the watched loops' stats a batch carried (loop_stats, their sum, one
 * row per batch; loop_stats_by_loop, one row per loop the batch named;
 * LOOP_SCHEMA), and the alert rules and alerts (sqlite_alerts.c).
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "collector/base/log.h"
#include "collector/model/hang_group_cands.h"
#include "collector/model/rollup.h"
#include "collector/model/rollup_batch.h"
#include "collector/store/query_sql.h"
#include "collector/store/rollup_sql.h"
#include "collector/store/sqlite/db_dir.h"
#include "collector/store/sqlite/sqlite_store.h"

static const char SCHEMA[] =
    "PRAGMA journal_mode=WAL;"
    "CREATE TABLE IF NOT EXISTS batches(id BLOB PRIMARY KEY, received_ns INTEGER NOT NULL,"
    " app TEXT, version TEXT, environment TEXT, host TEXT, pid INTEGER);"
    "CREATE INDEX IF NOT EXISTS batches_received ON batches(received_ns);"
    "CREATE TABLE IF NOT EXISTS events(id INTEGER PRIMARY KEY, batch_id BLOB NOT NULL,"
    " kind TEXT NOT NULL, start_ns INTEGER, duration_ns INTEGER, tid INTEGER,"
    " cpu_percent INTEGER, reason TEXT, dominant_stack_sig TEXT);"
    "CREATE INDEX IF NOT EXISTS events_batch ON events(batch_id);"
    "CREATE TABLE IF NOT EXISTS stacks(signature TEXT PRIMARY KEY, frames TEXT NOT NULL,"
    " first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS stack_counts(event_id INTEGER NOT NULL, stack_sig TEXT NOT NULL,"
    " tid INTEGER, samples INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS stack_counts_event ON stack_counts(event_id);"
    "CREATE TABLE IF NOT EXISTS groups(signature TEXT PRIMARY KEY, frames TEXT NOT NULL,"
    " first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS batch_tags(batch_id BLOB NOT NULL, key TEXT NOT NULL,"
    " value TEXT NOT NULL, PRIMARY KEY(batch_id, key, value)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS batch_tags_pair ON batch_tags(key, value);";

/* Columns newer than the database may be: each is added when missing (the
   error of an existing column is ignored). events.group_sig came with the
   groups (its index follows), events.loop_name (NULL in events stored
   before: their loop is unknown) with the SDK's loop names, stacks.stack_end (NULL: complete, or
   not said) with stack ends, batches.dropped_* (the SDK's DropCounters, 0 in batches stored before)
   with the drops API; batch_tags, also newer, is made by SCHEMA. */
#define ADD_DROPPED(reason)                                                                        \
  "ALTER TABLE batches ADD COLUMN dropped_" reason " INTEGER NOT NULL DEFAULT 0"
static const char *const ADD_COLUMNS[] = {
    "ALTER TABLE events ADD COLUMN group_sig TEXT",
    "ALTER TABLE stacks ADD COLUMN stack_end TEXT",
    "ALTER TABLE events ADD COLUMN label TEXT",
    "ALTER TABLE events ADD COLUMN loop_name TEXT",
    ADD_DROPPED("rate_limited"),
    ADD_DROPPED("queue_full"),
    ADD_DROPPED("sink_failed"),
    ADD_DROPPED("spool_quota"),
    ADD_DROPPED("oversized"),
};
/* stack_counts.cpu_us (a CPU event's CPU time per stack, store.h) came
   with CPU profiles; rows stored before have NULL there and count by
   samples. Idempotent: adding a column that exists fails, and that is
   fine. */
static void add_cpu_weights(sqlite3 *db) {
  sqlite3_exec(db, "ALTER TABLE stack_counts ADD COLUMN cpu_us INTEGER", NULL, NULL, NULL);
}

/* stack_counts by signature (re-symbolization, the alerts' new groups):
   an index the fold fills, not each batch. Filled by each batch, the
   index would take a batch's rows at as many leaves as the batch has
   stacks (a page of the write-ahead log each, over half of a batch's
   pages); so a row comes in with sig_indexed NULL, listed at the tail of
   stack_counts_unindexed (one page a batch), and sqlite_index_counts
   sets sig_indexed = 1 for every row listed, which moves it into
   stack_counts_sig_indexed: once a fold interval for all the batches
   since, and before any read by signature (sqlite_store.h). A read by
   signature names sig_indexed = 1, the term that lets SQLite use the
   partial index. Setting the flag does not grow a row (the integer 1 is
   stored in the record's header). A database made before the column
   gets it with every row it holds marked indexed and loses its full
   index, in one transaction before the partial indexes are made: each
   index then built whole from the table, far faster than the fold
   marking a few million rows one by one under the store's lock. */
static const char COUNTS_SIG_SCHEMA[] =
    "CREATE INDEX IF NOT EXISTS stack_counts_unindexed ON stack_counts(event_id)"
    " WHERE sig_indexed IS NULL;"
    "CREATE INDEX IF NOT EXISTS stack_counts_sig_indexed ON stack_counts(stack_sig)"
    " WHERE sig_indexed = 1;";
static int add_counts_sig_index(sqlite3 *db) {
  if (sqlite3_exec(db,
                   "BEGIN; ALTER TABLE stack_counts ADD COLUMN sig_indexed INTEGER;"
                   " DROP INDEX IF EXISTS stack_counts_sig;"
                   " UPDATE stack_counts SET sig_indexed = 1",
                   NULL, NULL, NULL) != SQLITE_OK) {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL); /* the column is there: nothing to move */
    return sqlite3_exec(db, COUNTS_SIG_SCHEMA, NULL, NULL, NULL);
  }
  int rc = sqlite3_exec(db, COUNTS_SIG_SCHEMA, NULL, NULL, NULL);
  return sqlite3_exec(db, rc == SQLITE_OK ? "COMMIT" : "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK
             ? rc
             : SQLITE_ERROR;
}

/* The loop stats of a batch, summed over its loops and per loop it named
   (both newer than the first databases: made when missing; batches stored
   before loop_stats_by_loop have none there). u0..u8 are the units by
   duration bucket. */
#define LOOP_VALUES                                                                                \
  " watched_ns INTEGER NOT NULL, busy_ns INTEGER NOT NULL, u0 INTEGER NOT NULL,"                   \
  " u1 INTEGER NOT NULL, u2 INTEGER NOT NULL, u3 INTEGER NOT NULL, u4 INTEGER NOT NULL,"           \
  " u5 INTEGER NOT NULL, u6 INTEGER NOT NULL, u7 INTEGER NOT NULL, u8 INTEGER NOT NULL"
static const char LOOP_SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS loop_stats(batch_id BLOB PRIMARY KEY," LOOP_VALUES
    ") WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS loop_stats_by_loop(batch_id BLOB NOT NULL, loop_name TEXT NOT "
    "NULL," LOOP_VALUES ", PRIMARY KEY(batch_id, loop_name)) WITHOUT ROWID;";
_Static_assert(STORE_LOOP_BUCKETS == 9, "LOOP_SCHEMA has one column per bucket");
static const char GROUP_SIG_INDEX[] =
    "CREATE INDEX IF NOT EXISTS events_group ON events(group_sig)";

/* The read statements' filters: query_sql.h, in SQLite's slots
   (sqlite_store.h). */
#define SQLITE_TAGS_JSON                                                                           \
  "(SELECT json_group_array(json_object('key', t.key, 'value', t.value))"                          \
  " FROM batch_tags t WHERE t.batch_id = b.id)"

#define DROPPED_SUMS                                                                               \
  "coalesce(sum(b.dropped_rate_limited), 0), coalesce(sum(b.dropped_queue_full), 0),"              \
  " coalesce(sum(b.dropped_sink_failed), 0), coalesce(sum(b.dropped_spool_quota), 0),"             \
  " coalesce(sum(b.dropped_oversized), 0)"

/* The loop stats of a table of loop_stats' columns (query_sql.h), summed
   over the batches of the filters. */
#define LOOP_SUMS_FROM(table)                                                                      \
  "SELECT total(l.watched_ns), total(l.busy_ns), total(l.u0), total(l.u1), total(l.u2),"           \
  " total(l.u3), total(l.u4), total(l.u5), total(l.u6), total(l.u7), total(l.u8), count(*)"        \
  " FROM (SELECT l.* FROM " table                                                                  \
  " l JOIN batches b ON b.id = l.batch_id WHERE 1" QSQL_DROPS_FILTERS QSQL_NEWEST(                 \
      "b.received_ns") ") l"

/* Top-stacks and stack rows read the day rows of ?20..?21, the 10-minute
   rows of ?26..?27 and ?28..?29 (rollup_plan; each level's with the delta
   rows not folded yet, rollup_sql.h) and the raw events starting
   in ?22..?23 and ?24..?25: the same columns either way, summed per group,
   version, label and duration bin. */
#define GROUP_PART(table, kinds, lo, hi)                                                           \
  "SELECT r.group_sig AS g, r.version AS version, r.label AS label, r.dbin AS dbin,"               \
  " r.events AS events, r.samples AS samples, r.total_ns AS total_ns, r.first_ns AS first_ns,"     \
  " r.last_ns AS last_ns, r.max_ns AS max_ns, r.cpu_us AS cpu_us FROM " table " r WHERE " kinds    \
  QSQL_RANGE(lo, hi) QSQL_ROLLUP_FILTERS
#define TOP_SQL(kinds, raw, majority, impact)                                                      \
  QSQL_TOP_ROWS_CAPPED(                                                                            \
      GROUP_PART(ROLLUP_GROUPS_DAY, kinds, 20, 21) " UNION ALL " GROUP_PART(                       \
          ROLLUP_GROUPS_10M, kinds, 26, 27) " UNION ALL " GROUP_PART(ROLLUP_GROUPS_10M, kinds, 28, \
                                                                     29) " UNION ALL " raw,        \
      impact, majority, "x.g, x.version, x.label, x.dbin", "")
#define STACK_PART(table, lo, hi)                                                                  \
  "SELECT r.stack_sig AS s, r.samples AS n, r.cpu_us AS cpu, r.wall_ns AS wall,"                   \
  " r.first_ns AS first, r.last_end_ns AS last_end FROM " table " r"                               \
  " WHERE " QSQL_KIND_FILTER("r") QSQL_RANGE(lo, hi) QSQL_ROLLUP_FILTERS QSQL_GROUP_FILTER("r")
#define RAW_HANG(lo, hi)                                                                           \
  "SELECT e.group_sig, coalesce(b.version, ''), coalesce(e.label, ''), perf_dbin(e.duration_ns),"  \
  " 1, (SELECT coalesce(sum(c.samples), 0) FROM stack_counts c WHERE c.event_id = e.id),"          \
  " e.duration_ns, e.start_ns, e.start_ns, e.duration_ns, 0 FROM events e"                         \
  " JOIN batches b ON b.id = e.batch_id WHERE e.kind IN ('hang', 'fatal_hang')"                    \
  " AND e.group_sig IS NOT NULL" QSQL_RAW_RANGE(lo, hi) QSQL_TOP_FILTERS
#define RAW_CPU(lo, hi)                                                                            \
  "SELECT j.sig, j.version, j.label, perf_dbin(j.d), 1, sum(j.n), j.d, j.s, j.s, j.d, sum(j.w)"    \
  " FROM (SELECT e.id AS id, c.stack_sig AS sig, coalesce(b.version, '') AS version,"              \
  " coalesce(e.label, '') AS label, e.duration_ns AS d, e.start_ns AS s, c.samples AS "            \
  "n, " ROLLUP_CPU(                                                                                \
      "c") " AS w FROM events e"                                                                   \
           " JOIN batches b ON b.id = e.batch_id JOIN stack_counts c ON c.event_id = e.id"         \
           " WHERE " QSQL_CPU_KIND("e") QSQL_RAW_RANGE(lo, hi) QSQL_TOP_FILTERS QSQL_RAW_BOUND     \
      ") j GROUP BY j.id, j.sig"
#define RAW_STACK(lo, hi)                                                                          \
  "SELECT c.stack_sig, c.samples, " ROLLUP_CPU("c") ", " ROLLUP_WALL_SHARE(                        \
      "c", "e") ", e.start_ns, e.start_ns + e.duration_ns FROM events e JOIN batches b ON b.id = " \
                "e.batch_id"                                                                       \
                " JOIN stack_counts c ON c.event_id = e.id WHERE " QSQL_KIND_FILTER("e")           \
                    QSQL_RAW_RANGE(lo, hi) QSQL_TOP_FILTERS QSQL_GROUP_FILTER("e")

/* The stack rows' sources in the order a bounded read takes them. */
#define STACK_PARTS                                                                                \
  STACK_PART(ROLLUP_STACKS_DAY, 20, 21)                                                            \
  " UNION ALL " STACK_PART(ROLLUP_STACKS_10M, 26, 27) " UNION ALL " STACK_PART(                    \
      ROLLUP_STACKS_10M, 28, 29) " UNION ALL " RAW_STACK(22, 23) " UNION ALL " RAW_STACK(24, 25)

#define GROUP_EVENTS STORE_STR(STORE_GROUP_STACKS_EVENTS)
#define GROUP_ROWS STORE_STR(STORE_GROUP_STACKS_ROWS)

#define LAST_SEEN_MOVE STORE_STR(STORE_LAST_SEEN_MOVE)

static const char *const STMT_SQL[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_INSERT_BATCH] = "INSERT INTO batches(id, received_ns, app, version, environment, host, pid,"
                        " dropped_rate_limited, dropped_queue_full, dropped_sink_failed,"
                        " dropped_spool_quota, dropped_oversized)"
                        " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [ST_INSERT_TAG] = "INSERT OR IGNORE INTO batch_tags(batch_id, key, value) VALUES(?1, ?2, ?3)",
    /* A stored row is rewritten only when its last_seen is over
       STORE_LAST_SEEN_MOVE behind (known_rows.h): rewriting a row writes
       its pages to the WAL. */
    [ST_UPSERT_STACK] = "INSERT INTO stacks(signature, frames, first_seen, last_seen, stack_end)"
                        " VALUES(?1, ?2, ?3, ?3, ?4) ON CONFLICT(signature) DO UPDATE SET"
                        " last_seen = excluded.last_seen"
                        " WHERE last_seen < excluded.last_seen - " LAST_SEEN_MOVE,
    [ST_INSERT_EVENT] = "INSERT INTO events(batch_id, kind, start_ns, duration_ns, tid,"
                        " cpu_percent, reason, dominant_stack_sig, group_sig, label, loop_name)"
                        " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [ST_INSERT_COUNT] = "INSERT INTO stack_counts(event_id, stack_sig, tid, samples, cpu_us)"
                        " VALUES(?1, ?2, ?3, ?4, ?5)",
    /* COUNTS_PER_INSERT rows of ST_INSERT_COUNT in one statement. */
    [ST_INSERT_COUNTS] = "INSERT INTO stack_counts(event_id, stack_sig, tid, samples, cpu_us)"
                         " VALUES(?1, ?2, ?3, ?4, ?5), (?6, ?7, ?8, ?9, ?10),"
                         " (?11, ?12, ?13, ?14, ?15), (?16, ?17, ?18, ?19, ?20),"
                         " (?21, ?22, ?23, ?24, ?25), (?26, ?27, ?28, ?29, ?30),"
                         " (?31, ?32, ?33, ?34, ?35), (?36, ?37, ?38, ?39, ?40)",
    [ST_COUNT_ROWS] = "SELECT (SELECT count(*) FROM batches), (SELECT count(*) FROM events),"
                      " (SELECT count(*) FROM stacks), (SELECT count(*) FROM stack_counts)",
    [ST_UPSERT_GROUP] = "INSERT INTO groups(signature, frames, first_seen, last_seen)"
                        " VALUES(?1, ?2, ?3, ?3) ON CONFLICT(signature) DO UPDATE SET"
                        " last_seen = excluded.last_seen"
                        " WHERE last_seen < excluded.last_seen - " LAST_SEEN_MOVE,
    [ST_DATA_VERSION] = "PRAGMA data_version",
    [ST_INDEX_COUNTS] = "UPDATE stack_counts SET sig_indexed = 1 WHERE sig_indexed IS NULL",
    [ST_UNINDEXED_BEFORE] =
        "SELECT EXISTS (SELECT 1 FROM stack_counts c"
        " JOIN events e ON e.id = c.event_id JOIN batches b ON b.id = e.batch_id"
        " WHERE c.sig_indexed IS NULL AND b.received_ns < ?1)",
    [ST_TOP_HANG] =
        TOP_SQL("r.kind IN ('hang', 'fatal_hang')", RAW_HANG(22, 23) " UNION ALL " RAW_HANG(24, 25),
                "(SELECT p.samples FROM hang_group_path p WHERE p.group_sig = x.g)", "x.total_ns"),
    [ST_TOP_CPU] = TOP_SQL(QSQL_CPU_KIND("r"), RAW_CPU(22, 23) " UNION ALL " RAW_CPU(24, 25),
                           "NULL", "x.cpu_us"),
    [ST_STACK_ROWS] = QSQL_STACK_ROWS_CAPPED(
        "SELECT x.s AS s, sum(x.n) AS n, sum(x.cpu) AS cpu, coalesce(sum(x.wall), 0) AS wall,"
        " min(x.first) AS first, max(x.last_end) AS last_end, count(*) AS rows"
        " FROM (" QSQL_BOUNDED(STACK_PARTS) ") x GROUP BY x.s",
        ""),
    [ST_ANY_EVENT] = "SELECT EXISTS (SELECT 1 FROM events WHERE start_ns >= ?1 AND start_ns <= ?2)",
    [ST_EVENT_ROWS] = "SELECT " QSQL_EVENT_COLUMNS(
        SQLITE_TAGS_JSON) " FROM events e JOIN batches b ON b.id = e.batch_id"
                          " WHERE " QSQL_LISTED_KIND("e") QSQL_TOP_FILTERS QSQL_LOOP_FILTER
    " ORDER BY e.start_ns DESC, e.id DESC LIMIT ?7",
    [ST_EVENT_ONE] = "SELECT " QSQL_EVENT_COLUMNS(
        SQLITE_TAGS_JSON) " FROM events e JOIN batches b ON b.id = e.batch_id"
                          " WHERE e.id = ?1",
    /* One row per signature and thread: a database of a collector that
       stored a row per device stack may hold several. */
    [ST_EVENT_COUNTS] = "SELECT c.stack_sig, s.frames, c.tid, sum(c.samples), sum(c.cpu_us)"
                        " FROM stack_counts c LEFT JOIN stacks s ON s.signature = c.stack_sig"
                        " WHERE c.event_id = ?1 GROUP BY c.stack_sig, c.tid"
                        " ORDER BY coalesce(sum(c.cpu_us), 0) DESC, sum(c.samples) DESC,"
                        " min(c.rowid)",
    [ST_DROPS] =
        "SELECT " DROPPED_SUMS
        ", count(*) FROM (SELECT b.* FROM batches b WHERE 1" QSQL_DROPS_FILTERS QSQL_NEWEST(
            "b.received_ns") ") b",
    /* ?7 the bucket's nanoseconds, ?8 the most buckets (start_ns >= ?4 >= 0:
       the division rounds down). total(): a REAL sum, which cannot overflow. */
    [ST_TIME_BUCKETS] =
        "SELECT x.k, count(*), total(x.d) FROM (SELECT e.start_ns / ?7 AS k,"
        " e.duration_ns AS d FROM events e JOIN batches b ON b.id = e.batch_id"
        " WHERE " QSQL_KIND_FILTER("e")
            QSQL_TOP_FILTERS QSQL_NEWEST("e.start_ns") ") x GROUP BY 1 ORDER BY 1 LIMIT ?8",
    /* ?8: a group (hang) or a stack (cpu), NULL any (sqlite_states.c holds
       the table). */
    [ST_STATE_ROWS] = "SELECT x.state, x.syscall, x.fd, sum(x.samples), count(*) FROM (SELECT"
                      " x.state AS state, x.syscall AS syscall, x.fd AS fd, x.samples AS samples"
                      " FROM event_states x"
                      " JOIN events e ON e.id = x.event_id JOIN batches b ON b.id = e.batch_id"
                      " WHERE " QSQL_KIND_FILTER("e") QSQL_TOP_FILTERS
    " AND (?8 IS NULL OR e.group_sig = ?8 OR EXISTS (SELECT 1 FROM"
    " stack_counts c WHERE c.event_id = e.id AND c.stack_sig = ?8))" QSQL_NEWEST(
        "e.start_ns") ") x GROUP BY 1, 2, 3 ORDER BY 4 DESC, 1, 2, 3",
    [ST_INSERT_LOOP] = "INSERT INTO loop_stats(batch_id, watched_ns, busy_ns, u0, u1, u2, u3, u4,"
                       " u5, u6, u7, u8) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [ST_INSERT_LOOP_NAMED] = "INSERT INTO loop_stats_by_loop(batch_id, loop_name, watched_ns,"
                             " busy_ns, u0, u1, u2, u3, u4, u5, u6, u7, u8) VALUES(?1, ?13, ?2,"
                             " ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    /* Values <= 2^48 each: the integer sums fit up to 2^15 batches a
       query; total() (REAL) is exact to 2^53 and never overflows. */
    [ST_LOOP_SUMS] = LOOP_SUMS_FROM("loop_stats"),
    [ST_LOOP_SUMS_OF_LOOP] = LOOP_SUMS_FROM(QSQL_STATS_OF_LOOP),
    [ST_HANG_COUNT] =
        "SELECT count(*) FROM (SELECT 1 FROM events e JOIN batches b ON b.id ="
        " e.batch_id WHERE e.kind IN ('hang', 'fatal_hang')" QSQL_TOP_FILTERS QSQL_LOOP_FILTER
            QSQL_NEWEST("e.start_ns") ") h",
    /* The stack of signature ?1; then the heaviest stacks of a few events
       of group ?1 (store.h group_stacks), the frames joined to the few
       rows kept. */
    [ST_STACK_FRAMES] = "SELECT frames FROM stacks WHERE signature = ?1",
    [ST_GROUP_STACKS] = "SELECT s.frames FROM (SELECT c.samples AS w, c.stack_sig AS sig"
                        " FROM (SELECT id FROM events WHERE group_sig = ?1 LIMIT " GROUP_EVENTS
                        ") e JOIN stack_counts c ON c.event_id = e.id"
                        " ORDER BY c.samples DESC LIMIT " GROUP_ROWS ") x"
                        " JOIN stacks s ON s.signature = x.sig ORDER BY x.w DESC",
};

void sqlite_report(store_t *st, const char *what) {
  collector_log("sqlite %s: %s\n", what, sqlite3_errmsg(st->db));
}

/* Run a prepared statement that returns no rows, then reset it. */
int sqlite_step_done(store_t *st, enum stmt_id id) {
  sqlite3_stmt *s = st->stmt[id];
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static void empty_log(store_t *st);

static void sqlite_close(store_t *st) {
  if (!st) return;
  sqlite_fold_stop(st); /* its last fold first */
  char why[64];
  if (st->identity && sqlite_check(st, why, sizeof why) != STORE_OK)
    empty_log(st); /* what retention or renames wrote since */
  for (int i = 0; i < ST_COUNT; i++)
    sqlite3_finalize(st->stmt[i]);
  for (int i = 0; i < QSQL_RETENTION_STEPS; i++)
    sqlite3_finalize(st->retention[i]);
  hang_groups_close(st->hang);
  store_states_close(st->states);
  store_rollups_close(st->rollups);
  store_known_free(st->known_stacks);
  store_known_free(st->known_groups);
  sqlite_health_close(st);
  pthread_mutex_destroy(&st->health_lock);
  sqlite3_close(st->db);
  db_identity_free(st->identity);
  pthread_mutex_destroy(&st->lock);
  free(st->path);
  free(st);
}

/* Retention's steps (query_sql.h); last_seen trails the latest batch by
   up to STORE_LAST_SEEN_STEP (known_rows.h). */
static const char *const RETENTION_SQL[] = QSQL_RETENTION(" - " STORE_STR(STORE_LAST_SEEN_STEP));
_Static_assert(sizeof RETENTION_SQL / sizeof RETENTION_SQL[0] == QSQL_RETENTION_STEPS,
               "one SQL a step");

static int prepare_all(store_t *st) {
  for (int i = 0; i < ST_COUNT + QSQL_RETENTION_STEPS; i++) {
    const char *sql = i < ST_COUNT ? STMT_SQL[i] : RETENTION_SQL[i - ST_COUNT];
    sqlite3_stmt **s = i < ST_COUNT ? &st->stmt[i] : &st->retention[i - ST_COUNT];
    if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, s, NULL) != SQLITE_OK) {
      sqlite_report(st, "prepare");
      return STORE_ERROR;
    }
  }
  return STORE_OK;
}

/* WAL pages between automatic checkpoints with synchronous=FULL. Batch
   after batch dirties the same pages (rollup rows, index tails): a
   checkpoint copies each page once however many commits wrote it, so the
   longer log copies fewer pages a batch into the database and reads fewer
   back from the log (collector_bench: 225 instead of 256 writes and 24
   instead of 56 reads a batch). Every commit is fsync'ed with FULL, so
   the checkpoints' spacing loses nothing on a crash; with NORMAL the
   commits since the last checkpoint are what a power loss takes, and
   SQLite's default (1000 pages) stays. */
#define FULL_CHECKPOINT_PAGES "8000"

/* synchronous=FULL or NORMAL (the journal is WAL either way). */
static int set_durability(store_t *st, store_durability_t durability) {
  const char *sql = durability == STORE_DURABLE_FULL
                        ? "PRAGMA synchronous=FULL;"
                          " PRAGMA wal_autocheckpoint=" FULL_CHECKPOINT_PAGES
                        : "PRAGMA synchronous=NORMAL";
  if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) == SQLITE_OK) return STORE_OK;
  sqlite_report(st, "synchronous");
  return STORE_ERROR;
}

/* The files as opened: the schema's statements created the database and
   its write-ahead log. The paths are stat'ed just after; SQLite's own
   check of its descriptor against the path (SQLITE_FCNTL_HAS_MOVED)
   closes the gap for the database between its open and that stat. */
static int take_identity(store_t *st) {
  char why[512];
  int moved = 0;
  if (!(st->identity = db_identity_take(st->path, why, sizeof why))) {
    collector_log("%s\n", why);
    return STORE_ERROR;
  }
  if (sqlite3_file_control(st->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved) {
    collector_log("database %s was moved or replaced while it was opened\n", st->path);
    return STORE_ERROR;
  }
  return STORE_OK;
}

static int sqlite_open(const char *path, const store_config_t *config, store_t **out) {
  store_durability_t durability = config->durability;
  *out = NULL;
  store_t *st = calloc(1, sizeof *st);
  if (!st || !(st->path = strdup(path))) {
    free(st);
    return STORE_ERROR;
  }
  pthread_mutex_init(&st->lock, NULL);
  pthread_mutex_init(&st->health_lock, NULL);
  st->read_rows_max = config->read_rows_max ? config->read_rows_max : STORE_READ_ROWS_MAX;
  st->fold_interval_s = config->fold_interval_s ? config->fold_interval_s : STORE_FOLD_INTERVAL_S;
  st->unfolded = true;
  if (!(st->known_stacks = store_known_new()) || !(st->known_groups = store_known_new())) {
    sqlite_close(st);
    return STORE_ERROR;
  }
  char why[4200];
  if (db_dir_prepare(path, why, sizeof why) != 0) {
    collector_log("%s", why);
    sqlite_close(st);
    return STORE_ERROR;
  }
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK) {
    int err = st->db ? sqlite3_system_errno(st->db) : 0;
    collector_log("database %s: cannot open it: %s%s%s", path,
                  st->db ? sqlite3_errmsg(st->db) : "out of memory", err ? ": " : "",
                  err ? strerror(err) : "");
    sqlite_close(st);
    return STORE_ERROR;
  }
  sqlite3_busy_timeout(st->db, SQLITE_BUSY_TIMEOUT_MS);
  char *err = NULL;
  if (sqlite3_exec(st->db, SCHEMA, NULL, NULL, &err) != SQLITE_OK) {
    collector_log("sqlite schema: %s\n", err ? err : "?");
    sqlite3_free(err);
    sqlite_close(st);
    return STORE_ERROR;
  }
  for (size_t i = 0; i < sizeof ADD_COLUMNS / sizeof ADD_COLUMNS[0]; i++)
    sqlite3_exec(st->db, ADD_COLUMNS[i], NULL, NULL, NULL); /* fails when present: fine */
  add_cpu_weights(st->db);
  if (add_counts_sig_index(st->db) != SQLITE_OK ||
      sqlite3_exec(st->db, GROUP_SIG_INDEX, NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(st->db, LOOP_SCHEMA, NULL, NULL, NULL) != SQLITE_OK ||
      sqlite_alerts_schema(st->db) != SQLITE_OK) {
    sqlite_report(st, "schema");
    sqlite_close(st);
    return STORE_ERROR;
  }
  if (hang_groups_open(st->db, &st->hang) != SQLITE_OK) {
    sqlite_report(st, "hang groups");
    sqlite_close(st);
    return STORE_ERROR;
  }
  if (store_states_open(st->db, &st->states) != SQLITE_OK) {
    sqlite_report(st, "thread states");
    sqlite_close(st);
    return STORE_ERROR;
  }
  if (store_rollups_open(st->db, &st->rollups) != SQLITE_OK) {
    sqlite_report(st, "rollups");
    sqlite_close(st);
    return STORE_ERROR;
  }
  if (prepare_all(st) != STORE_OK || set_durability(st, durability) != STORE_OK ||
      take_identity(st) != STORE_OK || sqlite_fold_start(st) != STORE_OK) {
    sqlite_close(st);
    return STORE_ERROR;
  }
  *out = st;
  return STORE_OK;
}

static int insert_batch_row(store_t *st, const store_batch_t *b) {
  sqlite3_stmt *s = st->stmt[ST_INSERT_BATCH];
  sqlite3_bind_blob(s, 1, b->id, STORE_BATCH_ID_BYTES, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, b->received_ns);
  sqlite3_bind_text(s, 3, b->app, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, b->version, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 5, b->environment, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 6, b->host, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 7, b->pid);
  for (int i = 0; i < STORE_DROP_COUNT; i++)
    sqlite3_bind_int64(s, 8 + i, (sqlite3_int64)b->drops[i]); /* <= STORE_MAX_DROPS */
  int rc = sqlite_step_done(st, ST_INSERT_BATCH);
  s = st->stmt[ST_INSERT_TAG];
  for (size_t i = 0; rc == SQLITE_OK && i < b->n_tags; i++) {
    sqlite3_bind_blob(s, 1, b->id, STORE_BATCH_ID_BYTES, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, b->tags[i].key, (int)b->tags[i].key_len, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, b->tags[i].value, -1, SQLITE_STATIC);
    rc = sqlite_step_done(st, ST_INSERT_TAG);
  }
  return rc;
}

/* A keyed row (a stack, or a group) seen at ns: inserted, or its
   last_seen moved (stmt ST_UPSERT_STACK or ST_UPSERT_GROUP). */
static int upsert_keyed(store_t *st, enum stmt_id stmt, const char *signature, const char *json,
                        int64_t ns, const char *end) {
  sqlite3_stmt *s = st->stmt[stmt];
  if (stmt == ST_UPSERT_STACK && end) sqlite3_bind_text(s, 4, end, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 1, signature, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 2, json, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 3, ns);
  return sqlite_step_done(st, stmt);
}

/* The batch's stacks and groups but those known stored. */
static int upsert_stacks_and_groups(store_t *st, const store_batch_t *b) {
  int rc = SQLITE_OK;
  for (size_t i = 0; rc == SQLITE_OK && i < b->n_stacks; i++)
    if (!store_known_fresh(st->known_stacks, b->stacks[i].signature, b->received_ns))
      rc = upsert_keyed(st, ST_UPSERT_STACK, b->stacks[i].signature, b->stacks[i].frames_json,
                        b->received_ns, b->stacks[i].end);
  for (size_t i = 0; rc == SQLITE_OK && i < b->n_groups; i++)
    if (!store_known_fresh(st->known_groups, b->groups[i].signature, b->received_ns))
      rc = upsert_keyed(st, ST_UPSERT_GROUP, b->groups[i].signature, b->groups[i].names_json,
                        b->received_ns, NULL);
  return rc;
}

/* Rows known stored are forgotten when another connection committed
   since this one's last transaction (PRAGMA data_version moves only for
   other connections' commits). Inside the write transaction. */
static int forget_known_if_changed(store_t *st) {
  sqlite3_stmt *s = st->stmt[ST_DATA_VERSION];
  int rc = sqlite3_step(s);
  sqlite3_int64 version = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
  sqlite3_reset(s);
  if (rc != SQLITE_ROW) return rc;
  if (version != st->data_version) sqlite_forget_known(st);
  st->data_version = version;
  return SQLITE_OK;
}

/* After the COMMIT: the rows the batch wrote known stored (those it left
   out keep the arrival of the batch that wrote them). */
static void note_written(store_t *st, const store_batch_t *b, char (*picked)[STORE_SIG_CHARS + 1]) {
  int64_t ns = b->received_ns;
  for (size_t i = 0; i < b->n_stacks; i++)
    if (!store_known_fresh(st->known_stacks, b->stacks[i].signature, ns))
      store_known_note(st->known_stacks, b->stacks[i].signature, ns);
  for (size_t i = 0; i < b->n_groups; i++)
    if (!store_known_fresh(st->known_groups, b->groups[i].signature, ns))
      store_known_note(st->known_groups, b->groups[i].signature, ns);
  for (size_t i = 0; i < b->n_events; i++)
    if (b->events[i].hang && !store_known_fresh(st->known_groups, picked[i], ns))
      store_known_note(st->known_groups, picked[i], ns);
}

int sqlite_index_counts(store_t *st) {
  return sqlite_step_done(st, ST_INDEX_COUNTS);
}

int sqlite_index_counts_before(store_t *st, int64_t ns, bool writable) {
  sqlite3_stmt *s = st->stmt[ST_UNINDEXED_BEFORE];
  sqlite3_bind_int64(s, 1, ns);
  int rc = sqlite3_step(s);
  bool pending = rc == SQLITE_ROW && sqlite3_column_int(s, 0);
  sqlite3_reset(s);
  if (rc != SQLITE_ROW) return rc;
  if (!pending) return SQLITE_OK;
  if (!writable) return SQLITE_READONLY; /* nothing into a file no path names */
  rc = sqlite_step_done(st, ST_BEGIN);
  if (rc == SQLITE_OK) rc = sqlite_index_counts(st);
  if (rc == SQLITE_OK) return sqlite_step_done(st, ST_COMMIT);
  sqlite_step_done(st, ST_ROLLBACK);
  return rc;
}

void sqlite_forget_known(store_t *st) {
  store_known_clear(st->known_stacks);
  store_known_clear(st->known_groups);
  hang_groups_forget(st->hang);
}

#define COUNTS_PER_INSERT 8 /* ST_INSERT_COUNTS' rows */

/* Count c of the event as row `row` of s's VALUES. */
static void bind_count(sqlite3_stmt *s, int row, sqlite3_int64 event_id,
                       const store_stack_count_t *c) {
  int at = 5 * row;
  sqlite3_bind_int64(s, at + 1, event_id);
  sqlite3_bind_text(s, at + 2, c->stack_sig, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, at + 3, c->tid);
  sqlite3_bind_int64(s, at + 4, c->samples);
  if (c->cpu_us >= 0)
    sqlite3_bind_int64(s, at + 5, c->cpu_us);
  else
    sqlite3_bind_null(s, at + 5);
}

/* The event's counts in their order, COUNTS_PER_INSERT rows a statement
   and the rest one at a time: a statement's run (its cursors opened, the
   table's last rowid found, its halt) cost as much as the row's insert. */
static int insert_counts(store_t *st, sqlite3_int64 event_id, const store_event_t *e) {
  size_t i = 0;
  for (; i + COUNTS_PER_INSERT <= e->n_counts; i += COUNTS_PER_INSERT) {
    for (int k = 0; k < COUNTS_PER_INSERT; k++)
      bind_count(st->stmt[ST_INSERT_COUNTS], k, event_id, &e->counts[i + (size_t)k]);
    int rc = sqlite_step_done(st, ST_INSERT_COUNTS);
    if (rc != SQLITE_OK) return rc;
  }
  for (; i < e->n_counts; i++) {
    bind_count(st->stmt[ST_INSERT_COUNT], 0, event_id, &e->counts[i]);
    int rc = sqlite_step_done(st, ST_INSERT_COUNT);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

/* The events, each hang with a key in the group picked for it
   (picked[i]). */
static int insert_events(store_t *st, const store_batch_t *b, char (*picked)[STORE_SIG_CHARS + 1]) {
  sqlite3_stmt *s = st->stmt[ST_INSERT_EVENT];
  for (size_t i = 0; i < b->n_events; i++) {
    const store_event_t *e = &b->events[i];
    const char *group_sig = e->group_sig;
    if (e->hang) {
      int rc = hang_groups_assign(st->hang, e->hang, b->received_ns, st->known_groups, picked[i]);
      if (rc != SQLITE_OK) return rc;
      group_sig = picked[i];
    }
    sqlite3_bind_blob(s, 1, b->id, STORE_BATCH_ID_BYTES, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, e->kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, e->start_ns);
    sqlite3_bind_int64(s, 4, e->duration_ns);
    sqlite3_bind_int64(s, 5, e->tid);
    sqlite3_bind_int64(s, 6, e->cpu_percent);
    sqlite3_bind_text(s, 7, e->reason, -1, SQLITE_STATIC);
    if (e->dominant_stack_sig)
      sqlite3_bind_text(s, 8, e->dominant_stack_sig, -1, SQLITE_STATIC);
    else
      sqlite3_bind_null(s, 8);
    if (group_sig)
      sqlite3_bind_text(s, 9, group_sig, -1, SQLITE_TRANSIENT);
    else
      sqlite3_bind_null(s, 9);
    if (e->label && e->label[0])
      sqlite3_bind_text(s, 10, e->label, -1, SQLITE_STATIC);
    else
      sqlite3_bind_null(s, 10);
    if (e->loop && e->loop[0])
      sqlite3_bind_text(s, 11, e->loop, -1, SQLITE_STATIC);
    else
      sqlite3_bind_null(s, 11);
    int rc = sqlite_step_done(st, ST_INSERT_EVENT);
    sqlite3_int64 id = sqlite3_last_insert_rowid(st->db);
    if (rc == SQLITE_OK) rc = insert_counts(st, id, e);
    if (rc == SQLITE_OK) rc = store_states_insert(st->states, id, e);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

/* One row of loop stats: the batch's sum (ST_INSERT_LOOP, loop NULL) or
   a named loop's (ST_INSERT_LOOP_NAMED). */
static int insert_loop_row(store_t *st, enum stmt_id id, const store_batch_t *b, const char *loop,
                           const store_loop_stats_t *l) {
  sqlite3_stmt *s = st->stmt[id];
  sqlite3_bind_blob(s, 1, b->id, STORE_BATCH_ID_BYTES, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, (sqlite3_int64)l->watched_ns); /* <= STORE_MAX_LOOP_VALUE */
  sqlite3_bind_int64(s, 3, (sqlite3_int64)l->busy_ns);
  for (int i = 0; i < STORE_LOOP_BUCKETS; i++)
    sqlite3_bind_int64(s, 4 + i, (sqlite3_int64)l->units[i]);
  if (loop) sqlite3_bind_text(s, 13, loop, -1, SQLITE_STATIC);
  return sqlite_step_done(st, id);
}

static int insert_loop_stats(store_t *st, const store_batch_t *b) {
  int rc = b->loop_stats ? insert_loop_row(st, ST_INSERT_LOOP, b, NULL, b->loop_stats) : SQLITE_OK;
  for (size_t i = 0; rc == SQLITE_OK && i < b->n_loops; i++)
    rc = insert_loop_row(st, ST_INSERT_LOOP_NAMED, b, b->loops[i].loop, &b->loops[i].stats);
  return rc;
}

static int put_batch_locked(store_t *st, const store_batch_t *b) {
  if (sqlite_step_done(st, ST_BEGIN) != SQLITE_OK) {
    sqlite_report(st, "begin");
    return STORE_ERROR;
  }
  int rc = insert_batch_row(st, b);
  if (rc == SQLITE_CONSTRAINT) {
    sqlite_step_done(st, ST_ROLLBACK);
    return STORE_DUPLICATE;
  }
  if (rc == SQLITE_OK) rc = forget_known_if_changed(st);
  if (rc == SQLITE_OK) rc = upsert_stacks_and_groups(st, b);
  rollup_picks_t picks;
  bool picked = rc == SQLITE_OK && rollup_picks_init(&picks, b) == 0;
  if (rc == SQLITE_OK && !picked) rc = SQLITE_NOMEM;
  if (rc == SQLITE_OK) rc = insert_events(st, b, picks.picked);
  if (rc == SQLITE_OK) rc = store_rollups_add_batch(st->rollups, b, picks.group);
  if (rc == SQLITE_OK) rc = insert_loop_stats(st, b);
  if (rc == SQLITE_OK) rc = sqlite_step_done(st, ST_COMMIT);
  if (rc == SQLITE_OK) note_written(st, b, picks.picked);
  if (rc == SQLITE_OK) st->unfolded = true;
  if (picked) rollup_picks_free(&picks);
  if (rc == SQLITE_OK) return STORE_OK;
  sqlite_report(st, "put batch");
  sqlite_step_done(st, ST_ROLLBACK);
  return STORE_ERROR;
}

/* Everything in the write-ahead log copied into the database file open
   and the log emptied (checkpoint TRUNCATE), on the file descriptors
   SQLite holds, not the paths: a database moved away gets all its
   commits, and the log left at the path (SQLite keeps it at close when
   the database moved) holds nothing that a database now at the path
   would have replayed into it at the next start. */
static void empty_log(store_t *st) {
  pthread_mutex_lock(&st->lock);
  if (sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL) != SQLITE_OK)
    sqlite_report(st, "checkpoint of a lost database");
  pthread_mutex_unlock(&st->lock);
}

/* Never called with st->lock held (the first failure takes it). */
int sqlite_check(store_t *st, char *why, size_t why_len) {
  bool first = false;
  if (db_identity_check(st->identity, why, why_len, &first)) return STORE_OK;
  if (first) empty_log(st);
  return STORE_LOST;
}

/* Checked before (nothing written into a file no path names) and after
   the commit or the duplicate found (a file deleted or replaced meanwhile:
   not acknowledged). */
static int sqlite_put_batch(store_t *st, const store_batch_t *b) {
  char why[64];
  if (sqlite_check(st, why, sizeof why) != STORE_OK) return STORE_LOST;
  pthread_mutex_lock(&st->lock);
  int rc = put_batch_locked(st, b);
  pthread_mutex_unlock(&st->lock);
  if ((rc == STORE_OK || rc == STORE_DUPLICATE) && sqlite_check(st, why, sizeof why) != STORE_OK)
    return STORE_LOST;
  return rc;
}

static int delete_locked(store_t *st, int64_t cutoff_ns, uint64_t *deleted) {
  if (sqlite_step_done(st, ST_BEGIN) != SQLITE_OK) return STORE_ERROR;
  sqlite_forget_known(st);
  sqlite3_int64 changes0 = sqlite3_total_changes64(st->db);
  int rc = store_rollups_mark_before(st->rollups, cutoff_ns);
  for (int i = 0; rc == SQLITE_OK && i < QSQL_RETENTION_STEPS; i++) {
    sqlite3_stmt *s = st->retention[i];
    sqlite3_bind_int64(s, 1, cutoff_ns);
    rc = sqlite3_step(s) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_reset(s);
    if (rc == SQLITE_OK && i == QSQL_RETENTION_BATCHES && deleted)
      *deleted = (uint64_t)sqlite3_changes(st->db);
  }
  /* Nothing older than the cutoff (the pass at start, as a rule): no
     group lost events, no bucket to rebuild, and the rows not folded yet
     are left to the fold. */
  bool changed = sqlite3_total_changes64(st->db) != changes0;
  if (rc == SQLITE_OK && changed) rc = hang_groups_prune(st->hang);
  if (rc == SQLITE_OK && changed) rc = store_rollups_rebuild(st->rollups);
  if (rc != SQLITE_OK) {
    sqlite_report(st, "retention");
    sqlite_step_done(st, ST_ROLLBACK);
    if (deleted) *deleted = 0;
    return STORE_ERROR;
  }
  return sqlite_step_done(st, ST_COMMIT) == SQLITE_OK ? STORE_OK : STORE_ERROR;
}

static int sqlite_delete_older_than(store_t *st, int64_t cutoff_ns, uint64_t *deleted) {
  if (deleted) *deleted = 0;
  char why[64];
  if (sqlite_check(st, why, sizeof why) != STORE_OK) return STORE_LOST;
  pthread_mutex_lock(&st->lock);
  int rc = delete_locked(st, cutoff_ns, deleted);
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static uint64_t file_bytes(const char *path, const char *suffix) {
  char name[4096];
  struct stat sb;
  if (snprintf(name, sizeof name, "%s%s", path, suffix) >= (int)sizeof name) return 0;
  return stat(name, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static int sqlite_stats(store_t *st, store_stats_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_COUNT_ROWS];
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    out->batches = (uint64_t)sqlite3_column_int64(s, 0);
    out->events = (uint64_t)sqlite3_column_int64(s, 1);
    out->stacks = (uint64_t)sqlite3_column_int64(s, 2);
    out->stack_counts = (uint64_t)sqlite3_column_int64(s, 3);
  }
  sqlite3_reset(s);
  pthread_mutex_unlock(&st->lock);
  out->db_bytes = file_bytes(st->path, "") + file_bytes(st->path, "-wal");
  char why[64];
  out->lost = sqlite_check(st, why, sizeof why) != STORE_OK;
  return rc == SQLITE_ROW ? STORE_OK : STORE_ERROR;
}

const store_ops_t store_sqlite_ops = {
    .name = "sqlite",
    .open = sqlite_open,
    .close = sqlite_close,
    .put_batch = sqlite_put_batch,
    .delete_older_than = sqlite_delete_older_than,
    .stats = sqlite_stats,
    .check = sqlite_check,
    .health = sqlite_health,
    .top_rows = sqlite_top_rows,
    .stack_rows = sqlite_stack_rows,
    .event_rows = sqlite_event_rows,
    .event_detail = sqlite_event_detail,
    .drops = sqlite_drops,
    .time_buckets = sqlite_time_buckets,
    .event_states = sqlite_event_states,
    .state_rows = sqlite_state_rows,
    .loop_totals = sqlite_loop_totals,
    .resymbolize = sqlite_resymbolize,
    .group_stacks = sqlite_group_stacks,
    .alert_rule_add = sqlite_alert_rule_add,
    .alert_rule_delete = sqlite_alert_rule_delete,
    .alert_rules = sqlite_alert_rules,
    .alert_claim = sqlite_alert_claim,
    .alert_update = sqlite_alert_update,
    .alert_rows = sqlite_alert_rows,
    .app_versions = sqlite_app_versions,
    .new_groups = sqlite_new_groups,
};
