/*
 * pg_migrations.c - the PostgreSQL backend's versioned schema: the SQLite
 * backend's tables with PostgreSQL types (bytea batch ids, bigint
 * nanoseconds, bigserial event ids). schema_version holds the version the
 * database is at, and open applies each newer MIGRATIONS entry in its own
 * transaction under an advisory lock (two collectors starting at once
 * migrate once). A migration is appended, never edited.
 */
#include <stdio.h>

#include "collector/base/log.h"
#include "collector/store/pg/pg_store.h"
#include "collector/store/rollup_sql.h"

#define PG_LOCK_MIGRATE 0x70657266000
#define PG_DAY_NS "86400000000000"

/* The rollup tables of a level ("" 10 minutes, "_day"), with a shard per
   collector (pg_rollups.c), and their rows built from the raw rows. */
#define PG_GROUPS_TABLE(lvl)                                                                       \
  "CREATE TABLE rollup_groups" lvl "(bucket_ns bigint NOT NULL, app text COLLATE \"C\" NOT NULL,"  \
  " version text COLLATE \"C\" NOT NULL, environment text COLLATE \"C\" NOT NULL,"                 \
  " kind text COLLATE \"C\" NOT NULL, group_sig text COLLATE \"C\" NOT NULL,"                      \
  " label text COLLATE \"C\" NOT NULL, dbin integer NOT NULL, shard integer NOT NULL,"             \
  " events bigint NOT NULL, samples bigint NOT NULL, total_ns bigint NOT NULL,"                    \
  " first_ns bigint NOT NULL, last_ns bigint NOT NULL, max_ns bigint NOT NULL,"                    \
  " cpu_us bigint NOT NULL DEFAULT 0, PRIMARY KEY(" ROLLUP_GROUP_COLS ", shard));"
#define PG_STACKS_TABLE(lvl)                                                                       \
  "CREATE TABLE rollup_stacks" lvl "(bucket_ns bigint NOT NULL, app text COLLATE \"C\" NOT NULL,"  \
  " version text COLLATE \"C\" NOT NULL, environment text COLLATE \"C\" NOT NULL,"                 \
  " kind text COLLATE \"C\" NOT NULL, group_sig text COLLATE \"C\" NOT NULL,"                      \
  " stack_sig text COLLATE \"C\" NOT NULL, label text COLLATE \"C\" NOT NULL,"                     \
  " shard integer NOT NULL, samples bigint NOT NULL, wall_ns bigint NOT NULL,"                     \
  " first_ns bigint NOT NULL, last_end_ns bigint NOT NULL, cpu_us bigint NOT NULL DEFAULT 0,"      \
  " PRIMARY KEY(" ROLLUP_STACK_COLS ", shard));"
/* The 10-minute rollup rows of the batches not folded yet: the rollup
   tables' columns less the shard, without an index (appends only). */
#define PG_DELTA_TABLES                                                                            \
  "CREATE TABLE rollup_groups_delta(bucket_ns bigint NOT NULL, app text COLLATE \"C\" NOT NULL,"   \
  " version text COLLATE \"C\" NOT NULL, environment text COLLATE \"C\" NOT NULL,"                 \
  " kind text COLLATE \"C\" NOT NULL, group_sig text COLLATE \"C\" NOT NULL,"                      \
  " label text COLLATE \"C\" NOT NULL, dbin integer NOT NULL, events bigint NOT NULL,"             \
  " samples bigint NOT NULL, total_ns bigint NOT NULL, first_ns bigint NOT NULL,"                  \
  " last_ns bigint NOT NULL, max_ns bigint NOT NULL, cpu_us bigint NOT NULL DEFAULT 0);"           \
  "CREATE TABLE rollup_stacks_delta(bucket_ns bigint NOT NULL, app text COLLATE \"C\" NOT NULL,"   \
  " version text COLLATE \"C\" NOT NULL, environment text COLLATE \"C\" NOT NULL,"                 \
  " kind text COLLATE \"C\" NOT NULL, group_sig text COLLATE \"C\" NOT NULL,"                      \
  " stack_sig text COLLATE \"C\" NOT NULL, label text COLLATE \"C\" NOT NULL,"                     \
  " samples bigint NOT NULL, wall_ns bigint NOT NULL, first_ns bigint NOT NULL,"                   \
  " last_end_ns bigint NOT NULL, cpu_us bigint NOT NULL DEFAULT 0);"
