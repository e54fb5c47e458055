/*
 * pg_resym.c - re-symbolization in PostgreSQL (store_ops_t
 * .resymbolize): the SQLite backend's steps (sqlite_store.c) in one
 * transaction holding PG_LOCK_RESYMBOLIZE, PG_LOCK_STACKS and
 * PG_LOCK_HANG_GROUPS, so two collectors given the same symbols rename
 * once, never interleave with a hang pick, and never delete a row a batch
 * left out as stored (stack_epoch bumped: every collector forgets them).
 * The events and groups a rename touched are noted in temporary tables
 * dropped at commit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/store/pg/pg_store.h"
#include "collector/store/rollup_sql.h"

/* The rollup buckets of the events a rename touched (rebuilt after it). */
static const char MARK_RESYM[] =
    "INSERT INTO rollup_dirty(bucket_ns) SELECT DISTINCT " ROLLUP_BUCKET_OF(
        "e.start_ns") " FROM resym_events r JOIN events e ON e.id = r.id WHERE e.start_ns IS NOT "
                      "NULL"
                      " ON CONFLICT DO NOTHING";

static const char *const TEMP[] = {
    "CREATE TEMP TABLE resym_events(id bigint PRIMARY KEY) ON COMMIT DROP",
    "CREATE TEMP TABLE resym_groups(signature text PRIMARY KEY) ON COMMIT DROP",
};

/* $1 the old signature, $2 the new one, $3 frames, $4 first, $5 last. */
static const char *const MOVE[] = {
    "INSERT INTO stacks(signature, frames, first_seen, last_seen, stack_end)"
    " VALUES($2, $3, $4::bigint, $5::bigint, (SELECT stack_end FROM stacks WHERE signature = $1))"
    " ON CONFLICT(signature) DO UPDATE SET"
    " first_seen = least(stacks.first_seen, excluded.first_seen),"
    " last_seen = greatest(stacks.last_seen, excluded.last_seen)",
    "UPDATE stack_counts AS n SET samples = n.samples + o.samples,"
    " cpu_us = CASE WHEN n.cpu_us IS NULL AND o.cpu_us IS NULL THEN NULL"
    " ELSE coalesce(n.cpu_us, 0) + coalesce(o.cpu_us, 0) END"
    " FROM (SELECT event_id, tid, sum(samples) AS samples, sum(cpu_us) AS cpu_us FROM stack_counts"
    " WHERE stack_sig = $1 GROUP BY event_id, tid) AS o"
    " WHERE n.stack_sig = $2 AND n.event_id = o.event_id AND n.tid IS NOT DISTINCT FROM o.tid",
    "DELETE FROM stack_counts o WHERE o.stack_sig = $1 AND EXISTS (SELECT 1 FROM"
    " stack_counts n WHERE n.stack_sig = $2 AND n.event_id = o.event_id"
    " AND n.tid IS NOT DISTINCT FROM o.tid)",
    "UPDATE stack_counts SET stack_sig = $2 WHERE stack_sig = $1",
    "UPDATE events SET dominant_stack_sig = $2 WHERE dominant_stack_sig = $1",
    "DELETE FROM stacks WHERE signature = $1",
    "INSERT INTO resym_groups(signature) VALUES($1) ON CONFLICT DO NOTHING",
};

static int run5(store_t *st, const char *sql, const char *old, const char *sig, const char *frames,
                int64_t first, int64_t last) {
  pg_params_t p = {0};
  pg_text(&p, 1, old);
  pg_text(&p, 2, sig);
  pg_text(&p, 3, frames);
  pg_int(&p, 4, first);
  pg_int(&p, 5, last);
  return pg_do(st, sql, &p, "resymbolize");
}

