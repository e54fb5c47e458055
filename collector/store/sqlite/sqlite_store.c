/*
 * sqlite_store.c - the embedded default storage backend: one SQLite
 * database in WAL mode with a busy timeout, one connection guarded by a
 * mutex (MHD's worker threads put batches, the retention thread deletes),
 * and every statement prepared once at open.
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
 * and the watched loop's stats a batch carried (loop_stats, one row per
 * batch, LOOP_SCHEMA).
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "collector/model/hang_group_cands.h"
#include "collector/model/rollup.h"
#include "collector/model/rollup_batch.h"
#include "collector/store/rollup_sql.h"
#include "collector/store/sqlite/db_identity.h"
#include "collector/store/sqlite/sqlite_hang_groups.h"
#include "collector/store/sqlite/sqlite_rollups.h"
#include "collector/store/sqlite/sqlite_states.h"
#include "collector/store/store.h"

#define BUSY_TIMEOUT_MS 5000

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
    "CREATE INDEX IF NOT EXISTS stack_counts_sig ON stack_counts(stack_sig);"
    "CREATE TABLE IF NOT EXISTS groups(signature TEXT PRIMARY KEY, frames TEXT NOT NULL,"
    " first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS batch_tags(batch_id BLOB NOT NULL, key TEXT NOT NULL,"
    " value TEXT NOT NULL, PRIMARY KEY(batch_id, key, value)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS batch_tags_pair ON batch_tags(key, value);";

/* Columns newer than the database may be: each is added when missing (the
   error of an existing column is ignored). events.group_sig came with the
   groups (its index follows), stacks.stack_end (NULL: complete, or not
   said) with stack ends, batches.dropped_* (the SDK's DropCounters, 0 in
   batches stored before) with the drops API; batch_tags, also newer, is
   made by SCHEMA. */
#define ADD_DROPPED(reason)                                                                        \
  "ALTER TABLE batches ADD COLUMN dropped_" reason " INTEGER NOT NULL DEFAULT 0"
