/*
 * query_sql.h - the read statements' filters as SQL text, written once for
 * every backend, reading the slots of query_params.h. A backend defines
 * how a slot is written before it uses these (they expand where used):
 *   SQL_SLOT(n)   the slot n as its SQL dialect writes it ("?11", "$11")
 *   SQL_TEXT(n)   the slot as text where its type must be known (a NULL
 *                 test: PostgreSQL "$11::text"; SQLite as SQL_SLOT)
 *   SQL_INT(n)    the slot as a 64-bit integer ("$4::bigint")
 * The aliases are the schema's: b batches, e events, r a rollup table,
 * t batch_tags.
 */
#ifndef PERF_COLLECTOR_QUERY_SQL_H
#define PERF_COLLECTOR_QUERY_SQL_H

#include "collector/store/query_params.h"
#include "collector/store/store.h" /* STORE_STR */

#define QSQL_SLOT(n) SQL_SLOT(STORE_STR(n))
#define QSQL_TEXT(n) SQL_TEXT(STORE_STR(n))
#define QSQL_INT(n) SQL_INT(STORE_STR(n))

/* The column col equals the text in slot, or the slot is NULL (any). */
#define QSQL_OPTIONAL(col, slot)                                                                   \
  " AND (" QSQL_TEXT(slot) " IS NULL OR " col " = " QSQL_SLOT(slot) ")"

/* The batch has tag key (slot k) = value (slot v); NULL key: any. */
#define QSQL_TAG_FILTER(k, v)                                                                      \
  " AND (" QSQL_TEXT(k) " IS NULL OR EXISTS (SELECT 1 FROM batch_tags t"                           \
                        " WHERE t.batch_id = b.id AND t.key = " QSQL_SLOT(                         \
                            k) " AND t.value = " QSQL_SLOT(v) "))"

/* The batch's resource (app, version, environment, host: NULL any) and
   every tag filter. */
#define QSQL_BATCH_FILTERS                                                                         \
  QSQL_OPTIONAL("b.app", STORE_SLOT_APP)                                                           \
  QSQL_OPTIONAL("b.version", STORE_SLOT_VERSION)                                                   \
  QSQL_OPTIONAL("b.environment", STORE_SLOT_ENVIRONMENT)                                           \
  QSQL_OPTIONAL("b.host", STORE_SLOT_HOST)                                                         \
  QSQL_TAG_FILTER(11, 12) QSQL_TAG_FILTER(13, 14) QSQL_TAG_FILTER(15, 16) QSQL_TAG_FILTER(17, 18)
_Static_assert(STORE_SLOT_TAG == 11 && STORE_MAX_TAG_FILTERS == 4,
               "QSQL_BATCH_FILTERS has one QSQL_TAG_FILTER per tag filter, from slot 11");

/* The batch filters, then the event's start in from..to and its label
   (NULL any). */
#define QSQL_TOP_FILTERS                                                                           \
  QSQL_BATCH_FILTERS                                                                               \
  " AND e.start_ns >= " QSQL_INT(STORE_SLOT_FROM) " AND e.start_ns <= " QSQL_INT(STORE_SLOT_TO)    \
      QSQL_OPTIONAL("e.label", STORE_SLOT_LABEL)

/* Only the events of a loop (NULL any): the event list's own filter, as
   the rollups keep no loop. */
#define QSQL_LOOP_FILTER QSQL_OPTIONAL("e.loop_name", STORE_SLOT_LOOP)

/* The loop stats of one loop (the loop slot, not NULL) as a table of the
   columns of loop_stats: the batches' rows of that loop in
   loop_stats_by_loop, and for "main" the sums of the batches that named
   no loop (an SDK that watched one loop only watched the main loop). */
#define QSQL_LOOP_COLUMNS "batch_id, watched_ns, busy_ns, u0, u1, u2, u3, u4, u5, u6, u7, u8"
#define QSQL_STATS_OF_LOOP                                                                         \
  "(SELECT " QSQL_LOOP_COLUMNS " FROM loop_stats_by_loop WHERE loop_name = " QSQL_SLOT(            \
      STORE_SLOT_LOOP) " UNION ALL SELECT " QSQL_LOOP_COLUMNS                                      \
                       " FROM loop_stats o WHERE " QSQL_TEXT(                                      \
                           STORE_SLOT_LOOP) " = 'main' AND NOT EXISTS (SELECT 1 FROM"              \
                                            " loop_stats_by_loop n WHERE n.batch_id = "            \
                                            "o.batch_id))"

/* The batch filters, then the batch's arrival in from..to. */
#define QSQL_DROPS_FILTERS                                                                         \
  QSQL_BATCH_FILTERS                                                                               \
  " AND b.received_ns >= " QSQL_INT(STORE_SLOT_FROM) " AND b.received_ns <= " QSQL_INT(            \
      STORE_SLOT_TO)