static int move_stack(store_t *st, const char *old, const store_stack_t *stack,
                      const store_group_t *group, int64_t first, int64_t last) {
  const char *sig = stack->signature;
  int rc = run5(st,
                "INSERT INTO resym_events(id) SELECT DISTINCT event_id FROM stack_counts"
                " WHERE stack_sig = $1 AND $2::text IS NOT NULL AND $3::text IS NOT NULL"
                " AND $4::bigint IS NOT NULL AND $5::bigint IS NOT NULL ON CONFLICT DO NOTHING",
                old, sig, "", first, last);
  if (rc == 0 && strcmp(old, sig) == 0) {
    rc = run5(st,
              "UPDATE stacks SET frames = $3 WHERE signature = $2 AND $1::text IS NOT NULL"
              " AND $4::bigint IS NOT NULL AND $5::bigint IS NOT NULL",
              old, sig, stack->frames_json, first, last);
  } else {
    for (size_t i = 0; rc == 0 && i < sizeof MOVE / sizeof MOVE[0]; i++)
      rc = run5(st, MOVE[i], old, sig, stack->frames_json, first, last);
  }
  if (rc == 0)
    rc = run5(st,
              "INSERT INTO groups(signature, frames, first_seen, last_seen)"
              " VALUES($2, $3, $4::bigint, $5::bigint) ON CONFLICT(signature) DO UPDATE SET"
              " first_seen = least(groups.first_seen, excluded.first_seen),"
              " last_seen = greatest(groups.last_seen, excluded.last_seen)",
              old, sig, group->names_json, first, last);
  return rc;
}

static int rename_matching(store_t *st, const char *needle, const store_renamer_t *r,
                           uint64_t *renamed) {
  pg_params_t p = {0};
  pg_text(&p, 1, needle);
  PGresult *m = pg_run(st,
                       "SELECT signature, frames, first_seen, last_seen FROM stacks"
                       " WHERE strpos(frames, $1) > 0",
                       &p, "resymbolize");
  if (!m) return -1;
  int rc = 0;
  for (int i = 0; rc == 0 && i < PQntuples(m); i++) {
    store_stack_t stack = {0};
    store_group_t group = {0};
    int changed = r->rename_stack(r->user, PQgetvalue(m, i, 1), &stack, &group);
    if (changed < 0) rc = -1;
    if (changed > 0) {
      rc = move_stack(st, PQgetvalue(m, i, 0), &stack, &group, pg_i64(m, i, 2), pg_i64(m, i, 3));
      (*renamed)++;
    }
    free((char *)stack.frames_json);
    free((char *)group.names_json);
  }
  PQclear(m);
  return rc;
}

/* A hang event whose stacks changed: its group again from its stacks. */
static int regroup_event(store_t *st, const store_renamer_t *r, const char *id,
                         const char *dominant, const char *old_group, int64_t received_ns) {
  pg_params_t p = {0};
  pg_text(&p, 1, id);
  pg_text(&p, 2, dominant);
  PGresult *s = pg_run(st,
                       "SELECT s.frames, c.samples FROM stack_counts c JOIN stacks s"
                       " ON s.signature = c.stack_sig WHERE c.event_id = $1::bigint AND"
                       " c.samples > 0 ORDER BY c.stack_sig IS NOT DISTINCT FROM $2 DESC,"
                       " c.samples DESC, c.id",
                       &p, "resymbolize");
  if (!s) return -1;
  size_t n = (size_t)PQntuples(s);
  const char **frames = calloc(n ? n : 1, sizeof *frames);
  uint64_t *samples = calloc(n ? n : 1, sizeof *samples);
  int rc = frames && samples ? 0 : -1;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    frames[i] = PQgetvalue(s, (int)i, 0);
    samples[i] = (uint64_t)pg_i64(s, (int)i, 1);
  }
  store_hang_t hang = {0};
  char group[STORE_SIG_CHARS + 1];
  if (rc == 0 && n) {
    if (r->hang_group(r->user, frames, samples, n, &hang) != 0) rc = -1;
    if (rc == 0) rc = pg_hang_groups_assign(st, &hang, received_ns, group);
    pg_params_t g = {0};
    pg_text(&g, 1, old_group);
    if (rc == 0 && old_group)
      rc = pg_do(st, "INSERT INTO resym_groups(signature) VALUES($1) ON CONFLICT DO NOTHING", &g,
                 "resymbolize");
    pg_text(&g, 1, id);
    pg_text(&g, 2, group);
    if (rc == 0)
      rc = pg_do(st, "UPDATE events SET group_sig = $2 WHERE id = $1::bigint", &g, "resymbolize");
    r->hang_free(r->user, &hang);
  }
  free(frames);
  free(samples);
  PQclear(s);
  return rc;
}