static const char *const ADD_COLUMNS[] = {
    "ALTER TABLE events ADD COLUMN group_sig TEXT",
    "ALTER TABLE stacks ADD COLUMN stack_end TEXT",
    "ALTER TABLE events ADD COLUMN label TEXT",
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

/* The loop stats of a batch (newer than the first databases: made when
   missing, create_loop_stats). u0..u8 are the units by duration bucket. */
static const char LOOP_SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS loop_stats(batch_id BLOB PRIMARY KEY,"
    " watched_ns INTEGER NOT NULL, busy_ns INTEGER NOT NULL, u0 INTEGER NOT NULL,"
    " u1 INTEGER NOT NULL, u2 INTEGER NOT NULL, u3 INTEGER NOT NULL, u4 INTEGER NOT NULL,"
    " u5 INTEGER NOT NULL, u6 INTEGER NOT NULL, u7 INTEGER NOT NULL, u8 INTEGER NOT NULL)"
    " WITHOUT ROWID";
_Static_assert(STORE_LOOP_BUCKETS == 9, "LOOP_SCHEMA has one column per bucket");
static const char GROUP_SIG_INDEX[] =
    "CREATE INDEX IF NOT EXISTS events_group ON events(group_sig)";

/* The batch's resource (?1 app, ?2 version, ?3 environment, ?10 host: NULL
   any) and tags (?11/?12 .. ?17/?18: key and value, NULL any); then the
   events' start within ?4..?5 and their label ?19 (NULL any) (TOP_FILTERS)
   or the batch's arrival (DROPS_FILTERS). */
#define TAG_FILTER(k, v)                                                                           \
  " AND (?" #k " IS NULL OR EXISTS (SELECT 1 FROM batch_tags t WHERE t.batch_id = b.id"            \
  " AND t.key = ?" #k " AND t.value = ?" #v "))"
#define BATCH_FILTERS                                                                              \
  " AND (?1 IS NULL OR b.app = ?1) AND (?2 IS NULL OR b.version = ?2)"                             \
  " AND (?3 IS NULL OR b.environment = ?3) AND (?10 IS NULL OR b.host = ?10)" TAG_FILTER(11, 12)   \
      TAG_FILTER(13, 14) TAG_FILTER(15, 16) TAG_FILTER(17, 18)
#define TAG_PARAM 11 /* the first tag filter's key */
_Static_assert(STORE_MAX_TAG_FILTERS == 4, "BATCH_FILTERS has one TAG_FILTER per tag filter");
#define TOP_FILTERS                                                                                \
  BATCH_FILTERS " AND e.start_ns >= ?4 AND e.start_ns <= ?5 AND (?19 IS NULL OR e.label = ?19)"
#define DROPS_FILTERS BATCH_FILTERS " AND b.received_ns >= ?4 AND b.received_ns <= ?5"
#define DROPPED_SUMS                                                                               \
  "coalesce(sum(b.dropped_rate_limited), 0), coalesce(sum(b.dropped_queue_full), 0),"              \
  " coalesce(sum(b.dropped_sink_failed), 0), coalesce(sum(b.dropped_spool_quota), 0),"             \
  " coalesce(sum(b.dropped_oversized), 0)"

/* ?6: "hang" (hang and fatal_hang) or another kind, exactly. */
#define KIND_FILTER "(e.kind = ?6 OR (?6 = 'hang' AND e.kind = 'fatal_hang'))"
#define EVENT_COLUMNS                                                                              \
  "e.id, e.kind, e.start_ns, e.duration_ns, e.tid, e.cpu_percent, e.reason, b.app, b.version,"     \
  " b.environment, e.group_sig, (SELECT json_group_array(json_object('key', t.key, 'value',"       \
  " t.value)) FROM batch_tags t WHERE t.batch_id = b.id), e.label"

/* Top-stacks and stack rows read the day rows of ?20..?21, the 10-minute
   rows of ?26..?27 and ?28..?29 (rollup_plan) and the raw events starting
   in ?22..?23 and ?24..?25: the same columns either way, summed per group,
   version, label and duration bin. */
#define ROLLUP_FILTERS                                                                             \
  " AND (?1 IS NULL OR r.app = ?1) AND (?2 IS NULL OR r.version = ?2)"                             \
  " AND (?3 IS NULL OR r.environment = ?3) AND (?19 IS NULL OR r.label = ?19)"
#define RANGE(lo, hi) " AND r.bucket_ns >= ?" #lo " AND r.bucket_ns <= ?" #hi
#define RAW_RANGE(lo, hi) " AND e.start_ns >= ?" #lo " AND e.start_ns <= ?" #hi
#define GROUP_PART(table, kinds, lo, hi)                                                           \
  "SELECT r.group_sig AS g, r.version AS version, r.label AS label, r.dbin AS dbin,"               \
  " r.events AS events, r.samples AS samples, r.total_ns AS total_ns, r.first_ns AS first_ns,"     \
  " r.last_ns AS last_ns, r.max_ns AS max_ns, r.cpu_us AS cpu_us FROM " table " r WHERE " kinds    \
  RANGE(lo, hi) ROLLUP_FILTERS
#define TOP_SQL(kinds, raw, majority)                                                              \
  "SELECT x.g, gr.frames, x.version, x.label, sum(x.events), sum(x.samples), sum(x.total_ns),"     \
  " min(x.first_ns), max(x.last_ns), max(x.max_ns), x.dbin, " majority ", sum(x.cpu_us)"           \
  " FROM (" GROUP_PART("rollup_groups_day", kinds, 20, 21) " UNION ALL " GROUP_PART(               \
      "rollup_groups", kinds, 26,                                                                  \
      27) " UNION ALL " GROUP_PART("rollup_groups", kinds, 28,                                     \
                                   29) " UNION ALL " raw                                           \
                                       ") x JOIN groups gr ON gr.signature = x.g"                  \
                                       " GROUP BY x.g, x.version, x.label, x.dbin ORDER BY x.g"
#define STACK_PART(table, lo, hi)                                                                  \
  "SELECT r.stack_sig AS s, r.samples AS n, r.cpu_us AS cpu, r.wall_ns AS wall,"                   \
  " r.first_ns AS first, r.last_end_ns AS last_end FROM " table " r"                               \
  " WHERE (r.kind = ?6 OR (?6 = 'hang' AND r.kind = 'fatal_hang'))" RANGE(lo, hi) ROLLUP_FILTERS   \
      " AND (?8 IS NULL OR r.group_sig = ?8)"
#define RAW_HANG(lo, hi)                                                                           \
  "SELECT e.group_sig, coalesce(b.version, ''), coalesce(e.label, ''), perf_dbin(e.duration_ns),"  \
  " 1, (SELECT coalesce(sum(c.samples), 0) FROM stack_counts c WHERE c.event_id = e.id),"          \
  " e.duration_ns, e.start_ns, e.start_ns, e.duration_ns, 0 FROM events e"                         \
  " JOIN batches b ON b.id = e.batch_id WHERE e.kind IN ('hang', 'fatal_hang')"                    \
  " AND e.group_sig IS NOT NULL" RAW_RANGE(lo, hi) TOP_FILTERS
#define RAW_CPU(lo, hi)                                                                            \
  "SELECT c.stack_sig, coalesce(b.version, ''), coalesce(e.label, ''), perf_dbin(e.duration_ns),"  \
  " 1, sum(c.samples), e.duration_ns, e.start_ns, e.start_ns, e.duration_ns,"                      \
  " sum(" ROLLUP_CPU(                                                                              \
      "c") ") FROM events e"                                                                       \
           " JOIN batches b ON b.id = e.batch_id JOIN stack_counts c ON c.event_id = e.id"         \
           " WHERE e.kind = 'cpu'" RAW_RANGE(lo, hi) TOP_FILTERS " GROUP BY e.id, c.stack_sig"
#define RAW_STACK(lo, hi)                                                                          \
  "SELECT c.stack_sig, c.samples, " ROLLUP_CPU("c") ", " ROLLUP_WALL_SHARE(                        \
      "c", "e") ", e.start_ns, e.start_ns + e.duration_ns FROM events e JOIN batches b ON b.id = " \
                "e.batch_id"                                                                       \
                " JOIN stack_counts c ON c.event_id = e.id WHERE " KIND_FILTER                     \
                RAW_RANGE(lo, hi) TOP_FILTERS " AND (?8 IS NULL OR e.group_sig = ?8)"

#define GROUP_EVENTS STORE_STR(STORE_GROUP_STACKS_EVENTS)
#define GROUP_ROWS STORE_STR(STORE_GROUP_STACKS_ROWS)

enum stmt_id {
  ST_BEGIN,
  ST_COMMIT,
  ST_ROLLBACK,
  ST_INSERT_BATCH,
  ST_INSERT_TAG,
  ST_UPSERT_STACK,
  ST_INSERT_EVENT,
  ST_INSERT_COUNT,
  ST_DELETE_COUNTS,
  ST_DELETE_EVENTS,
  ST_DELETE_TAGS,
  ST_DELETE_BATCHES,
  ST_DELETE_STACKS,
  ST_COUNT_ROWS,
  ST_UPSERT_GROUP,
  ST_DELETE_GROUPS,
  ST_TOP_HANG,
  ST_TOP_CPU,
  ST_STACK_ROWS,
  ST_EVENT_ROWS,
  ST_EVENT_ONE,
  ST_EVENT_COUNTS,
  ST_DROPS,
  ST_TIME_BUCKETS,
  ST_STATE_ROWS,
  ST_INSERT_LOOP,
  ST_DELETE_LOOP,
  ST_LOOP_SUMS,
  ST_HANG_COUNT,
  ST_ANY_EVENT,
  ST_STACK_FRAMES,
  ST_GROUP_STACKS,
  ST_COUNT
};

static const char *const STMT_SQL[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_INSERT_BATCH] = "INSERT INTO batches(id, received_ns, app, version, environment, host, pid,"
                        " dropped_rate_limited, dropped_queue_full, dropped_sink_failed,"
                        " dropped_spool_quota, dropped_oversized)"
                        " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [ST_INSERT_TAG] = "INSERT OR IGNORE INTO batch_tags(batch_id, key, value) VALUES(?1, ?2, ?3)",
    [ST_UPSERT_STACK] = "INSERT INTO stacks(signature, frames, first_seen, last_seen, stack_end)"
                        " VALUES(?1, ?2, ?3, ?3, ?4) ON CONFLICT(signature) DO UPDATE SET"
                        " last_seen = max(last_seen, excluded.last_seen)",
    [ST_INSERT_EVENT] = "INSERT INTO events(batch_id, kind, start_ns, duration_ns, tid,"
                        " cpu_percent, reason, dominant_stack_sig, group_sig, label)"
                        " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    [ST_INSERT_COUNT] = "INSERT INTO stack_counts(event_id, stack_sig, tid, samples, cpu_us)"
                        " VALUES(?1, ?2, ?3, ?4, ?5)",
    [ST_DELETE_COUNTS] = "DELETE FROM stack_counts WHERE event_id IN (SELECT e.id FROM events e"
                         " JOIN batches b ON e.batch_id = b.id WHERE b.received_ns < ?1)",
    [ST_DELETE_EVENTS] = "DELETE FROM events WHERE batch_id IN"
                         " (SELECT id FROM batches WHERE received_ns < ?1)",
    [ST_DELETE_TAGS] = "DELETE FROM batch_tags WHERE batch_id IN"
                       " (SELECT id FROM batches WHERE received_ns < ?1)",
    [ST_DELETE_BATCHES] = "DELETE FROM batches WHERE received_ns < ?1",
    [ST_DELETE_STACKS] = "DELETE FROM stacks WHERE last_seen < ?1",
    [ST_COUNT_ROWS] = "SELECT (SELECT count(*) FROM batches), (SELECT count(*) FROM events),"
                      " (SELECT count(*) FROM stacks), (SELECT count(*) FROM stack_counts)",
    [ST_UPSERT_GROUP] = "INSERT INTO groups(signature, frames, first_seen, last_seen)"
                        " VALUES(?1, ?2, ?3, ?3) ON CONFLICT(signature) DO UPDATE SET"
                        " last_seen = max(last_seen, excluded.last_seen)",
    [ST_DELETE_GROUPS] = "DELETE FROM groups WHERE last_seen < ?1",
    [ST_TOP_HANG] =
        TOP_SQL("r.kind IN ('hang', 'fatal_hang')", RAW_HANG(22, 23) " UNION ALL " RAW_HANG(24, 25),
                "(SELECT p.samples FROM hang_group_path p WHERE p.group_sig = x.g)"),
    [ST_TOP_CPU] = TOP_SQL("r.kind = 'cpu'", RAW_CPU(22, 23) " UNION ALL " RAW_CPU(24, 25), "NULL"),
    [ST_STACK_ROWS] =
        "SELECT x.s, st.frames, sum(x.n), sum(x.cpu), coalesce(sum(x.wall), 0), min(x.first),"
        " max(x.last_end)"
        " FROM (" STACK_PART("rollup_stacks_day", 20, 21) " UNION ALL " STACK_PART(
            "rollup_stacks", 26,
            27) " UNION ALL " STACK_PART("rollup_stacks", 28,
                                         29) " UNION ALL " RAW_STACK(22, 23) " UNION "
                                                                             "ALL " RAW_STACK(
                                                                                 24,
                                                                                 25) ") x JOIN "
                                                                                     "stacks st ON "
                                                                                     "st.signature "
                                                                                     "= x.s "
                                                                                     "GROUP BY x.s "
                                                                                     "ORDER BY "
                                                                                     "4 DESC, 3 "
                                                                                     "DESC, x.s",
    [ST_ANY_EVENT] = "SELECT EXISTS (SELECT 1 FROM events WHERE start_ns >= ?1 AND start_ns <= ?2)",
    [ST_EVENT_ROWS] = "SELECT " EVENT_COLUMNS " FROM events e JOIN batches b ON b.id = e.batch_id"
                      " WHERE (?6 IS NULL OR " KIND_FILTER ")" TOP_FILTERS
                      " ORDER BY e.start_ns DESC, e.id DESC LIMIT ?7",
    [ST_EVENT_ONE] = "SELECT " EVENT_COLUMNS " FROM events e JOIN batches b ON b.id = e.batch_id"
                     " WHERE e.id = ?1",
    /* One row per signature and thread: a database of a collector that
       stored a row per device stack may hold several. */
    [ST_EVENT_COUNTS] = "SELECT c.stack_sig, s.frames, c.tid, sum(c.samples), sum(c.cpu_us)"
                        " FROM stack_counts c LEFT JOIN stacks s ON s.signature = c.stack_sig"
                        " WHERE c.event_id = ?1 GROUP BY c.stack_sig, c.tid"
                        " ORDER BY coalesce(sum(c.cpu_us), 0) DESC, sum(c.samples) DESC,"
                        " min(c.rowid)",
    [ST_DROPS] = "SELECT " DROPPED_SUMS ", count(*) FROM batches b WHERE 1" DROPS_FILTERS,
    /* ?7 the bucket's nanoseconds, ?8 the most buckets (start_ns >= ?4 >= 0:
       the division rounds down). total(): a REAL sum, which cannot overflow. */
    [ST_TIME_BUCKETS] = "SELECT e.start_ns / ?7, count(*), total(e.duration_ns) FROM events e"
                        " JOIN batches b ON b.id = e.batch_id WHERE " KIND_FILTER TOP_FILTERS
                        " GROUP BY 1 ORDER BY 1 LIMIT ?8",
    /* ?8: a group (hang) or a stack (cpu), NULL any (sqlite_states.c holds
       the table). */
    [ST_STATE_ROWS] = "SELECT x.state, x.syscall, x.fd, sum(x.samples) FROM event_states x"
                      " JOIN events e ON e.id = x.event_id JOIN batches b ON b.id = e.batch_id"
                      " WHERE " KIND_FILTER TOP_FILTERS
                      " AND (?8 IS NULL OR e.group_sig = ?8 OR EXISTS (SELECT 1 FROM"
                      " stack_counts c WHERE c.event_id = e.id AND c.stack_sig = ?8))"
                      " GROUP BY 1, 2, 3 ORDER BY 4 DESC, 1, 2, 3",
    [ST_INSERT_LOOP] = "INSERT INTO loop_stats(batch_id, watched_ns, busy_ns, u0, u1, u2, u3, u4,"
                       " u5, u6, u7, u8) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    [ST_DELETE_LOOP] = "DELETE FROM loop_stats WHERE batch_id IN"
                       " (SELECT id FROM batches WHERE received_ns < ?1)",
    /* Values <= 2^48 each: the integer sums fit up to 2^15 batches a
       query; total() (REAL) is exact to 2^53 and never overflows. */
    [ST_LOOP_SUMS] = "SELECT total(l.watched_ns), total(l.busy_ns), total(l.u0), total(l.u1),"
                     " total(l.u2), total(l.u3), total(l.u4), total(l.u5), total(l.u6),"
                     " total(l.u7), total(l.u8), count(*) FROM loop_stats l"
                     " JOIN batches b ON b.id = l.batch_id WHERE 1" DROPS_FILTERS,
    [ST_HANG_COUNT] = "SELECT count(*) FROM events e JOIN batches b ON b.id = e.batch_id"
                      " WHERE e.kind IN ('hang', 'fatal_hang')" TOP_FILTERS,
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

struct store_s {
  pthread_mutex_t lock;
  sqlite3 *db;
  sqlite3_stmt *stmt[ST_COUNT];
  hang_groups_t *hang;
  store_states_t *states;
  store_rollups_t *rollups;
  char *path;
  db_identity_t *identity; /* path and path-wal as opened */
};

static void report(store_t *st, const char *what) {
  fprintf(stderr, "perf-collector: sqlite %s: %s\n", what, sqlite3_errmsg(st->db));
}

/* Run a prepared statement that returns no rows, then reset it. */
static int step_done(store_t *st, enum stmt_id id) {
  sqlite3_stmt *s = st->stmt[id];
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int sqlite_check(store_t *st, char *why, size_t why_len);
static void empty_log(store_t *st);

static void sqlite_close(store_t *st) {
  if (!st) return;
  char why[64];
  if (st->identity && sqlite_check(st, why, sizeof why) != STORE_OK)
    empty_log(st); /* what retention or renames wrote since */
  for (int i = 0; i < ST_COUNT; i++)
    sqlite3_finalize(st->stmt[i]);
  hang_groups_close(st->hang);
  store_states_close(st->states);
  store_rollups_close(st->rollups);
  sqlite3_close(st->db);
  db_identity_free(st->identity);
  pthread_mutex_destroy(&st->lock);
  free(st->path);
  free(st);
}

static int prepare_all(store_t *st) {
  for (int i = 0; i < ST_COUNT; i++) {
    if (sqlite3_prepare_v3(st->db, STMT_SQL[i], -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[i],
                           NULL) != SQLITE_OK) {
      report(st, "prepare");
      return STORE_ERROR;
    }
  }
  return STORE_OK;
}

/* synchronous=FULL or NORMAL (the journal is WAL either way). */
static int set_durability(store_t *st, store_durability_t durability) {
  const char *sql =
      durability == STORE_DURABLE_FULL ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL";
  if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) == SQLITE_OK) return STORE_OK;
  report(st, "synchronous");
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
    fprintf(stderr, "perf-collector: %s\n", why);
    return STORE_ERROR;
  }
  if (sqlite3_file_control(st->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved) {
    fprintf(stderr, "perf-collector: database %s was moved or replaced while it was opened\n",
            st->path);
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
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK) {
    report(st, "open");
    sqlite_close(st);
    return STORE_ERROR;
  }
  sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
  char *err = NULL;
  if (sqlite3_exec(st->db, SCHEMA, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "perf-collector: sqlite schema: %s\n", err ? err : "?");
    sqlite3_free(err);
    sqlite_close(st);
    return STORE_ERROR;
  }
  for (size_t i = 0; i < sizeof ADD_COLUMNS / sizeof ADD_COLUMNS[0]; i++)
    sqlite3_exec(st->db, ADD_COLUMNS[i], NULL, NULL, NULL); /* fails when present: fine */
  add_cpu_weights(st->db);
  if (sqlite3_exec(st->db, GROUP_SIG_INDEX, NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(st->db, LOOP_SCHEMA, NULL, NULL, NULL) != SQLITE_OK) {
    report(st, "schema");
    sqlite_close(st);
    return STORE_ERROR;
  }
  if (hang_groups_open(st->db, &st->hang) != SQLITE_OK) {
    report(st, "hang groups");
    sqlite_close(st);
    return STORE_ERROR;
  }
  if (store_states_open(st->db, &st->states) != SQLITE_OK) {
    report(st, "thread states");
    sqlite_close(st);
    return STORE_ERROR;
  }
  if (store_rollups_open(st->db, &st->rollups) != SQLITE_OK) {
    report(st, "rollups");
    sqlite_close(st);
    return STORE_ERROR;
  }
  if (prepare_all(st) != STORE_OK || set_durability(st, durability) != STORE_OK ||
      take_identity(st) != STORE_OK) {
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
  int rc = step_done(st, ST_INSERT_BATCH);
  s = st->stmt[ST_INSERT_TAG];
  for (size_t i = 0; rc == SQLITE_OK && i < b->n_tags; i++) {
    sqlite3_bind_blob(s, 1, b->id, STORE_BATCH_ID_BYTES, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, b->tags[i].key, (int)b->tags[i].key_len, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, b->tags[i].value, -1, SQLITE_STATIC);
    rc = step_done(st, ST_INSERT_TAG);
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
  return step_done(st, stmt);
}

static int upsert_stacks_and_groups(store_t *st, const store_batch_t *b) {
  int rc = SQLITE_OK;
  for (size_t i = 0; rc == SQLITE_OK && i < b->n_stacks; i++)
    rc = upsert_keyed(st, ST_UPSERT_STACK, b->stacks[i].signature, b->stacks[i].frames_json,
                      b->received_ns, b->stacks[i].end);
  for (size_t i = 0; rc == SQLITE_OK && i < b->n_groups; i++)
    rc = upsert_keyed(st, ST_UPSERT_GROUP, b->groups[i].signature, b->groups[i].names_json,
                      b->received_ns, NULL);
  return rc;
}

static int insert_counts(store_t *st, sqlite3_int64 event_id, const store_event_t *e) {
  sqlite3_stmt *s = st->stmt[ST_INSERT_COUNT];
  for (size_t i = 0; i < e->n_counts; i++) {
    sqlite3_bind_int64(s, 1, event_id);
    sqlite3_bind_text(s, 2, e->counts[i].stack_sig, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, e->counts[i].tid);
    sqlite3_bind_int64(s, 4, e->counts[i].samples);
    if (e->counts[i].cpu_us >= 0)
      sqlite3_bind_int64(s, 5, e->counts[i].cpu_us);
    else
      sqlite3_bind_null(s, 5);
    int rc = step_done(st, ST_INSERT_COUNT);
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
      int rc = hang_groups_assign(st->hang, e->hang, b->received_ns, picked[i]);
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
    int rc = step_done(st, ST_INSERT_EVENT);
    sqlite3_int64 id = sqlite3_last_insert_rowid(st->db);
    if (rc == SQLITE_OK) rc = insert_counts(st, id, e);
    if (rc == SQLITE_OK) rc = store_states_insert(st->states, id, e);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

static int insert_loop_stats(store_t *st, const store_batch_t *b) {
  sqlite3_stmt *s = st->stmt[ST_INSERT_LOOP];
  const store_loop_stats_t *l = b->loop_stats;
  sqlite3_bind_blob(s, 1, b->id, STORE_BATCH_ID_BYTES, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, (sqlite3_int64)l->watched_ns); /* <= STORE_MAX_LOOP_VALUE */
  sqlite3_bind_int64(s, 3, (sqlite3_int64)l->busy_ns);
  for (int i = 0; i < STORE_LOOP_BUCKETS; i++)
    sqlite3_bind_int64(s, 4 + i, (sqlite3_int64)l->units[i]);
  return step_done(st, ST_INSERT_LOOP);
}

static int put_batch_locked(store_t *st, const store_batch_t *b) {
  if (step_done(st, ST_BEGIN) != SQLITE_OK) {
    report(st, "begin");
    return STORE_ERROR;
  }
  int rc = insert_batch_row(st, b);
  if (rc == SQLITE_CONSTRAINT) {
    step_done(st, ST_ROLLBACK);
    return STORE_DUPLICATE;
  }
  if (rc == SQLITE_OK) rc = upsert_stacks_and_groups(st, b);
  rollup_picks_t picks;
  if (rc == SQLITE_OK && rollup_picks_init(&picks, b) != 0) rc = SQLITE_NOMEM;
  if (rc == SQLITE_OK) {
    rc = insert_events(st, b, picks.picked);
    if (rc == SQLITE_OK) rc = store_rollups_add_batch(st->rollups, b, picks.group);
    rollup_picks_free(&picks);
  }
  if (rc == SQLITE_OK && b->loop_stats) rc = insert_loop_stats(st, b);
  if (rc == SQLITE_OK) rc = step_done(st, ST_COMMIT);
  if (rc == SQLITE_OK) return STORE_OK;
  report(st, "put batch");
  step_done(st, ST_ROLLBACK);
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
    report(st, "checkpoint of a lost database");
  pthread_mutex_unlock(&st->lock);
}

/* Never called with st->lock held (the first failure takes it). */
static int sqlite_check(store_t *st, char *why, size_t why_len) {
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
  static const enum stmt_id order[] = {ST_DELETE_COUNTS, ST_DELETE_EVENTS,  ST_DELETE_TAGS,
                                       ST_DELETE_LOOP,   ST_DELETE_BATCHES, ST_DELETE_STACKS,
                                       ST_DELETE_GROUPS};
  if (step_done(st, ST_BEGIN) != SQLITE_OK) return STORE_ERROR;
  if (store_rollups_mark_before(st->rollups, cutoff_ns) != SQLITE_OK ||
      store_states_delete_before(st->states, cutoff_ns) != SQLITE_OK) {
    report(st, "retention");
    step_done(st, ST_ROLLBACK);
    return STORE_ERROR;
  }
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    sqlite3_bind_int64(st->stmt[order[i]], 1, cutoff_ns);
    if (step_done(st, order[i]) != SQLITE_OK) {
      report(st, "retention");
      step_done(st, ST_ROLLBACK);
      return STORE_ERROR;
    }
    if (order[i] == ST_DELETE_BATCHES && deleted) *deleted = (uint64_t)sqlite3_changes(st->db);
  }
  if (hang_groups_prune(st->hang) != SQLITE_OK || store_rollups_rebuild(st->rollups) != SQLITE_OK) {
    report(st, "retention");
    step_done(st, ST_ROLLBACK);
    return STORE_ERROR;
  }
  return step_done(st, ST_COMMIT) == SQLITE_OK ? STORE_OK : STORE_ERROR;
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

static const char *column_text(sqlite3_stmt *s, int i) {
  return (const char *)sqlite3_column_text(s, i);
}

/* Text or NULL at index i. */
static void bind_opt(sqlite3_stmt *s, int i, const char *text) {
  if (text)
    sqlite3_bind_text(s, i, text, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(s, i);
}

/* q's filters as BATCH_FILTERS, TOP_FILTERS and KIND_FILTER number them
   (a statement without ?6 takes the kind as an unused parameter). */
static void bind_filters(sqlite3_stmt *s, const store_top_query_t *q) {
  bind_opt(s, 1, q->app);
  bind_opt(s, 2, q->version);
  bind_opt(s, 3, q->environment);
  bind_opt(s, 10, q->host);
  sqlite3_bind_int64(s, 4, q->from_ns);
  sqlite3_bind_int64(s, 5, q->to_ns);
  bind_opt(s, 6, q->kind);
  bind_opt(s, 19, q->label);
  for (size_t i = 0; i < STORE_MAX_TAG_FILTERS; i++) {
    int k = TAG_PARAM + 2 * (int)i;
    if (i < q->n_tags)
      sqlite3_bind_text(s, k, q->tags[i].key, (int)q->tags[i].key_len, SQLITE_STATIC);
    else
      sqlite3_bind_null(s, k);
    bind_opt(s, k + 1, i < q->n_tags ? q->tags[i].value : NULL);
  }
}

/* rollup_plan's probe: does an event start in [lo, hi]? The lock is held. */
static int any_event(void *ctx, int64_t lo, int64_t hi) {
  store_t *st = ctx;
  sqlite3_stmt *s = st->stmt[ST_ANY_EVENT];
  sqlite3_bind_int64(s, 1, lo);
  sqlite3_bind_int64(s, 2, hi);
  int rc = sqlite3_step(s), any = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
  sqlite3_reset(s);
  return any;
}

/* q's plan (rollup.h) into ?20..?29 of s; the lock is held. */
static void bind_plan(store_t *st, sqlite3_stmt *s, const store_top_query_t *q) {
  rollup_plan_t plan;
  rollup_plan(q, any_event, st, &plan);
  sqlite3_bind_int64(s, 20, plan.day[0]);
  sqlite3_bind_int64(s, 21, plan.day[1]);
  for (int i = 0; i < 2; i++) {
    sqlite3_bind_int64(s, 22 + 2 * i, plan.raw[i][0]);
    sqlite3_bind_int64(s, 23 + 2 * i, plan.raw[i][1]);
    sqlite3_bind_int64(s, 26 + 2 * i, plan.bucket[i][0]);
    sqlite3_bind_int64(s, 27 + 2 * i, plan.bucket[i][1]);
  }
}

static int sqlite_top_rows(store_t *st, const store_top_query_t *q, store_row_fn fn, void *user) {
  enum stmt_id id = strcmp(q->kind, "cpu") == 0 ? ST_TOP_CPU : ST_TOP_HANG;
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[id];
  bind_filters(s, q);
  bind_plan(st, s, q);
  int rc, stopped = 0;
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_top_row_t row = {.group_sig = column_text(s, 0),
                           .names_json = column_text(s, 1),
                           .version = column_text(s, 2),
                           .label = column_text(s, 3),
                           .events = (uint64_t)sqlite3_column_int64(s, 4),
                           .samples = (uint64_t)sqlite3_column_int64(s, 5),
                           .total_ns = sqlite3_column_int64(s, 6),
                           .first_ns = sqlite3_column_int64(s, 7),
                           .last_ns = sqlite3_column_int64(s, 8),
                           .max_ns = sqlite3_column_int64(s, 9),
                           .dbin = sqlite3_column_int(s, 10),
                           .cpu_us = (uint64_t)sqlite3_column_int64(s, 12)};
    if (id == ST_TOP_HANG)
      row.majority_len =
          hang_groups_majority_len(sqlite3_column_blob(s, 11), (size_t)sqlite3_column_bytes(s, 11));
    if (!row.group_sig || !row.names_json) continue;
    stopped = fn(&row, user);
  }
  if (!stopped && rc != SQLITE_DONE) report(st, "top rows");
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  pthread_mutex_unlock(&st->lock);
  return !stopped && rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

/* Step s to the end (or until fn stops), then reset it; the lock is held. */
static int finish_scan(store_t *st, sqlite3_stmt *s, int rc, int stopped, const char *what) {
  if (!stopped && rc != SQLITE_DONE) report(st, what);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return !stopped && rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

static int sqlite_stack_rows(store_t *st, const store_top_query_t *q, store_stack_row_fn fn,
                             void *user) {
  if (!q->kind) return STORE_ERROR;
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_STACK_ROWS];
  bind_filters(s, q);
  bind_plan(st, s, q);
  if (q->group) sqlite3_bind_text(s, 8, q->group, -1, SQLITE_STATIC);
  int rc, stopped = 0;
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_stack_row_t row = {column_text(s, 0),
                             column_text(s, 1),
                             (uint64_t)sqlite3_column_int64(s, 2),
                             (uint64_t)sqlite3_column_int64(s, 3),
                             sqlite3_column_int64(s, 4),
                             sqlite3_column_int64(s, 5),
                             sqlite3_column_int64(s, 6)};
    if (!row.stack_sig || !row.frames_json) continue;
    stopped = fn(&row, user);
  }
  rc = finish_scan(st, s, rc, stopped, "stack rows");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static store_event_row_t event_row(sqlite3_stmt *s) {
  store_event_row_t row = {.id = sqlite3_column_int64(s, 0),
                           .kind = column_text(s, 1),
                           .start_ns = sqlite3_column_int64(s, 2),
                           .duration_ns = sqlite3_column_int64(s, 3),
                           .tid = (uint32_t)sqlite3_column_int64(s, 4),
                           .cpu_percent = (int32_t)sqlite3_column_int64(s, 5),
                           .reason = column_text(s, 6),
                           .app = column_text(s, 7),
                           .version = column_text(s, 8),
                           .environment = column_text(s, 9),
                           .group_sig = column_text(s, 10),
                           .tags_json = column_text(s, 11),
                           .label = column_text(s, 12)};
  return row;
}

static int sqlite_event_rows(store_t *st, const store_top_query_t *q, int64_t limit,
                             store_event_row_fn fn, void *user) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_EVENT_ROWS];
  bind_filters(s, q);
  sqlite3_bind_int64(s, 7, limit);
  int rc, stopped = 0;
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_event_row_t row = event_row(s);
    stopped = fn(&row, user);
  }
  rc = finish_scan(st, s, rc, stopped, "event rows");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static int sqlite_event_detail(store_t *st, int64_t id, store_event_row_fn on_event,
                               store_count_row_fn on_count, void *user) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_EVENT_ONE];
  sqlite3_bind_int64(s, 1, id);
  int rc = sqlite3_step(s), stopped = 0, found = rc == SQLITE_ROW;
  if (found) {
    store_event_row_t row = event_row(s);
    stopped = on_event(&row, user);
    rc = SQLITE_DONE;
  }
  rc = finish_scan(st, s, rc, stopped, "event");
  if (rc == STORE_OK && found) {
    s = st->stmt[ST_EVENT_COUNTS];
    sqlite3_bind_int64(s, 1, id);
    int step = SQLITE_DONE;
    while (!stopped && (step = sqlite3_step(s)) == SQLITE_ROW) {
      store_count_row_t row = {
          column_text(s, 0), column_text(s, 1), (uint32_t)sqlite3_column_int64(s, 2),
          (uint64_t)sqlite3_column_int64(s, 3),
          sqlite3_column_type(s, 4) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, 4)};
      if (!row.stack_sig) continue;
      stopped = on_count(&row, user);
    }
    rc = finish_scan(st, s, step, stopped, "event counts");
  }
  pthread_mutex_unlock(&st->lock);
  if (rc == STORE_OK && !found) return STORE_NOT_FOUND;
  return rc;
}

static int sqlite_drops(store_t *st, const store_top_query_t *q, store_drops_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_DROPS];
  bind_filters(s, q);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    for (int i = 0; i < STORE_DROP_COUNT; i++)
      out->dropped[i] = (uint64_t)sqlite3_column_int64(s, i);
    out->batches = (uint64_t)sqlite3_column_int64(s, STORE_DROP_COUNT);
    rc = SQLITE_DONE;
  }
  rc = finish_scan(st, s, rc, 0, "drops");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

/* Two scans under one lock: the loop stats (by the batches' arrival) and
   the hang count (by the events' start). */
static int sqlite_loop_totals(store_t *st, const store_top_query_t *q, store_loop_totals_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_LOOP_SUMS];
  bind_filters(s, q);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    out->sum.watched_ns = (uint64_t)sqlite3_column_double(s, 0);
    out->sum.busy_ns = (uint64_t)sqlite3_column_double(s, 1);
    for (int i = 0; i < STORE_LOOP_BUCKETS; i++)
      out->sum.units[i] = (uint64_t)sqlite3_column_double(s, 2 + i);
    out->batches = (uint64_t)sqlite3_column_int64(s, 2 + STORE_LOOP_BUCKETS);
    rc = SQLITE_DONE;
  }
  rc = finish_scan(st, s, rc, 0, "loop stats");
  if (rc == STORE_OK) {
    s = st->stmt[ST_HANG_COUNT];
    bind_filters(s, q);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      out->hangs = (uint64_t)sqlite3_column_int64(s, 0);
      rc = SQLITE_DONE;
    }
    rc = finish_scan(st, s, rc, 0, "hang count");
  }
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static int sqlite_time_buckets(store_t *st, const store_top_query_t *q, int64_t bucket_ns,
                               int64_t limit, store_bucket_row_fn fn, void *user) {
  if (!q->kind || bucket_ns <= 0) return STORE_ERROR;
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_TIME_BUCKETS];
  bind_filters(s, q);
  sqlite3_bind_int64(s, 7, bucket_ns);
  sqlite3_bind_int64(s, 8, limit);
  int rc, stopped = 0;
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_bucket_row_t row = {sqlite3_column_int64(s, 0) * bucket_ns,
                              (uint64_t)sqlite3_column_int64(s, 1), sqlite3_column_double(s, 2)};
    stopped = fn(&row, user);
  }
  rc = finish_scan(st, s, rc, stopped, "time buckets");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static int sqlite_event_states(store_t *st, int64_t id, store_state_row_fn fn, void *user) {
  pthread_mutex_lock(&st->lock);
  int rc = store_states_of_event(st->states, id, fn, user);
  if (rc != STORE_OK) report(st, "event states");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static int sqlite_state_rows(store_t *st, const store_top_query_t *q, store_state_row_fn fn,
                             void *user) {
  if (!q->kind) return STORE_ERROR;
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_STATE_ROWS];
  bind_filters(s, q);
  if (q->group) sqlite3_bind_text(s, 8, q->group, -1, SQLITE_STATIC);
  int rc, stopped = 0;
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_state_count_t row = {0, column_text(s, 0), column_text(s, 1), column_text(s, 2),
                               (uint64_t)sqlite3_column_int64(s, 3)};
    stopped = fn(&row, user);
  }
  rc = finish_scan(st, s, rc, stopped, "state rows");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