/* The kind: "hang" (hang and fatal_hang) or another kind, exactly; alias
   a (e or r). */
#define QSQL_KIND_FILTER(a)                                                                        \
  "(" a ".kind = " QSQL_SLOT(STORE_SLOT_KIND) " OR (" QSQL_SLOT(                                   \
      STORE_SLOT_KIND) " = 'hang'"                                                                 \
                       " AND " a ".kind = 'fatal_hang'))"

/* The events a list shows: of the kind in the slot (QSQL_KIND_FILTER), or
   without one every kind but "profile": the always-on profile's windows
   (one a minute per process) are not slow moments, and are listed only
   when asked for by their kind. Alias a (e). */
#define QSQL_LISTED_KIND(a)                                                                        \
  "((" QSQL_TEXT(STORE_SLOT_KIND) " IS NULL AND " a                                                \
                                  ".kind <> 'profile') OR " QSQL_KIND_FILTER(a) ")"

/* The kinds whose stacks are each a group of their own (cpu, profile:
   store_kind_cpu_time), the one in the slot exactly; alias a (e or r). */
#define QSQL_CPU_KIND(a) a ".kind = " QSQL_SLOT(STORE_SLOT_KIND)

/* Only the events of a group (NULL any); alias a (e or r). */
#define QSQL_GROUP_FILTER(a) QSQL_OPTIONAL(a ".group_sig", STORE_SLOT_GROUP)

/* A rollup row's resource and label (the rollups keep no host or tags:
   rollup_answers). */
#define QSQL_ROLLUP_FILTERS                                                                        \
  QSQL_OPTIONAL("r.app", STORE_SLOT_APP)                                                           \
  QSQL_OPTIONAL("r.version", STORE_SLOT_VERSION)                                                   \
  QSQL_OPTIONAL("r.environment", STORE_SLOT_ENVIRONMENT)                                           \
  QSQL_OPTIONAL("r.label", STORE_SLOT_LABEL)

/* A rollup row's bucket, or an event's start, within the plan's slots lo..hi. */
#define QSQL_RANGE(lo, hi) " AND r.bucket_ns >= " QSQL_INT(lo) " AND r.bucket_ns <= " QSQL_INT(hi)
#define QSQL_RAW_RANGE(lo, hi) " AND e.start_ns >= " QSQL_INT(lo) " AND e.start_ns <= " QSQL_INT(hi)

/* An event with its batch's resource, in the order store_event_row reads
   it (rows.h); tags_json: the backend's JSON array of the batch's tags. */
#define QSQL_EVENT_COLUMNS(tags_json)                                                              \
  "e.id, e.kind, e.start_ns, e.duration_ns, e.tid, e.cpu_percent, e.reason, b.app, b.version,"     \
  " b.environment, e.group_sig, " tags_json ", e.label, e.loop_name"

/* Retention: what a cutoff (slot 1, unix nanoseconds) deletes, in the
   order every backend runs it in one transaction: what refers to an old
   batch's events, its events, its tags and loop stats, the batches
   (QSQL_RETENTION_BATCHES: the step whose count is reported), then the
   stacks and groups no batch has named since (QSQL_RETENTION_STACKS and
   the next: last_seen before the cutoff less slack, SQL text such as
   " - 3600000000000", at most STORE_RETENTION_SLACK_NS). */
#define QSQL_OLD_EVENTS                                                                            \
  "(SELECT e.id FROM events e JOIN batches b ON e.batch_id = b.id WHERE b.received_ns "            \
  "< " QSQL_INT(1) ")"
#define QSQL_OLD_BATCHES "(SELECT id FROM batches WHERE received_ns < " QSQL_INT(1) ")"
#define QSQL_RETENTION(slack)                                                                      \
  {                                                                                                \
    "DELETE FROM event_states WHERE event_id IN " QSQL_OLD_EVENTS,                                 \
        "DELETE FROM stack_counts WHERE event_id IN " QSQL_OLD_EVENTS,                             \
        "DELETE FROM events WHERE batch_id IN " QSQL_OLD_BATCHES,                                  \
        "DELETE FROM batch_tags WHERE batch_id IN " QSQL_OLD_BATCHES,                              \
        "DELETE FROM loop_stats WHERE batch_id IN " QSQL_OLD_BATCHES,                              \
        "DELETE FROM loop_stats_by_loop WHERE batch_id IN " QSQL_OLD_BATCHES,                      \
        "DELETE FROM batches WHERE received_ns < " QSQL_INT(1),                                    \
        "DELETE FROM stacks WHERE last_seen < " QSQL_INT(1) slack,                                 \
        "DELETE FROM groups WHERE last_seen < " QSQL_INT(1) slack                                  \
  }
#define QSQL_RETENTION_STEPS 9
#define QSQL_RETENTION_BATCHES 6
#define QSQL_RETENTION_STACKS 7

