/*
 * pg_resym.c - re-symbolization in PostgreSQL (store_ops_t
 * .resymbolize): the shared flow (resym_flow.h) over PostgreSQL's
 * statements in one transaction holding PG_LOCK_RESYMBOLIZE, PG_LOCK_STACKS and
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
#include "collector/store/resym_flow.h"
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

/* ---- the steps (resym_flow.h) --------------------------------------------- */

static int step_note_events(void *ctx, const char *old) {
  pg_params_t p = {0};
  pg_text(&p, 1, old);
  return pg_do(ctx,
               "INSERT INTO resym_events(id) SELECT DISTINCT event_id FROM stack_counts"
               " WHERE stack_sig = $1 ON CONFLICT DO NOTHING",
               &p, "resymbolize");
}

static int step_set_frames(void *ctx, const char *sig, const char *frames_json) {
  pg_params_t p = {0};
  pg_text(&p, 1, sig);
  pg_text(&p, 2, frames_json);
  return pg_do(ctx, "UPDATE stacks SET frames = $2 WHERE signature = $1", &p, "resymbolize");
}

static int step_move_stack(void *ctx, const char *old, const store_stack_t *to, int64_t first,
                           int64_t last) {
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < sizeof MOVE / sizeof MOVE[0]; i++)
    rc = run5(ctx, MOVE[i], old, to->signature, to->frames_json, first, last);
  return rc;
}

static int step_upsert_group(void *ctx, const store_group_t *g, int64_t first, int64_t last) {
  pg_params_t p = {0};
  pg_text(&p, 1, g->signature);
  pg_text(&p, 2, g->names_json);
  pg_int(&p, 3, first);
  pg_int(&p, 4, last);
  return pg_do(ctx,
               "INSERT INTO groups(signature, frames, first_seen, last_seen)"
               " VALUES($1, $2, $3::bigint, $4::bigint) ON CONFLICT(signature) DO UPDATE SET"
               " first_seen = least(groups.first_seen, excluded.first_seen),"
               " last_seen = greatest(groups.last_seen, excluded.last_seen)",
               &p, "resymbolize");
}

static int step_note_group(void *ctx, const char *sig) {
  pg_params_t p = {0};
  pg_text(&p, 1, sig);
  return pg_do(ctx, "INSERT INTO resym_groups(signature) VALUES($1) ON CONFLICT DO NOTHING", &p,
               "resymbolize");
}

static char *dup_or_null(const char *s) {
  return s ? strdup(s) : NULL;
}

static int step_matching(void *ctx, const char *needle, resym_stack_t **out, size_t *n) {
  pg_params_t p = {0};
  pg_text(&p, 1, needle);
  PGresult *m = pg_run(ctx,
                       "SELECT signature, frames, first_seen, last_seen FROM stacks"
                       " WHERE strpos(frames, $1) > 0",
                       &p, "resymbolize");
  *out = NULL;
  *n = 0;
  if (!m) return -1;
  int rows = PQntuples(m), rc = 0;
  if (rows && !(*out = calloc((size_t)rows, sizeof **out))) rc = -1;
  for (int i = 0; rc == 0 && i < rows; i++) {
    resym_stack_t *s = &(*out)[(*n)++];
    *s = (resym_stack_t){strdup(PQgetvalue(m, i, 0)), strdup(PQgetvalue(m, i, 1)), pg_i64(m, i, 2),
                         pg_i64(m, i, 3)};
    if (!s->signature || !s->frames_json) rc = -1;
  }
  PQclear(m);
  return rc;
}

static int step_hang_events(void *ctx, resym_hang_t **out, size_t *n) {
  PGresult *h = pg_run(ctx,
                       "SELECT e.id, e.dominant_stack_sig, e.group_sig, b.received_ns"
                       " FROM resym_events x JOIN events e ON e.id = x.id"
                       " JOIN batches b ON b.id = e.batch_id"
                       " WHERE e.kind IN ('hang', 'fatal_hang') ORDER BY e.id",
                       NULL, "resymbolize");
  *out = NULL;
  *n = 0;
  if (!h) return -1;
  int rows = PQntuples(h), rc = 0;
  if (rows && !(*out = calloc((size_t)rows, sizeof **out))) rc = -1;
  for (int i = 0; rc == 0 && i < rows; i++)
    (*out)[(*n)++] = (resym_hang_t){pg_i64(h, i, 0), pg_i64(h, i, 3), dup_or_null(pg_str(h, i, 1)),
                                    dup_or_null(pg_str(h, i, 2))};
  PQclear(h);
  return rc;
}

static int step_event_stacks(void *ctx, int64_t id, const char *dominant, char ***frames,
                             uint64_t **samples, size_t *n) {
  pg_params_t p = {0};
  pg_int(&p, 1, id);
  pg_text(&p, 2, dominant);
  PGresult *s = pg_run(ctx,
                       "SELECT s.frames, c.samples FROM stack_counts c JOIN stacks s"
                       " ON s.signature = c.stack_sig WHERE c.event_id = $1::bigint AND"
                       " c.samples > 0 ORDER BY c.stack_sig IS NOT DISTINCT FROM $2 DESC,"
                       " c.samples DESC, c.id",
                       &p, "resymbolize");
  *frames = NULL;
  *samples = NULL;
  *n = 0;
  if (!s) return -1;
  size_t rows = (size_t)PQntuples(s);
  int rc = 0;
  if (rows &&
      (!(*frames = calloc(rows, sizeof **frames)) || !(*samples = calloc(rows, sizeof **samples))))
    rc = -1;
  for (size_t i = 0; rc == 0 && i < rows; i++) {
    (*samples)[i] = (uint64_t)pg_i64(s, (int)i, 1);
    if (!((*frames)[(*n)++] = strdup(PQgetvalue(s, (int)i, 0)))) rc = -1;
  }
  PQclear(s);
  return rc;
}

static int step_pick_group(void *ctx, store_hang_t *hang, int64_t received_ns,
                           char group[STORE_SIG_CHARS + 1]) {
  return pg_hang_groups_assign(ctx, hang, received_ns, group);
}

static int step_set_group(void *ctx, int64_t id, const char *group) {
  pg_params_t p = {0};
  pg_int(&p, 1, id);
  pg_text(&p, 2, group);
  return pg_do(ctx, "UPDATE events SET group_sig = $2 WHERE id = $1::bigint", &p, "resymbolize");
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
  resym_steps_t steps = {st,
                         step_matching,
                         step_note_events,
                         step_set_frames,
                         step_move_stack,
                         step_upsert_group,
                         step_note_group,
                         step_hang_events,
                         step_event_stacks,
                         step_pick_group,
                         step_set_group};
  if (rc == 0) rc = resym_flow_run(&steps, needle, r, renamed);
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