/* ---- re-symbolization ----------------------------------------------------- */

/* Rare (symbols arriving late): its statements are prepared per call. */
enum resym_stmt {
  RS_MATCHING,
  RS_UPSERT_STACK,
  RS_SET_FRAMES,
  RS_NOTE_EVENTS,
  RS_MERGE_COUNTS,
  RS_DROP_MERGED,
  RS_MOVE_COUNTS,
  RS_MOVE_DOMINANT,
  RS_DELETE_STACK,
  RS_UPSERT_GROUP,
  RS_NOTE_GROUP,
  RS_HANG_EVENTS,
  RS_EVENT_STACKS,
  RS_SET_GROUP,
  RS_DROP_GROUPS,
  RS_COUNT
};

static const char RESYM_TEMP[] =
    "CREATE TEMP TABLE IF NOT EXISTS resym_events(id INTEGER PRIMARY KEY);"
    "CREATE TEMP TABLE IF NOT EXISTS resym_groups(signature TEXT PRIMARY KEY);"
    "DELETE FROM resym_events; DELETE FROM resym_groups;";

/* ?1 the old signature, ?2 the new one. */
static const char *const RESYM_SQL[RS_COUNT] = {
    [RS_MATCHING] = "SELECT signature, frames, first_seen, last_seen FROM stacks"
                    " WHERE instr(frames, ?1) > 0",
    [RS_UPSERT_STACK] = "INSERT INTO stacks(signature, frames, first_seen, last_seen, stack_end)"
                        " VALUES(?2, ?3, ?4, ?5, (SELECT stack_end FROM stacks WHERE"
                        " signature = ?1)) ON CONFLICT(signature) DO UPDATE SET"
                        " first_seen = min(first_seen, excluded.first_seen),"
                        " last_seen = max(last_seen, excluded.last_seen)",
    [RS_SET_FRAMES] = "UPDATE stacks SET frames = ?3 WHERE signature = ?2",
    [RS_NOTE_EVENTS] = "INSERT OR IGNORE INTO resym_events(id)"
                       " SELECT event_id FROM stack_counts WHERE stack_sig = ?1",
    [RS_MERGE_COUNTS] =
        "UPDATE stack_counts AS n SET samples = n.samples + o.samples,"
        " cpu_us = CASE WHEN n.cpu_us IS NULL AND o.cpu_us IS NULL THEN NULL"
        " ELSE coalesce(n.cpu_us, 0) + coalesce(o.cpu_us, 0) END"
        " FROM (SELECT event_id, tid, sum(samples) AS samples, sum(cpu_us) AS cpu_us"
        " FROM stack_counts"
        " WHERE stack_sig = ?1 GROUP BY event_id, tid) AS o"
        " WHERE n.stack_sig = ?2 AND n.event_id = o.event_id AND n.tid IS o.tid",
    [RS_DROP_MERGED] = "DELETE FROM stack_counts WHERE stack_sig = ?1 AND EXISTS (SELECT 1 FROM"
                       " stack_counts n WHERE n.stack_sig = ?2 AND"
                       " n.event_id = stack_counts.event_id AND n.tid IS stack_counts.tid)",
    [RS_MOVE_COUNTS] = "UPDATE stack_counts SET stack_sig = ?2 WHERE stack_sig = ?1",
    [RS_MOVE_DOMINANT] = "UPDATE events SET dominant_stack_sig = ?2 WHERE dominant_stack_sig = ?1",
    [RS_DELETE_STACK] = "DELETE FROM stacks WHERE signature = ?1",
    [RS_UPSERT_GROUP] = "INSERT INTO groups(signature, frames, first_seen, last_seen)"
                        " VALUES(?2, ?3, ?4, ?5) ON CONFLICT(signature) DO UPDATE SET"
                        " first_seen = min(first_seen, excluded.first_seen),"
                        " last_seen = max(last_seen, excluded.last_seen)",
    [RS_NOTE_GROUP] = "INSERT OR IGNORE INTO resym_groups(signature) VALUES(?1)",
    [RS_HANG_EVENTS] = "SELECT e.id, e.dominant_stack_sig, e.group_sig, b.received_ns"
                       " FROM resym_events r JOIN events e ON e.id = r.id"
                       " JOIN batches b ON b.id = e.batch_id"
                       " WHERE e.kind IN ('hang', 'fatal_hang')",
    [RS_EVENT_STACKS] = "SELECT s.frames, c.samples FROM stack_counts c JOIN stacks s"
                        " ON s.signature = c.stack_sig WHERE c.event_id = ?1 AND c.samples > 0"
                        " ORDER BY c.stack_sig IS ?2 DESC, c.samples DESC, c.rowid",
    [RS_SET_GROUP] = "UPDATE events SET group_sig = ?2 WHERE id = ?1",
    [RS_DROP_GROUPS] =
        "DELETE FROM groups WHERE signature IN (SELECT signature FROM resym_groups)"
        " AND NOT EXISTS (SELECT 1 FROM stacks s WHERE s.signature = groups.signature)"
        " AND NOT EXISTS (SELECT 1 FROM events e WHERE e.group_sig = groups.signature)",
};

