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
  " b.environment, e.group_sig, " tags_json ", e.label"

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
        "DELETE FROM batches WHERE received_ns < " QSQL_INT(1),                                    \
        "DELETE FROM stacks WHERE last_seen < " QSQL_INT(1) slack,                                 \
        "DELETE FROM groups WHERE last_seen < " QSQL_INT(1) slack                                  \
  }
#define QSQL_RETENTION_STEPS 8
#define QSQL_RETENTION_BATCHES 5
#define QSQL_RETENTION_STACKS 6

#endif