#define PG_BUILD(lvl, size)                                                                        \
  ROLLUP_GROUPS_HANG(lvl, size, ", shard", ", 0", "events e", "true")                              \
  ";" ROLLUP_GROUPS_CPU(lvl, size, ", shard", ", 0", "events e", "true") ";" ROLLUP_STACKS(        \
      lvl, size, ", shard", ", 0", "events e", "true") ";"

/* Version 8's change to a level's rollup tables (or the delta tables):
   CPU time (cpu_us, the last column) and an integer wall time. Tables
   migration 4 or 6 made with this collector's definitions have both: then
   nothing changes. */
#define PG_CPU_TIME(groups, stacks)                                                                \
  "ALTER TABLE " groups " ADD COLUMN IF NOT EXISTS cpu_us bigint NOT NULL DEFAULT 0;"              \
  "ALTER TABLE " stacks " ADD COLUMN IF NOT EXISTS cpu_us bigint NOT NULL DEFAULT 0;"              \
  "ALTER TABLE " stacks " ALTER COLUMN wall_ns TYPE bigint;"

/* MIGRATIONS[i] takes a database from version i to i + 1. */
static const char *const MIGRATIONS[] = {
    /* 1: the tables of the SQLite schema when PostgreSQL was added. */
    "CREATE TABLE batches(id bytea PRIMARY KEY, received_ns bigint NOT NULL, app text,"
    " version text, environment text, host text, pid bigint,"
    " dropped_rate_limited bigint NOT NULL DEFAULT 0, dropped_queue_full bigint NOT NULL DEFAULT 0,"
    " dropped_sink_failed bigint NOT NULL DEFAULT 0, dropped_spool_quota bigint NOT NULL DEFAULT 0,"
    " dropped_oversized bigint NOT NULL DEFAULT 0);"
    "CREATE INDEX batches_received ON batches(received_ns);"
    "CREATE TABLE events(id bigserial PRIMARY KEY, batch_id bytea NOT NULL, kind text NOT NULL,"
    " start_ns bigint, duration_ns bigint, tid bigint, cpu_percent bigint, reason text,"
    " dominant_stack_sig text, group_sig text, label text);"
    "CREATE INDEX events_batch ON events(batch_id);"
    "CREATE INDEX events_group ON events(group_sig);"
    "CREATE INDEX events_start ON events(start_ns);"
    "CREATE TABLE stacks(signature text COLLATE \"C\" PRIMARY KEY, frames text NOT NULL,"
    " first_seen bigint NOT NULL, last_seen bigint NOT NULL, stack_end text);"
    "CREATE TABLE stack_counts(id bigserial PRIMARY KEY, event_id bigint NOT NULL,"
    " stack_sig text COLLATE \"C\" NOT NULL, tid bigint, samples bigint NOT NULL);"
    "CREATE INDEX stack_counts_event ON stack_counts(event_id);"
    "CREATE INDEX stack_counts_sig ON stack_counts(stack_sig);"
    "CREATE TABLE groups(signature text COLLATE \"C\" PRIMARY KEY, frames text NOT NULL,"
    " first_seen bigint NOT NULL, last_seen bigint NOT NULL);"
    "CREATE TABLE batch_tags(batch_id bytea NOT NULL, key text COLLATE \"C\" NOT NULL,"
    " value text COLLATE \"C\" NOT NULL, PRIMARY KEY(batch_id, key, value));"
    "CREATE INDEX batch_tags_pair ON batch_tags(key, value);"
    "CREATE TABLE loop_stats(batch_id bytea PRIMARY KEY, watched_ns bigint NOT NULL,"
    " busy_ns bigint NOT NULL, u0 bigint NOT NULL, u1 bigint NOT NULL, u2 bigint NOT NULL,"
    " u3 bigint NOT NULL, u4 bigint NOT NULL, u5 bigint NOT NULL, u6 bigint NOT NULL,"
    " u7 bigint NOT NULL, u8 bigint NOT NULL);"
    "CREATE TABLE hang_groups(signature text COLLATE \"C\" PRIMARY KEY,"
    " path text COLLATE \"C\" NOT NULL);"
    "CREATE INDEX hang_groups_path ON hang_groups(path);"
    "CREATE TABLE hang_group_children(group_sig text COLLATE \"C\" NOT NULL,"
    " child text COLLATE \"C\" NOT NULL, samples bigint NOT NULL, PRIMARY KEY(group_sig, child));"
    "CREATE TABLE hang_group_path(group_sig text COLLATE \"C\" PRIMARY KEY, samples bytea NOT "
    "NULL);"
    "CREATE TABLE event_states(id bigserial PRIMARY KEY, event_id bigint NOT NULL,"
    " tid bigint NOT NULL, state text COLLATE \"C\" NOT NULL, syscall text COLLATE \"C\" NOT NULL,"
    " fd text COLLATE \"C\" NOT NULL, samples bigint NOT NULL);"
    "CREATE INDEX event_states_event ON event_states(event_id);",
    /* 2: a CPU event's CPU time per stack count (CPU profiles: the SDK's
       sample weights); NULL (rows stored before, other kinds,
       older SDKs): the count weighs its samples. Adds a column only: a
       collector at version 1 keeps working beside it. */
    "ALTER TABLE stack_counts ADD COLUMN cpu_us bigint;",
    /* 3: events, stack counts and thread states partitioned by the day
       their batch was received (received_ns, copied from the batch), so
       retention drops whole days (pg_partitions.c); a default
       partition takes rows of days without one. The rows stored are
       moved into their days. */
    "ALTER SEQUENCE events_id_seq OWNED BY NONE;"
    "ALTER SEQUENCE stack_counts_id_seq OWNED BY NONE;"
    "ALTER SEQUENCE event_states_id_seq OWNED BY NONE;"
    "ALTER TABLE events RENAME TO events_v2; ALTER INDEX events_pkey RENAME TO events_v2_pkey;"
    "ALTER INDEX events_batch RENAME TO events_v2_batch;"
    "ALTER INDEX events_group RENAME TO events_v2_group;"
    "ALTER INDEX events_start RENAME TO events_v2_start;"
    "ALTER TABLE stack_counts RENAME TO stack_counts_v2;"
    "ALTER INDEX stack_counts_pkey RENAME TO stack_counts_v2_pkey;"
    "ALTER INDEX stack_counts_event RENAME TO stack_counts_v2_event;"
    "ALTER INDEX stack_counts_sig RENAME TO stack_counts_v2_sig;"
    "ALTER TABLE event_states RENAME TO event_states_v2;"
    "ALTER INDEX event_states_pkey RENAME TO event_states_v2_pkey;"
    "ALTER INDEX event_states_event RENAME TO event_states_v2_event;"
    "CREATE TABLE events(id bigint NOT NULL DEFAULT nextval('events_id_seq'),"
    " batch_id bytea NOT NULL, kind text NOT NULL, start_ns bigint, duration_ns bigint,"
    " tid bigint, cpu_percent bigint, reason text, dominant_stack_sig text, group_sig text,"
    " label text, received_ns bigint NOT NULL DEFAULT 0, PRIMARY KEY(id, received_ns))"
    " PARTITION BY RANGE (received_ns);"
    "CREATE TABLE stack_counts(id bigint NOT NULL DEFAULT nextval('stack_counts_id_seq'),"
    " event_id bigint NOT NULL, stack_sig text COLLATE \"C\" NOT NULL, tid bigint,"
    " samples bigint NOT NULL, cpu_us bigint, received_ns bigint NOT NULL DEFAULT 0,"
    " PRIMARY KEY(id, received_ns)) PARTITION BY RANGE (received_ns);"
    "CREATE TABLE event_states(id bigint NOT NULL DEFAULT nextval('event_states_id_seq'),"
    " event_id bigint NOT NULL, tid bigint NOT NULL, state text COLLATE \"C\" NOT NULL,"
    " syscall text COLLATE \"C\" NOT NULL, fd text COLLATE \"C\" NOT NULL,"
    " samples bigint NOT NULL, received_ns bigint NOT NULL DEFAULT 0,"
    " PRIMARY KEY(id, received_ns)) PARTITION BY RANGE (received_ns);"
    "ALTER SEQUENCE events_id_seq OWNED BY events.id;"
    "ALTER SEQUENCE stack_counts_id_seq OWNED BY stack_counts.id;"
    "ALTER SEQUENCE event_states_id_seq OWNED BY event_states.id;"
    "CREATE TABLE events_default PARTITION OF events DEFAULT;"
    "CREATE TABLE stack_counts_default PARTITION OF stack_counts DEFAULT;"
    "CREATE TABLE event_states_default PARTITION OF event_states DEFAULT;"
    /* perf_day_partitions(day): the day's partition of each table (day:
       received_ns / 86400 s), made when missing. */
    "CREATE FUNCTION perf_day_partitions(day bigint) RETURNS void LANGUAGE plpgsql AS $$"
    " DECLARE t text; BEGIN FOREACH t IN ARRAY ARRAY['events', 'stack_counts', 'event_states']"
    " LOOP EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I"
    " FOR VALUES FROM (%s) TO (%s)', t || '_d' || day, t, day * " PG_DAY_NS ","
    " (day + 1) * " PG_DAY_NS "); END LOOP; END $$;"
    "SELECT perf_day_partitions(d) FROM (SELECT DISTINCT received_ns / " PG_DAY_NS " AS d"
    " FROM batches WHERE received_ns > 0) AS days;"
    "INSERT INTO events(id, batch_id, kind, start_ns, duration_ns, tid, cpu_percent, reason,"
    " dominant_stack_sig, group_sig, label, received_ns) SELECT o.id, o.batch_id, o.kind,"
    " o.start_ns, o.duration_ns, o.tid, o.cpu_percent, o.reason, o.dominant_stack_sig,"
    " o.group_sig, o.label, coalesce(b.received_ns, 0) FROM events_v2 o"
    " LEFT JOIN batches b ON b.id = o.batch_id;"
    "INSERT INTO stack_counts(id, event_id, stack_sig, tid, samples, cpu_us, received_ns)"
    " SELECT c.id, c.event_id, c.stack_sig, c.tid, c.samples, c.cpu_us,"
    " coalesce((SELECT b.received_ns FROM events_v2 e JOIN batches b ON b.id = e.batch_id"
    " WHERE e.id = c.event_id), 0) FROM stack_counts_v2 c;"
    "INSERT INTO event_states(id, event_id, tid, state, syscall, fd, samples, received_ns)"
    " SELECT x.id, x.event_id, x.tid, x.state, x.syscall, x.fd, x.samples,"
    " coalesce((SELECT b.received_ns FROM events_v2 e JOIN batches b ON b.id = e.batch_id"
    " WHERE e.id = x.event_id), 0) FROM event_states_v2 x;"
    "DROP TABLE events_v2; DROP TABLE stack_counts_v2; DROP TABLE event_states_v2;"
    "CREATE INDEX events_batch ON events(batch_id);"
    "CREATE INDEX events_group ON events(group_sig);"
    "CREATE INDEX events_start ON events(start_ns);"
    "CREATE INDEX stack_counts_event ON stack_counts(event_id);"
    "CREATE INDEX stack_counts_sig ON stack_counts(stack_sig);"
    "CREATE INDEX event_states_event ON event_states(event_id);",
    /* 4: rollups (rollup.h, rollup_sql.h), built from the rows stored so
       far; the events' start index serves the rollups' edges. */
    "CREATE FUNCTION perf_dbin(d bigint) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE"
    " AS $$ SELECT CASE WHEN d < 8 THEN greatest(d, 0)::integer"
    " ELSE (8 * (length(ltrim(d::bit(64)::text, '0')) - 3)"
    " + ((d >> (length(ltrim(d::bit(64)::text, '0')) - 4)) & 7))::integer END $$;" PG_GROUPS_TABLE(
        "") PG_STACKS_TABLE("") PG_GROUPS_TABLE("_day") PG_STACKS_TABLE("_day")
        PG_BUILD("", ROLLUP_BUCKET_SQL) PG_BUILD("_day", ROLLUP_DAY_SQL),
    /* 5: stack_epoch, bumped by whatever deletes stored stacks or groups
       (re-symbolization, retention): a collector that read another value
       forgets which rows it knew stored (collector/store/known_rows.c). */
    "CREATE TABLE stack_epoch(epoch bigint NOT NULL); INSERT INTO stack_epoch VALUES(0);",
    /* 6: the rollup rows of the batches, appended (pg_rollups.c),
       until a collector folds them into the rollup tables
       (pg_fold.c); the reads add them. A collector at version 5
       beside it keeps upserting the rollup tables: the same sums. */
    PG_DELTA_TABLES,
    /* 7: the mark whose setval makes a batch's asynchronous commit
       durable (put_once, durable_mark). */
    "CREATE SEQUENCE wal_flush_mark;",
    /* 8: CPU time and hang time per stack, apart from samples: the rollup
       rows keep samples (a count, for cpu stacks too), CPU time (cpu_us)
       and each stack's wall time as an integer (rollup_wall_share); every
       row is built again from the raw rows (the delta rows too: they are
       of the raw rows stored). A collector at version 7 beside it adds CPU
       time to samples: replace every collector. */
    PG_CPU_TIME("rollup_groups", "rollup_stacks")
        PG_CPU_TIME("rollup_groups_day", "rollup_stacks_day") PG_CPU_TIME(
            "rollup_groups_delta",
            "rollup_stacks_delta") "TRUNCATE rollup_groups, rollup_stacks, rollup_groups_day, "
                                   "rollup_stacks_day,"
                                   " rollup_groups_delta, rollup_stacks_delta;" PG_BUILD(
                                       "", ROLLUP_BUCKET_SQL) PG_BUILD("_day", ROLLUP_DAY_SQL),
    /* 9: the loop each event came from ("main" or the name the SDK's
       perf_sdk_loop_register gave it); NULL in the rows stored before
       (their loop is unknown) and in events of no loop. Adds a column
       only: a collector at version 8 keeps working beside it. */
    "ALTER TABLE events ADD COLUMN IF NOT EXISTS loop_name text;",
    /* 10: each loop's stats of a batch whose SDK named its loops
       (Batch.loops), beside their sum in loop_stats; none for the batches
       stored before. Adds a table only: a collector at version 9 keeps
       working beside it (its batches have no rows there). */
    "CREATE TABLE IF NOT EXISTS loop_stats_by_loop(batch_id bytea NOT NULL,"
    " loop_name text COLLATE \"C\" NOT NULL, watched_ns bigint NOT NULL, busy_ns bigint NOT NULL,"
    " u0 bigint NOT NULL, u1 bigint NOT NULL, u2 bigint NOT NULL, u3 bigint NOT NULL,"
    " u4 bigint NOT NULL, u5 bigint NOT NULL, u6 bigint NOT NULL, u7 bigint NOT NULL,"
    " u8 bigint NOT NULL, PRIMARY KEY(batch_id, loop_name));",
    /* 11: alert rules and the alerts they raised (store.h alert_rule_add
       .. alert_rows), one alert per rule and key on every collector of
       the database. Adds tables only: a collector at version 10 keeps
       working beside it (and raises no alerts). */
    "CREATE TABLE IF NOT EXISTS alert_rules(id bigserial PRIMARY KEY, kind text NOT NULL,"
    " url text NOT NULL, format text NOT NULL, app text, event_kind text,"
    " created_ns bigint NOT NULL);"
    "CREATE TABLE IF NOT EXISTS alerts(id bigserial PRIMARY KEY, rule_id bigint NOT NULL,"
    " alert_key text NOT NULL, state text NOT NULL, status bigint NOT NULL,"
    " attempts bigint NOT NULL, time_ns bigint NOT NULL, summary text NOT NULL,"
    " link text NOT NULL, UNIQUE(rule_id, alert_key));"
    "CREATE INDEX IF NOT EXISTS alerts_time ON alerts(time_ns);",
};
#define SCHEMA_VERSION ((int)(sizeof MIGRATIONS / sizeof MIGRATIONS[0]))
_Static_assert(STORE_LOOP_BUCKETS == 9, "loop_stats has one column per bucket");