static int regroup_hangs(store_t *st, const store_renamer_t *r) {
  PGresult *h = pg_run(st,
                       "SELECT e.id, e.dominant_stack_sig, e.group_sig, b.received_ns"
                       " FROM resym_events x JOIN events e ON e.id = x.id"
                       " JOIN batches b ON b.id = e.batch_id"
                       " WHERE e.kind IN ('hang', 'fatal_hang') ORDER BY e.id",
                       NULL, "resymbolize");
  if (!h) return -1;
  int rc = 0;
  for (int i = 0; rc == 0 && i < PQntuples(h); i++)
    rc = regroup_event(st, r, PQgetvalue(h, i, 0), pg_str(h, i, 1), pg_str(h, i, 2),
                       pg_i64(h, i, 3));
  PQclear(h);
  return rc;
}

static int resym_locked(store_t *st, const char *needle, const store_renamer_t *r,
                        uint64_t *renamed) {
  if (pg_do(st, "BEGIN", NULL, "begin") != 0) return STORE_ERROR;
  pg_params_t p = {0};
  pg_int(&p, 1, PG_LOCK_RESYMBOLIZE);
  pg_int(&p, 2, PG_LOCK_STACKS);
  pg_int(&p, 3, PG_LOCK_HANG_GROUPS);
  /* In the batches' order: PG_LOCK_STACKS before PG_LOCK_HANG_GROUPS. */
  int rc = pg_do(st,
                 "SELECT pg_advisory_xact_lock($1::bigint), pg_advisory_xact_lock($2::bigint),"
                 " pg_advisory_xact_lock($3::bigint)",
                 &p, "resymbolize lock");
  for (size_t i = 0; rc == 0 && i < sizeof TEMP / sizeof TEMP[0]; i++)
    rc = pg_do(st, TEMP[i], NULL, "resymbolize");
  if (rc == 0) rc = rename_matching(st, needle, r, renamed);
  if (rc == 0 && *renamed) rc = regroup_hangs(st, r);
  if (rc == 0 && *renamed)
    rc = pg_do(st,
               "DELETE FROM groups g WHERE signature IN (SELECT signature FROM resym_groups)"
               " AND NOT EXISTS (SELECT 1 FROM stacks s WHERE s.signature = g.signature)"
               " AND NOT EXISTS (SELECT 1 FROM events e WHERE e.group_sig = g.signature)",
               NULL, "resymbolize");
  if (rc == 0 && *renamed) rc = pg_do(st, PG_BUMP_STACK_EPOCH, NULL, "resymbolize");
  if (rc == 0 && *renamed) rc = pg_hang_groups_prune(st);
  if (rc == 0 && *renamed) rc = pg_rollups_mark(st, MARK_RESYM, NULL);
  if (rc == 0 && *renamed) rc = pg_rollups_rebuild(st);
  if (rc == 0) rc = pg_do(st, "COMMIT", NULL, "commit");
  if (rc == 0) return STORE_OK;
  pg_do(st, "ROLLBACK", NULL, "rollback");
  *renamed = 0;
  return STORE_ERROR;
}

int pg_resymbolize(store_t *st, const char *needle, const store_renamer_t *r, uint64_t *renamed) {
  uint64_t n = 0;
  pthread_mutex_lock(&st->lock);
  int rc = resym_locked(st, needle, r, &n);
  pthread_mutex_unlock(&st->lock);
  if (renamed) *renamed = n;
  return rc;
}