/* A bounded read: the first rows of parts (a UNION ALL of selects), at
   most the slot's number of them (store_bind_rows). Both databases stop
   reading parts once they have that many, so the rows a read touches are
   bounded whatever was stored. */
#define QSQL_BOUNDED(parts) "SELECT * FROM (" parts ") p LIMIT " QSQL_INT(STORE_SLOT_ROWS)
/* A bounded scan of one table's matching rows: the newest (by col, an
   indexed time) at most the slot's number of them. The sums of timeseries,
   states, drops and loops read their rows through it. */
#define QSQL_NEWEST(col) " ORDER BY " col " DESC LIMIT " QSQL_INT(STORE_SLOT_ROWS)
/* A raw part whose rows are summed per event and stack: its joined rows
   taken at most the slot's number of them before they are grouped (a
   GROUP BY reads all its input before its first row). */
#define QSQL_RAW_BOUND " LIMIT " QSQL_INT(STORE_SLOT_ROWS)

/* The stack rows of stack_rows from agg, a select of one row per stack
   with the columns s (signature), n (samples), cpu, wall, first,
   last_end and rows (the rows read summed into it): the heaviest STORE_STACK_ROWS_MAX with their
   stored frames, then one row of the rest's sums (s and frames NULL) with their count (0 when there
   is no rest: store_stack_row_usable skips it), each with the rows read in all (rows.h). Only the
   stacks kept are joined to their frames, so a flood of distinct stacks costs one aggregate, not a
   read of every stack's text. text_order: what orders signatures as the C locale (PostgreSQL '
   COLLATE "C"', SQLite "").
 */
#define QSQL_STACK_ROWS_CAPPED(agg, text_order)                                                    \
  "WITH a AS MATERIALIZED (" agg "), k AS (SELECT * FROM a ORDER BY a.cpu DESC, a.n DESC,"         \
  " a.s" text_order " LIMIT " STORE_STR(                                                           \
      STORE_STACK_ROWS_MAX) ")"                                                                    \
                            " SELECT * FROM (SELECT k.s AS s, st.frames AS frames, k.n AS n, "     \
                            "k.cpu AS cpu, k.wall AS wall,"                                        \
                            " k.first AS first, k.last_end AS last_end, 1 AS stacks, 0 AS rest, "  \
                            "(SELECT sum(r.rows) FROM a r) AS rows_read FROM k"                    \
                            " JOIN stacks st ON st.signature = k.s UNION ALL SELECT NULL, NULL, "  \
                            "sum(a.n), sum(a.cpu),"                                                \
                            " sum(a.wall), min(a.first), max(a.last_end), count(*), 1,"            \
                            " (SELECT sum(r.rows) FROM a r) FROM a"                                \
                            " WHERE a.s NOT IN (SELECT k.s FROM k)) u"                             \
                            " ORDER BY u.rest, u.cpu DESC, u.n DESC, u.s" text_order

/* The top-stacks rows of top_rows from parts, a select of rows with the
   columns g (group), version, label, dbin, events, samples, total_ns,
   first_ns, last_ns, max_ns and cpu_us: summed per group, version, label
   and duration bin, for the STORE_TOP_GROUPS_MAX groups of most impact
   (impact, then samples, then total_ns, descending; the order top-stacks
   ranks by), each row with the count of every group parts holds and the
   rows read (QSQL_BOUNDED: parts read at most the slot's rows). Only
   the groups kept are joined to their names. majority: the column the
   backend reads a hang group's majority from; group_by: the GROUP BY list
   (PostgreSQL's names gr.frames too). */
#define QSQL_TOP_ROWS_CAPPED(parts, impact, majority, group_by, text_order)                        \
  "WITH x AS MATERIALIZED (" QSQL_BOUNDED(                                                         \
      parts) "), k AS (SELECT x.g AS g FROM x GROUP BY x.g"                                        \
             " ORDER BY sum(" impact                                                               \
             ") DESC, sum(x.samples) DESC, sum(x.total_ns) DESC, x.g" text_order                   \
             " LIMIT " STORE_STR(                                                                  \
                 STORE_TOP_GROUPS_MAX) ")"                                                         \
                                       " SELECT x.g, gr.frames, x.version, x.label, "              \
                                       "sum(x.events), "                                           \
                                       "sum(x.samples), sum(x.total_ns),"                          \
                                       " min(x.first_ns), max(x.last_ns), max(x.max_ns), "         \
                                       "x.dbin, " majority ", sum(x.cpu_us),"                      \
                                       " (SELECT count(DISTINCT y.g) FROM x y), (SELECT count(*) " \
                                       "FROM x z)"                                                 \
                                       " FROM x JOIN k ON k.g = x.g"                               \
                                       " JOIN groups gr ON gr.signature = x.g GROUP BY " group_by  \
                                       " ORDER BY x.g" text_order

#endif