/* The database at SCHEMA_VERSION: each missing migration in its own
   transaction, under an advisory lock so collectors starting together
   migrate once; a database newer than this collector is refused. */
int pg_migrate(store_t *st) {
  pg_params_t p = {0};
  for (;;) {
    if (pg_do(st, "BEGIN", NULL, "begin") != 0) return -1;
    pg_int(&p, 1, PG_LOCK_MIGRATE);
    PGresult *r = NULL;
    if (pg_do(st, "SELECT pg_advisory_xact_lock($1::bigint)", &p, "migration lock") == 0 &&
        pg_do(st, "CREATE TABLE IF NOT EXISTS schema_version(version integer NOT NULL)", NULL,
              "schema_version") == 0)
      r = pg_run(st, "SELECT coalesce(max(version), 0) FROM schema_version", NULL,
                 "schema version");
    if (!r) break;
    int at = (int)pg_i64(r, 0, 0);
    PQclear(r);
    if (at > SCHEMA_VERSION) {
      collector_log("postgresql schema version %d is newer than this collector's (%d):"
                    " run a newer perf-collector\n",
                    at, SCHEMA_VERSION);
      break;
    }
    if (at == SCHEMA_VERSION) return pg_do(st, "COMMIT", NULL, "commit");
    pg_int(&p, 1, at + 1);
    if (pg_do(st, MIGRATIONS[at], NULL, "migration") != 0 ||
        pg_do(st, "DELETE FROM schema_version", NULL, "schema version") != 0 ||
        pg_do(st, "INSERT INTO schema_version(version) VALUES($1::integer)", &p,
              "schema version") != 0 ||
        pg_do(st, "COMMIT", NULL, "commit") != 0)
      break;
    collector_log("postgresql schema migrated to version %d\n", at + 1);
  }
  pg_do(st, "ROLLBACK", NULL, "rollback");
  return -1;
}
