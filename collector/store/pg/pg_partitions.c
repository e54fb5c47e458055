/*
 * pg_partitions.c - the PostgreSQL backend's day partitions (schema
 * version 3): events, stack_counts and event_states are partitioned by
 * received_ns, the day their batch was received, one partition a day
 * (<table>_d<day>, day = received_ns / 86400 s; SQL function
 * perf_day_partitions) and a default one for rows of days without one.
 * Before a batch of a new day is stored, that day's and the next day's
 * partitions are made (once a day per collector, under an advisory lock
 * so two collectors never make one twice); retention drops the partitions
 * whose whole day is before its cutoff instead of deleting their rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/store/pg/pg_store.h"

#define DAY_NS INT64_C(86400000000000)
#define PG_LOCK_PARTITIONS 0x70657266004

void pg_partitions_ensure(store_t *st, int64_t received_ns) {
  if (received_ns <= 0) return;
  int64_t day = received_ns / DAY_NS;
  if (day == st->partition_day) return;
  pg_params_t p = {0};
  pg_int(&p, 1, PG_LOCK_PARTITIONS);
  pg_int(&p, 2, day);
  if (pg_do(st, "BEGIN", NULL, "begin") == 0 &&
      pg_do(st,
            "SELECT pg_advisory_xact_lock($1::bigint), perf_day_partitions($2::bigint),"
            " perf_day_partitions($2::bigint + 1)",
            &p, "day partitions") == 0 &&
      pg_do(st, "COMMIT", NULL, "commit") == 0) {
    st->partition_day = day;
    return;
  }
  /* The batch goes to the default partition; the next one tries again. */
  pg_do(st, "ROLLBACK", NULL, "rollback");
}

int pg_partitions_drop_before(store_t *st, int64_t cutoff_ns) {
  pg_params_t p = {0};
  pg_int(&p, 1, cutoff_ns / DAY_NS); /* days before this one end at or before the cutoff */
  PGresult *r = pg_run(st,
                       "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                       " JOIN pg_class t ON t.oid = i.inhparent"
                       " WHERE t.relname IN ('events', 'stack_counts', 'event_states')"
                       " AND c.relname ~ '_d[0-9]+$'"
                       " AND substring(c.relname FROM '_d([0-9]+)$')::bigint + 1 <= $1::bigint"
                       " ORDER BY c.relname",
                       &p, "old partitions");
  if (!r) return -1;
  int rc = 0;
  for (int i = 0; rc == 0 && i < PQntuples(r); i++) {
    char *name = PQescapeIdentifier(st->conn, PQgetvalue(r, i, 0), strlen(PQgetvalue(r, i, 0)));
    char sql[256];
    if (!name || snprintf(sql, sizeof sql, "DROP TABLE %s", name) >= (int)sizeof sql)
      rc = -1;
    else
      rc = pg_do(st, sql, NULL, "retention: drop partition");
    PQfreemem(name);
  }
  PQclear(r);
  return rc;
}