typedef struct resym_s {
  store_t *st;
  sqlite3_stmt *stmt[RS_COUNT];
  const store_renamer_t *r;
  uint64_t renamed;
} resym_t;

static int rs_done(resym_t *x, enum resym_stmt id) {
  sqlite3_stmt *s = x->stmt[id];
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Run statement id with ?1 = a, ?2 = b (either may be NULL: unbound). */
static int rs_run(resym_t *x, enum resym_stmt id, const char *a, const char *b) {
  if (a) sqlite3_bind_text(x->stmt[id], 1, a, -1, SQLITE_STATIC);
  if (b) sqlite3_bind_text(x->stmt[id], 2, b, -1, SQLITE_STATIC);
  return rs_done(x, id);
}

/* ?2 signature, ?3 frames, ?4 first seen, ?5 last seen. */
static int rs_upsert(resym_t *x, enum resym_stmt id, const char *sig, const char *frames,
                     int64_t first, int64_t last) {
  sqlite3_stmt *s = x->stmt[id];
  sqlite3_bind_text(s, 2, sig, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, frames, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 4, first);
  sqlite3_bind_int64(s, 5, last);
  return rs_done(x, id);
}

/* One stack renamed old -> stack: its rows follow it (merged into the
   stack with that signature when there is one already). */
static int move_stack(resym_t *x, const char *old, const store_stack_t *stack,
                      const store_group_t *group, int64_t first, int64_t last) {
  const char *sig = stack->signature;
  int rc = rs_run(x, RS_NOTE_EVENTS, old, NULL);
  if (rc == SQLITE_OK && strcmp(old, sig) == 0) {
    sqlite3_bind_text(x->stmt[RS_SET_FRAMES], 3, stack->frames_json, -1, SQLITE_STATIC);
    rc = rs_run(x, RS_SET_FRAMES, NULL, sig);
  } else if (rc == SQLITE_OK) {
    sqlite3_bind_text(x->stmt[RS_UPSERT_STACK], 1, old, -1, SQLITE_STATIC); /* its end */
    rc = rs_upsert(x, RS_UPSERT_STACK, sig, stack->frames_json, first, last);
    if (rc == SQLITE_OK) rc = rs_run(x, RS_MERGE_COUNTS, old, sig);
    if (rc == SQLITE_OK) rc = rs_run(x, RS_DROP_MERGED, old, sig);
    if (rc == SQLITE_OK) rc = rs_run(x, RS_MOVE_COUNTS, old, sig);
    if (rc == SQLITE_OK) rc = rs_run(x, RS_MOVE_DOMINANT, old, sig);
    if (rc == SQLITE_OK) rc = rs_run(x, RS_DELETE_STACK, old, NULL);
    if (rc == SQLITE_OK) rc = rs_run(x, RS_NOTE_GROUP, old, NULL);
  }
  if (rc == SQLITE_OK) rc = rs_upsert(x, RS_UPSERT_GROUP, sig, group->names_json, first, last);
  return rc;
}

typedef struct matched_s {
  char *sig, *frames;
  int64_t first, last;
} matched_t;

/* The stacks containing needle, read before any is changed. */
static int matching_stacks(resym_t *x, const char *needle, matched_t **out, size_t *n) {
  sqlite3_stmt *s = x->stmt[RS_MATCHING];
  sqlite3_bind_text(s, 1, needle, -1, SQLITE_STATIC);
  size_t cap = 0;
  int rc;
  *out = NULL;
  *n = 0;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    if (*n == cap) {
      matched_t *grown = realloc(*out, (cap = cap ? 2 * cap : 16) * sizeof **out);
      if (!grown) break;
      *out = grown;
    }
    matched_t *m = &(*out)[*n];
    m->sig = strdup(column_text(s, 0) ? column_text(s, 0) : "");
    m->frames = strdup(column_text(s, 1) ? column_text(s, 1) : "[]");
    m->first = sqlite3_column_int64(s, 2);
    m->last = sqlite3_column_int64(s, 3);
    (*n)++;
    if (!m->sig || !m->frames) break;
  }
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rc == SQLITE_DONE ? SQLITE_OK : SQLITE_NOMEM;
}

