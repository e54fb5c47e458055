/*
 * sqlite_resym.c - the SQLite backend's re-symbolization (store_ops_t
 * resymbolize): the shared flow (resym_flow.h) over SQLite's statements,
 * in one transaction, then the groups nobody refers to dropped, the hang
 * groups pruned and the rollups the rename touched rebuilt.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/hang_group_cands.h"
#include "collector/model/rollup.h"
#include "collector/model/rollup_batch.h"
#include "collector/store/resym_flow.h"
#include "collector/store/rollup_sql.h"
#include "collector/store/sqlite/sqlite_store.h"

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

/* ?1 the old signature, ?2 the new one. Every stack count is in the
   index by signature once the transaction began (sqlite_index_counts);
   INDEXED is the term that lets SQLite use that partial index. */
#define INDEXED "sig_indexed = 1"
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
                       " SELECT event_id FROM stack_counts WHERE stack_sig = ?1 AND " INDEXED,
    [RS_MERGE_COUNTS] =
        "UPDATE stack_counts AS n SET samples = n.samples + o.samples,"
        " cpu_us = CASE WHEN n.cpu_us IS NULL AND o.cpu_us IS NULL THEN NULL"
        " ELSE coalesce(n.cpu_us, 0) + coalesce(o.cpu_us, 0) END"
        " FROM (SELECT event_id, tid, sum(samples) AS samples, sum(cpu_us) AS cpu_us"
        " FROM stack_counts"
        " WHERE stack_sig = ?1 AND " INDEXED " GROUP BY event_id, tid) AS o"
        " WHERE n.stack_sig = ?2 AND n." INDEXED " AND n.event_id = o.event_id AND n.tid IS o.tid",
    [RS_DROP_MERGED] = "DELETE FROM stack_counts WHERE stack_sig = ?1 AND " INDEXED
                       " AND EXISTS (SELECT 1 FROM stack_counts n WHERE n.stack_sig = ?2 AND"
                       " n." INDEXED " AND"
                       " n.event_id = stack_counts.event_id AND n.tid IS stack_counts.tid)",
    [RS_MOVE_COUNTS] = "UPDATE stack_counts SET stack_sig = ?2 WHERE stack_sig = ?1 AND " INDEXED,
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

/* ---- the steps (resym_flow.h) --------------------------------------------- */

static int ok(int rc) {
  return rc == SQLITE_OK ? 0 : -1;
}

static int step_note_events(void *ctx, const char *old) {
  return ok(rs_run(ctx, RS_NOTE_EVENTS, old, NULL));
}

static int step_set_frames(void *ctx, const char *sig, const char *frames_json) {
  resym_t *x = ctx;
  sqlite3_bind_text(x->stmt[RS_SET_FRAMES], 3, frames_json, -1, SQLITE_STATIC);
  return ok(rs_run(x, RS_SET_FRAMES, NULL, sig));
}

static int step_move_stack(void *ctx, const char *old, const store_stack_t *to, int64_t first,
                           int64_t last) {
  resym_t *x = ctx;
  const char *sig = to->signature;
  sqlite3_bind_text(x->stmt[RS_UPSERT_STACK], 1, old, -1, SQLITE_STATIC); /* its end */
  int rc = rs_upsert(x, RS_UPSERT_STACK, sig, to->frames_json, first, last);
  if (rc == SQLITE_OK) rc = rs_run(x, RS_MERGE_COUNTS, old, sig);
  if (rc == SQLITE_OK) rc = rs_run(x, RS_DROP_MERGED, old, sig);
  if (rc == SQLITE_OK) rc = rs_run(x, RS_MOVE_COUNTS, old, sig);
  if (rc == SQLITE_OK) rc = rs_run(x, RS_MOVE_DOMINANT, old, sig);
  if (rc == SQLITE_OK) rc = rs_run(x, RS_DELETE_STACK, old, NULL);
  if (rc == SQLITE_OK) rc = rs_run(x, RS_NOTE_GROUP, old, NULL);
  return ok(rc);
}

static int step_upsert_group(void *ctx, const store_group_t *g, int64_t first, int64_t last) {
  return ok(rs_upsert(ctx, RS_UPSERT_GROUP, g->signature, g->names_json, first, last));
}

static int step_note_group(void *ctx, const char *sig) {
  return ok(rs_run(ctx, RS_NOTE_GROUP, sig, NULL));
}

static char *dup_or_null(const char *s) {
  return s ? strdup(s) : NULL;
}

static int step_matching(void *ctx, const char *needle, resym_stack_t **out, size_t *n) {
  resym_t *x = ctx;
  sqlite3_stmt *s = x->stmt[RS_MATCHING];
  sqlite3_bind_text(s, 1, needle, -1, SQLITE_STATIC);
  size_t cap = 0;
  int rc;
  *out = NULL;
  *n = 0;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    if (*n == cap) {
      resym_stack_t *grown = realloc(*out, (cap = cap ? 2 * cap : 16) * sizeof **out);
      if (!grown) break;
      *out = grown;
    }
    resym_stack_t *m = &(*out)[*n];
    m->signature = strdup(column_text(s, 0) ? column_text(s, 0) : "");
    m->frames_json = strdup(column_text(s, 1) ? column_text(s, 1) : "[]");
    m->first_seen = sqlite3_column_int64(s, 2);
    m->last_seen = sqlite3_column_int64(s, 3);
    (*n)++;
    if (!m->signature || !m->frames_json) break;
  }
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rc == SQLITE_DONE ? 0 : -1;
}

