/*
 * rows.h - the rows a backend reads back, decoded once for every backend:
 * which column of a read statement holds which field of an event, a
 * stack's sums or an event's stack count. A backend hands a reader of its
 * result's columns; the statement's columns come in the order written
 * here (QSQL_EVENT_COLUMNS in query_sql.h for events).
 */
#ifndef PERF_COLLECTOR_ROWS_H
#define PERF_COLLECTOR_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "collector/model/records.h"

/* Column col of the row in hand: text (NULL for SQL NULL, valid until the
   next row) or a 64-bit integer (0 for NULL); is_null. */
typedef struct store_columns_s {
  const void *row;
  const char *(*text)(const void *row, int col);
  int64_t (*i64)(const void *row, int col);
  bool (*is_null)(const void *row, int col);
} store_columns_t;

/* An event from columns first .. first + STORE_EVENT_COLUMNS - 1: id, kind,
   start_ns, duration_ns, tid, cpu_percent, reason, app, version,
   environment, group_sig, tags_json, label, loop. */
#define STORE_EVENT_COLUMNS 14
store_event_row_t store_event_row(const store_columns_t *c, int first);

/* A stack's sums over a query (stack_rows): stack_sig, frames_json,
   samples, cpu_us, wall_ns, first_start_ns, last_end_ns, stacks, (column
   8: whether it is the rest's row), rows_read (QSQL_STACK_ROWS_CAPPED's
   columns); rows_limit is the backend's. */
store_stack_row_t store_stack_row(const store_columns_t *c);

/* A stack row a backend passes on: a stack with its frames (one whose
   stacks row is gone has none), or the row of the stacks past the cap. */
bool store_stack_row_usable(const store_stack_row_t *row);

/* A stack count of an event (event_detail): stack_sig, frames_json (NULL:
   the stack was deleted), tid, samples, cpu_us (NULL: the event has no
   weights, -1). */
store_count_row_t store_count_row(const store_columns_t *c);

/* A top-stacks row (top_rows) but its majority_len: group_sig,
   names_json, version, label, events, samples, total_ns, first_ns,
   last_ns, max_ns, dbin, (column 11: the hang group's path samples, read
   by the backend), cpu_us, groups, rows_read (QSQL_TOP_ROWS_CAPPED's
   columns); rows_limit is the backend's. */
#define STORE_TOP_PATH_COLUMN 11
store_top_row_t store_top_row(const store_columns_t *c);

#endif