static int rename_matching(resym_t *x, const char *needle) {
  matched_t *m;
  size_t n;
  int rc = matching_stacks(x, needle, &m, &n);
  for (size_t i = 0; rc == SQLITE_OK && i < n; i++) {
    store_stack_t stack = {0};
    store_group_t group = {0};
    int changed = x->r->rename_stack(x->r->user, m[i].frames, &stack, &group);
    if (changed < 0) rc = SQLITE_NOMEM;
    if (changed > 0) {
      rc = move_stack(x, m[i].sig, &stack, &group, m[i].first, m[i].last);
      x->renamed++;
    }
    free((char *)stack.frames_json);
    free((char *)group.names_json);
  }
  for (size_t i = 0; i < n; i++)
    free(m[i].sig), free(m[i].frames);
  free(m);
  return rc;
}

/* A hang event whose stacks changed: its group again from its stacks,
   picked among the stored hang groups as put_batch picks. */
static int regroup_event(resym_t *x, int64_t id, const char *dominant, const char *old_group,
                         int64_t received_ns) {
  sqlite3_stmt *s = x->stmt[RS_EVENT_STACKS];
  sqlite3_bind_int64(s, 1, id);
  if (dominant) sqlite3_bind_text(s, 2, dominant, -1, SQLITE_TRANSIENT);
  char **frames = NULL;
  uint64_t *samples = NULL;
  size_t n = 0, cap = 0;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    if (n == cap) {
      cap = cap ? 2 * cap : 8;
      char **grown = realloc(frames, cap * sizeof *frames);
      if (grown) frames = grown;
      uint64_t *more = realloc(samples, cap * sizeof *samples);
      if (more) samples = more;
      if (!grown || !more) break;
    }
    samples[n] = (uint64_t)sqlite3_column_int64(s, 1);
    if (!(frames[n++] = strdup(column_text(s, 0) ? column_text(s, 0) : "[]"))) break;
  }
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  rc = rc == SQLITE_DONE ? SQLITE_OK : SQLITE_NOMEM;
  store_hang_t hang = {0};
  char group[STORE_SIG_CHARS + 1];
  if (rc == SQLITE_OK && n) {
    if (x->r->hang_group(x->r->user, (const char *const *)frames, samples, n, &hang) != 0)
      rc = SQLITE_NOMEM;
    if (rc == SQLITE_OK) rc = hang_groups_assign(x->st->hang, &hang, received_ns, group);
    if (rc == SQLITE_OK && old_group) rc = rs_run(x, RS_NOTE_GROUP, old_group, NULL);
    if (rc == SQLITE_OK) {
      sqlite3_bind_int64(x->stmt[RS_SET_GROUP], 1, id);
      rc = rs_run(x, RS_SET_GROUP, NULL, group);
    }
    x->r->hang_free(x->r->user, &hang);
  }
  for (size_t i = 0; i < n; i++)
    free(frames[i]);
  free(frames);
  free(samples);
  return rc;
}