static int step_hang_events(void *ctx, resym_hang_t **out, size_t *n) {
  resym_t *x = ctx;
  sqlite3_stmt *s = x->stmt[RS_HANG_EVENTS];
  size_t cap = 0;
  int rc;
  *out = NULL;
  *n = 0;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    if (*n == cap) {
      resym_hang_t *grown = realloc(*out, (cap = cap ? 2 * cap : 16) * sizeof **out);
      if (!grown) break;
      *out = grown;
    }
    (*out)[(*n)++] = (resym_hang_t){sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 3),
                                    dup_or_null(column_text(s, 1)), dup_or_null(column_text(s, 2))};
  }
  sqlite3_reset(s);
  return rc == SQLITE_DONE ? 0 : -1;
}

static int step_event_stacks(void *ctx, int64_t id, const char *dominant, char ***frames,
                             uint64_t **samples, size_t *n) {
  resym_t *x = ctx;
  sqlite3_stmt *s = x->stmt[RS_EVENT_STACKS];
  sqlite3_bind_int64(s, 1, id);
  if (dominant) sqlite3_bind_text(s, 2, dominant, -1, SQLITE_TRANSIENT);
  size_t cap = 0;
  int rc;
  *frames = NULL;
  *samples = NULL;
  *n = 0;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    if (*n == cap) {
      cap = cap ? 2 * cap : 8;
      char **grown = realloc(*frames, cap * sizeof **frames);
      if (grown) *frames = grown;
      uint64_t *more = realloc(*samples, cap * sizeof **samples);
      if (more) *samples = more;
      if (!grown || !more) break;
    }
    (*samples)[*n] = (uint64_t)sqlite3_column_int64(s, 1);
    if (!((*frames)[(*n)++] = strdup(column_text(s, 0) ? column_text(s, 0) : "[]"))) break;
  }
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rc == SQLITE_DONE ? 0 : -1;
}

static int step_pick_group(void *ctx, store_hang_t *hang, int64_t received_ns,
                           char group[STORE_SIG_CHARS + 1]) {
  resym_t *x = ctx;
  return ok(hang_groups_assign(x->st->hang, hang, received_ns, NULL, group));
}

static int step_set_group(void *ctx, int64_t id, const char *group) {
  resym_t *x = ctx;
  sqlite3_bind_int64(x->stmt[RS_SET_GROUP], 1, id);
  return ok(rs_run(x, RS_SET_GROUP, NULL, group));
}

static int resymbolize_locked(resym_t *x, const char *needle) {
  store_t *st = x->st;
  int rc = sqlite3_exec(st->db, RESYM_TEMP, NULL, NULL, NULL);
  for (int i = 0; rc == SQLITE_OK && i < RS_COUNT; i++)
    rc = sqlite3_prepare_v2(st->db, RESYM_SQL[i], -1, &x->stmt[i], NULL);
  if (rc != SQLITE_OK) {
    sqlite_report(st, "resymbolize prepare");
    return STORE_ERROR;
  }
  if (sqlite_step_done(st, ST_BEGIN) != SQLITE_OK) {
    sqlite_report(st, "begin");
    return STORE_ERROR;
  }
  if (sqlite_index_counts(st) != SQLITE_OK) {
    sqlite_report(st, "resymbolize index");
    sqlite_step_done(st, ST_ROLLBACK);
    return STORE_ERROR;
  }
  resym_steps_t steps = {x,
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
  rc = resym_flow_run(&steps, needle, x->r, &x->renamed) == 0 ? SQLITE_OK : SQLITE_ERROR;
  if (rc == SQLITE_OK && x->renamed) rc = rs_done(x, RS_DROP_GROUPS);
  if (rc == SQLITE_OK && x->renamed) rc = hang_groups_prune(st->hang);
  if (rc == SQLITE_OK && x->renamed) rc = store_rollups_mark_resym(st->rollups);
  if (rc == SQLITE_OK && x->renamed) rc = store_rollups_rebuild(st->rollups);
  if (rc == SQLITE_OK) rc = sqlite_step_done(st, ST_COMMIT);
  if (rc == SQLITE_OK) return STORE_OK;
  sqlite_report(st, "resymbolize");
  sqlite_step_done(st, ST_ROLLBACK);
  return STORE_ERROR;
}

int sqlite_resymbolize(store_t *st, const char *needle, const store_renamer_t *r,
                       uint64_t *renamed) {
  resym_t x = {.st = st, .r = r};
  char why[64];
  if (renamed) *renamed = 0;
  if (sqlite_check(st, why, sizeof why) != STORE_OK) return STORE_LOST;
  pthread_mutex_lock(&st->lock);
  sqlite_forget_known(st); /* rows are moved and deleted */
  int rc = resymbolize_locked(&x, needle);
  for (int i = 0; i < RS_COUNT; i++)
    sqlite3_finalize(x.stmt[i]);
  pthread_mutex_unlock(&st->lock);
  if (renamed) *renamed = rc == STORE_OK ? x.renamed : 0;
  return rc;
}