typedef struct hang_row_s {
  int64_t id, received_ns;
  char *dominant, *group;
} hang_row_t;

static int regroup_hangs(resym_t *x) {
  sqlite3_stmt *s = x->stmt[RS_HANG_EVENTS];
  hang_row_t *rows = NULL;
  size_t n = 0, cap = 0;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    if (n == cap) {
      hang_row_t *grown = realloc(rows, (cap = cap ? 2 * cap : 16) * sizeof *rows);
      if (!grown) break;
      rows = grown;
    }
    const char *d = column_text(s, 1), *g = column_text(s, 2);
    rows[n] = (hang_row_t){sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 3),
                           d ? strdup(d) : NULL, g ? strdup(g) : NULL};
    n++;
  }
  sqlite3_reset(s);
  rc = rc == SQLITE_DONE ? SQLITE_OK : SQLITE_NOMEM;
  for (size_t i = 0; rc == SQLITE_OK && i < n; i++)
    rc = regroup_event(x, rows[i].id, rows[i].dominant, rows[i].group, rows[i].received_ns);
  for (size_t i = 0; i < n; i++)
    free(rows[i].dominant), free(rows[i].group);
  free(rows);
  return rc;
}

static int resymbolize_locked(resym_t *x, const char *needle) {
  store_t *st = x->st;
  int rc = sqlite3_exec(st->db, RESYM_TEMP, NULL, NULL, NULL);
  for (int i = 0; rc == SQLITE_OK && i < RS_COUNT; i++)
    rc = sqlite3_prepare_v2(st->db, RESYM_SQL[i], -1, &x->stmt[i], NULL);
  if (rc != SQLITE_OK) {
    report(st, "resymbolize prepare");
    return STORE_ERROR;
  }
  if (step_done(st, ST_BEGIN) != SQLITE_OK) {
    report(st, "begin");
    return STORE_ERROR;
  }
  rc = rename_matching(x, needle);
  if (rc == SQLITE_OK && x->renamed) rc = regroup_hangs(x);
  if (rc == SQLITE_OK && x->renamed) rc = rs_done(x, RS_DROP_GROUPS);
  if (rc == SQLITE_OK && x->renamed) rc = hang_groups_prune(st->hang);
  if (rc == SQLITE_OK && x->renamed) rc = store_rollups_mark_resym(st->rollups);
  if (rc == SQLITE_OK && x->renamed) rc = store_rollups_rebuild(st->rollups);
  if (rc == SQLITE_OK) rc = step_done(st, ST_COMMIT);
  if (rc == SQLITE_OK) return STORE_OK;
  report(st, "resymbolize");
  step_done(st, ST_ROLLBACK);
  return STORE_ERROR;
}

static int sqlite_resymbolize(store_t *st, const char *needle, const store_renamer_t *r,
                              uint64_t *renamed) {
  resym_t x = {.st = st, .r = r};
  char why[64];
  if (renamed) *renamed = 0;
  if (sqlite_check(st, why, sizeof why) != STORE_OK) return STORE_LOST;
  pthread_mutex_lock(&st->lock);
  int rc = resymbolize_locked(&x, needle);
  for (int i = 0; i < RS_COUNT; i++)
    sqlite3_finalize(x.stmt[i]);
  pthread_mutex_unlock(&st->lock);
  if (renamed) *renamed = rc == STORE_OK ? x.renamed : 0;
  return rc;
}

/* The rows of statement id for sig to fn(i, ...) until it has enough;
   1 when it had, 0 when not, -1 on failure. The lock is held. */
static int group_rows(store_t *st, enum stmt_id id, const char *sig, size_t i,
                      store_group_stack_fn fn, void *user) {
  sqlite3_stmt *s = st->stmt[id];
  sqlite3_bind_text(s, 1, sig, -1, SQLITE_STATIC);
  int step, enough = 0;
  while (!enough && (step = sqlite3_step(s)) == SQLITE_ROW) {
    const char *frames = column_text(s, 0);
    if (frames) enough = fn(i, frames, user) != 0;
  }
  int rc = finish_scan(st, s, enough ? SQLITE_DONE : step, 0, "group stacks");
  return rc != STORE_OK ? -1 : enough;
}

static int sqlite_group_stacks(store_t *st, const char *const *sigs, size_t n,
                               store_group_stack_fn fn, void *user) {
  pthread_mutex_lock(&st->lock);
  int rc = 0;
  for (size_t i = 0; rc >= 0 && i < n; i++) {
    rc = group_rows(st, ST_STACK_FRAMES, sigs[i], i, fn, user);
    if (rc == 0) rc = group_rows(st, ST_GROUP_STACKS, sigs[i], i, fn, user);
  }
  pthread_mutex_unlock(&st->lock);
  return rc < 0 ? STORE_ERROR : STORE_OK;
}

const store_ops_t store_sqlite_ops = {
    .name = "sqlite",
    .open = sqlite_open,
    .close = sqlite_close,
    .put_batch = sqlite_put_batch,
    .delete_older_than = sqlite_delete_older_than,
    .stats = sqlite_stats,
    .check = sqlite_check,
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
};
