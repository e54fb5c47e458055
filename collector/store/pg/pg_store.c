/*
 * pg_store.c - the PostgreSQL backend (--db postgresql://...): open,
 * ingest, retention, stats and the ops table. The schema is
 * pg_migrations.c's, connections pg_conn.c's, the reads pg_query.c's, hang
 * groups pg_hang_groups.c's, re-symbolization pg_resym.c's (pg_store.h).
 *
 * Durability: a batch is acknowledged after its COMMIT returned, with
 * synchronous_commit on (--durability full: the server's WAL flushed) or
 * off (process: the server has it; a crash of the server may take the
 * last commits). Ingest is idempotent by batch id across collectors:
 * batches.id is the primary key and the insert is ON CONFLICT DO NOTHING,
 * so the second of two concurrent posts of one batch waits for the first
 * one's commit and then finds it (STORE_DUPLICATE). Deadlocks between
 * collectors upserting the same stacks are retried.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collector/model/rollup_batch.h"
#include "collector/store/pg/pg_store.h"
#include "collector/store/query_sql.h"
#include "collector/store/rollup_sql.h"

#define PUT_ATTEMPTS 5

static void pg_close(store_t *st) {
  if (!st) return;
  pg_fold_stop(st); /* its last fold first */
  pg_disconnect(st->reader);
  pg_disconnect(st);
}

static int pg_open(const char *location, const store_config_t *config, store_t **out) {
  *out = NULL;
  store_t *st = pg_connect(location, config->durability);
  if (!st) return STORE_ERROR;
  st->shard = (int)(((unsigned)getpid() ^ (unsigned)time(NULL)) % 64);
  st->fold_interval_s = config->fold_interval_s ? config->fold_interval_s : STORE_FOLD_INTERVAL_S;
  st->read_rows_max = config->read_rows_max ? config->read_rows_max : STORE_READ_ROWS_MAX;
  if (!(st->known_stacks = store_known_new()) || !(st->known_groups = store_known_new()) ||
      pg_migrate(st) != 0 || pg_fold_start(st) != 0 ||
      !(st->reader = pg_connect(location, config->durability))) {
    pg_close(st);
    return STORE_ERROR;
  }
  st->reader->read_rows_max = st->read_rows_max;
  *out = st;
  return STORE_OK;
}

/* ---- ingest ---------------------------------------------------------------- */

/* The batch row: 0 inserted, 1 a duplicate, -1 failed. Its statement
   reads stack_epoch after the batch took PG_LOCK_STACKS (shared): the
   rows known stored are forgotten when it changed. */
static int insert_batch_row(store_t *st, const store_batch_t *b) {
  pg_params_t p = {0};
  pg_int(&p, 1, PG_LOCK_STACKS);
  if (pg_do(st, "SELECT pg_advisory_xact_lock_shared($1::bigint)", &p, "stacks lock") != 0)
    return -1;
  pg_bytes(&p, 1, b->id, STORE_BATCH_ID_BYTES);
  pg_int(&p, 2, b->received_ns);
  pg_text(&p, 3, b->app);
  pg_text(&p, 4, b->version);
  pg_text(&p, 5, b->environment);
  pg_text(&p, 6, b->host);
  pg_int(&p, 7, b->pid);
  for (int i = 0; i < STORE_DROP_COUNT; i++)
    pg_int(&p, 8 + i, (int64_t)b->drops[i]); /* <= STORE_MAX_DROPS */
  PGresult *r = pg_run(st,
                       "INSERT INTO batches(id, received_ns, app, version, environment, host, pid,"
                       " dropped_rate_limited, dropped_queue_full, dropped_sink_failed,"
                       " dropped_spool_quota, dropped_oversized) VALUES($1, $2::bigint, $3, $4,"
                       " $5, $6, $7::bigint, $8::bigint, $9::bigint, $10::bigint, $11::bigint,"
                       " $12::bigint) ON CONFLICT (id) DO NOTHING"
                       " RETURNING (SELECT epoch FROM stack_epoch)",
                       &p, "insert batch");
  if (!r) return -1;
  int dup = PQntuples(r) == 0;
  if (!dup && pg_i64(r, 0, 0) != st->known_epoch) {
    store_known_clear(st->known_stacks);
    store_known_clear(st->known_groups);
    st->known_epoch = pg_i64(r, 0, 0);
  }
  PQclear(r);
  if (dup || b->n_tags == 0) return dup;
  pg_array_t kv[2] = {{0}}; /* keys, values */
  for (size_t i = 0; i < b->n_tags; i++) {
    char *key = strndup(b->tags[i].key, b->tags[i].key_len);
    if (!key) kv[0].failed = true;
    pg_array_text(&kv[0], key ? key : "");
    pg_array_text(&kv[1], b->tags[i].value);
    free(key);
  }
  pg_params_t t = {0};
  pg_bytes(&t, 1, b->id, STORE_BATCH_ID_BYTES);
  int rc = pg_own_arrays(&t, 2, kv, 2) == 0
               ? pg_do(st,
                       "INSERT INTO batch_tags(batch_id, key, value) SELECT $1, k, v"
                       " FROM unnest($2::text[], $3::text[]) AS u(k, v)"
                       " ON CONFLICT DO NOTHING",
                       &t, "insert tags")
               : -1;
  pg_params_free(&t);
  return rc;
}

/* The batch's stacks, and apart its groups (a signature twice: one row),
   but those known stored (store_known_fresh): inserted when new, in
   signature order (two collectors inserting the same new rows wait in one
   order); a stored row is not locked, only its last_seen moved when it is
   PG_LAST_SEEN_MOVE old (rarely: a row's lock lasts to its transaction's
   end, so every batch writing its stacks' rows made the batches of two
   collectors sharing stacks take turns). */
static int upsert_stacks(store_t *st, const store_batch_t *b) {
  pg_array_t a[3] = {{0}}; /* signatures, frames, ends */
  size_t n = 0;
  for (size_t i = 0; i < b->n_stacks; i++) {
    if (store_known_fresh(st->known_stacks, b->stacks[i].signature, b->received_ns)) continue;
    pg_array_text(&a[0], b->stacks[i].signature);
    pg_array_text(&a[1], b->stacks[i].frames_json);
    pg_array_text(&a[2], b->stacks[i].end);
    n++;
  }
  pg_params_t p = {0};
  int rc = pg_own_arrays(&p, 1, a, 3);
  pg_int(&p, 4, b->received_ns);
  if (rc == 0 && n)
    rc = pg_do(st,
               "WITH i AS (INSERT INTO stacks(signature, frames, first_seen, last_seen, stack_end)"
               " SELECT DISTINCT ON (s COLLATE \"C\") s, f, $4::bigint, $4::bigint, e"
               " FROM unnest($1::text[], $2::text[], $3::text[]) AS u(s, f, e)"
               " ORDER BY s COLLATE \"C\" ON CONFLICT(signature) DO NOTHING)"
               " UPDATE stacks SET last_seen = $4::bigint WHERE signature = ANY($1::text[])"
               " AND last_seen < $4::bigint - " PG_XSTR(PG_LAST_SEEN_MOVE),
               &p, "upsert stacks");
  pg_params_free(&p);
  return rc;
}

/* After the hang picks (under their lock when the batch has hangs): a
   pick writes its group's row too, and a collector holding the lock must
   not wait for a new row another inserted before queueing for it. */
static int upsert_groups(store_t *st, const store_batch_t *b) {
  pg_array_t a[2] = {{0}}; /* signatures, frames */
  size_t n = 0;
  for (size_t i = 0; i < b->n_groups; i++) {
    if (store_known_fresh(st->known_groups, b->groups[i].signature, b->received_ns)) continue;
    pg_array_text(&a[0], b->groups[i].signature);
    pg_array_text(&a[1], b->groups[i].names_json);
    n++;
  }
  pg_params_t p = {0};
  int rc = pg_own_arrays(&p, 1, a, 2);
  pg_int(&p, 3, b->received_ns);
  if (rc == 0 && n)
    rc = pg_do(st,
               "WITH i AS (INSERT INTO groups(signature, frames, first_seen, last_seen)"
               " SELECT DISTINCT ON (s COLLATE \"C\") s, f, $3::bigint, $3::bigint"
               " FROM unnest($1::text[], $2::text[]) AS u(s, f) ORDER BY s COLLATE \"C\""
               " ON CONFLICT(signature) DO NOTHING)"
               " UPDATE groups SET last_seen = $3::bigint WHERE signature = ANY($1::text[])"
               " AND last_seen < $3::bigint - " PG_XSTR(PG_LAST_SEEN_MOVE),
               &p, "upsert groups");
  pg_params_free(&p);
  return rc;
}

/* Events with their stack counts and thread states: one statement. The
   events' ids are drawn in their order first, each count and state names
   its event by its place in the arrays ($11, $16). The events' loops are
   $24, past the statement's other slots. */
static const char INSERT_EVENTS[] =
    "WITH ids AS MATERIALIZED (SELECT o, nextval('events_id_seq') AS id"
    " FROM generate_series(1, $23::bigint) AS o),"
    " e AS (INSERT INTO events(id, batch_id, kind, start_ns, duration_ns, tid, cpu_percent,"
    " reason, dominant_stack_sig, group_sig, label, loop_name, received_ns)"
    " SELECT ids.id, $1, k, s, d, t, c, r, ds, g, l, lp, $22::bigint FROM unnest($2::text[],"
    " $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::text[],"
    " $10::text[], $24::text[]) WITH ORDINALITY AS u(k, s, d, t, c, r, ds, g, l, lp, o)"
    " JOIN ids USING (o)"
    " ORDER BY o),"
    " c AS (INSERT INTO stack_counts(event_id, stack_sig, tid, samples, cpu_us, received_ns)"
    " SELECT ids.id, s, t, n, w, $22::bigint FROM unnest($11::bigint[], $12::text[],"
    " $13::bigint[], $14::bigint[], $15::bigint[]) WITH ORDINALITY AS u(ev, s, t, n, w, o)"
    " JOIN ids ON ids.o = u.ev ORDER BY u.o)"
    " INSERT INTO event_states(event_id, tid, state, syscall, fd, samples, received_ns)"
    " SELECT ids.id, t, s, c, f, n, $22::bigint FROM unnest($16::bigint[], $17::bigint[],"
    " $18::text[], $19::text[], $20::text[], $21::bigint[]) WITH ORDINALITY"
    " AS u(ev, t, s, c, f, n, o) JOIN ids ON ids.o = u.ev ORDER BY u.o";

enum { EVENT_ARRAYS = 20, EVENT_LOOPS = EVENT_ARRAYS }; /* $2 to $21; a[EVENT_LOOPS]: $24 */

/* Event e (its group group_sig), the n-th of the statement, into a. */
static void add_event(pg_array_t *a, int64_t n, const store_event_t *e, const char *group_sig) {
  pg_array_text(&a[0], e->kind);
  pg_array_int(&a[1], e->start_ns);
  pg_array_int(&a[2], e->duration_ns);
  pg_array_int(&a[3], e->tid);
  pg_array_int(&a[4], e->cpu_percent);
  pg_array_text(&a[5], e->reason);
  pg_array_text(&a[6], e->dominant_stack_sig);
  pg_array_text(&a[7], group_sig);
  pg_array_text(&a[8], e->label && e->label[0] ? e->label : NULL);
  pg_array_text(&a[EVENT_LOOPS], e->loop && e->loop[0] ? e->loop : NULL);
  for (size_t i = 0; i < e->n_counts; i++) {
    pg_array_int(&a[9], n);
    pg_array_text(&a[10], e->counts[i].stack_sig);
    pg_array_int(&a[11], e->counts[i].tid);
    pg_array_int(&a[12], e->counts[i].samples);
    if (e->counts[i].cpu_us >= 0) /* CPU time on the stack (weights); NULL: none */
      pg_array_int(&a[13], e->counts[i].cpu_us);
    else
      pg_array_text(&a[13], NULL);
  }
  for (size_t i = 0; i < e->n_states; i++) {
    const store_state_count_t *c = &e->states[i];
    pg_array_int(&a[14], n);
    pg_array_int(&a[15], c->tid);
    pg_array_text(&a[16], c->state);
    pg_array_text(&a[17], c->syscall);
    pg_array_text(&a[18], c->fd);
    pg_array_int(&a[19], (int64_t)c->samples);
  }
}

/* The group of each hang of b, in its order (picked[i] event i's).
   Hang grouping reads the stored groups, then writes: one collector at a
   time, from the lock to the COMMIT. Taken this late, the rows written
   before (the batch, its new stacks) are not waited for by the other
   collectors: they lock none already stored. The lock and every hang's
   first read go in one round trip (pg_hang_groups_pick_all). */
static int pick_hangs(store_t *st, const store_batch_t *b, char (*picked)[STORE_SIG_CHARS + 1]) {
  const store_hang_t **hangs = malloc((b->n_events + 1) * sizeof *hangs);
  char **sigs = malloc((b->n_events + 1) * sizeof *sigs);
  int rc = hangs && sigs ? 0 : -1;
  size_t n = 0;
  for (size_t i = 0; rc == 0 && i < b->n_events; i++)
    if (b->events[i].hang) {
      hangs[n] = b->events[i].hang;
      sigs[n++] = picked[i];
    }
  if (rc == 0 && n) {
    pg_params_t p = {0};
    pg_int(&p, 1, PG_LOCK_HANG_GROUPS);
    rc = pg_do(st, "SELECT pg_advisory_xact_lock($1::bigint)", &p, "hang groups lock");
  }
  if (rc == 0 && n) rc = pg_hang_groups_pick_all(st, hangs, n, b->received_ns, sigs);
  free(hangs);
  free(sigs);
  return rc;
}

/* The events with a hang pick (picks: each hang with a key, in the group
   picked for it, picked[i]) or those without, in their order. */
static int insert_events(store_t *st, const store_batch_t *b, char (*picked)[STORE_SIG_CHARS + 1],
                         bool picks) {
  pg_array_t a[EVENT_ARRAYS + 1] = {{0}};
  int64_t n = 0;
  int rc = picks ? pick_hangs(st, b, picked) : 0;
  for (size_t i = 0; rc == 0 && i < b->n_events; i++) {
    const store_event_t *e = &b->events[i];
    if ((e->hang != NULL) != picks) continue;
    add_event(a, ++n, e, e->hang ? picked[i] : e->group_sig);
  }
  pg_params_t p = {0};
  pg_bytes(&p, 1, b->id, STORE_BATCH_ID_BYTES);
  if ((pg_own_arrays(&p, 2, a, EVENT_ARRAYS) | pg_own_arrays(&p, 24, &a[EVENT_LOOPS], 1)) != 0)
    rc = -1;
  pg_int(&p, 22, b->received_ns);
  pg_int(&p, 23, n);
  if (rc == 0 && n) rc = pg_do(st, INSERT_EVENTS, &p, "insert events");
  pg_params_free(&p);
  return rc;
}

/* The rollups of the events with a hang pick, or of those without
   (group: rollup_picks_t's). Their rows' keys differ, or merge as one. */
static int add_rollups(store_t *st, const store_batch_t *b, const char *const *group, bool picks) {
  store_batch_t sub = *b;
  store_event_t *events = malloc((b->n_events + 1) * sizeof *events);
  const char **groups = malloc((b->n_events + 1) * sizeof *groups);
  int rc = events && groups ? 0 : -1;
  sub.events = events;
  sub.n_events = 0;
  for (size_t i = 0; rc == 0 && i < b->n_events; i++)
    if ((b->events[i].hang != NULL) == picks) {
      groups[sub.n_events] = group[i];
      events[sub.n_events++] = b->events[i];
    }
  if (rc == 0 && sub.n_events) rc = pg_rollups_add_batch(st, &sub, groups);
  free(events);
  free(groups);
  return rc;
}

/* One row of loop stats: the batch's sum (loop NULL, loop_stats) or a
   named loop's (loop_stats_by_loop). */
static int insert_loop_row(store_t *st, const store_batch_t *b, const char *loop,
                           const store_loop_stats_t *l) {
  pg_params_t p = {0};
  pg_bytes(&p, 1, b->id, STORE_BATCH_ID_BYTES);
  pg_int(&p, 2, (int64_t)l->watched_ns); /* <= STORE_MAX_LOOP_VALUE */
  pg_int(&p, 3, (int64_t)l->busy_ns);
  for (int i = 0; i < STORE_LOOP_BUCKETS; i++)
    pg_int(&p, 4 + i, (int64_t)l->units[i]);
  if (!loop)
    return pg_do(st,
                 "INSERT INTO loop_stats(batch_id, watched_ns, busy_ns, u0, u1, u2, u3, u4, u5, u6,"
                 " u7, u8) VALUES($1, $2::bigint, $3::bigint, $4::bigint, $5::bigint, $6::bigint,"
                 " $7::bigint, $8::bigint, $9::bigint, $10::bigint, $11::bigint, $12::bigint)",
                 &p, "insert loop stats");
  pg_text(&p, 13, loop);
  return pg_do(st,
               "INSERT INTO loop_stats_by_loop(batch_id, loop_name, watched_ns, busy_ns, u0, u1,"
               " u2, u3, u4, u5, u6, u7, u8) VALUES($1, $13::text, $2::bigint, $3::bigint,"
               " $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::bigint, $9::bigint,"
               " $10::bigint, $11::bigint, $12::bigint)",
               &p, "insert loop stats");
}

static int insert_loop_stats(store_t *st, const store_batch_t *b) {
  int rc = b->loop_stats ? insert_loop_row(st, b, NULL, b->loop_stats) : 0;
  for (size_t i = 0; rc == 0 && i < b->n_loops; i++)
    rc = insert_loop_row(st, b, b->loops[i].loop, &b->loops[i].stats);
  return rc;
}

#define PUT_RETRY 100

/* --durability full: a batch commits with synchronous_commit off, so its
   COMMIT releases the hang groups lock as soon as its commit record is in
   the WAL, not after the WAL's flush (a 2-core server spent a sixth of
   the lock's span in it, two collectors' batches waiting). This statement
   then makes it durable before the 200: run in its own transaction with
   the session's synchronous_commit on, setval writes WAL and takes a
   transaction id, so its commit flushes the WAL up to its record, the
   batch's commit before it included (one WAL, in order). A batch found
   stored (STORE_DUPLICATE) is marked the same way: its first post may
   not have flushed yet. Another collector may read the batch's rows
   before the flush; whatever it commits from them comes later in the WAL,
   so a crash takes both or neither. Queued behind the COMMIT in the
   pipeline: no round trip of its own. */
static int durable_mark(store_t *st) {
  if (st->durability != STORE_DURABLE_FULL) return 0;
  return pg_do(st, "SELECT setval('wal_flush_mark', 1)", NULL, "flush the WAL");
}

/* After the COMMIT: the rows the batch sent known stored (those it left
   out keep the arrival of the batch that sent them). */
static void note_sent(store_t *st, const store_batch_t *b) {
  for (size_t i = 0; i < b->n_stacks; i++)
    if (!store_known_fresh(st->known_stacks, b->stacks[i].signature, b->received_ns))
      store_known_note(st->known_stacks, b->stacks[i].signature, b->received_ns);
  for (size_t i = 0; i < b->n_groups; i++)
    if (!store_known_fresh(st->known_groups, b->groups[i].signature, b->received_ns))
      store_known_note(st->known_groups, b->groups[i].signature, b->received_ns);
}

/* One attempt: STORE_OK, STORE_DUPLICATE, STORE_ERROR, or PUT_RETRY (a
   deadlock or a serialization failure between collectors). The
   statements are pipelined: those without rows to read go out without
   waiting, and are read back with the next that has (the batch row, a
   hang pick's reads) or with the COMMIT. */
static int put_once(store_t *st, const store_batch_t *b) {
  pg_pipeline_begin(st);
  int rc = pg_do(st, "BEGIN", NULL, "begin");
  /* The batch's statements take arrays whose sizes a custom plan would
     see; their plans do not depend on them, and PostgreSQL kept planning
     them again at every batch (GetCachedPlan: 12% of the backends' CPU,
     1.6% after). */
  if (rc == 0) rc = pg_do(st, "SET LOCAL plan_cache_mode = force_generic_plan", NULL, "begin");
  /* Committed asynchronously, made durable by durable_mark. */
  if (rc == 0) rc = pg_do(st, "SET LOCAL synchronous_commit = off", NULL, "begin");
  int dup = rc == 0 ? insert_batch_row(st, b) : -1;
  if (dup == 1) {
    pg_pipeline_end(st);
    pg_do(st, "ROLLBACK", NULL, "rollback");
    return durable_mark(st) == 0 ? STORE_DUPLICATE : STORE_ERROR;
  }
  rc = dup;
  if (rc == 0) rc = upsert_stacks(st, b);
  rollup_picks_t picks;
  if (rc == 0 && rollup_picks_init(&picks, b) != 0) rc = -1;
  if (rc == 0) {
    /* What needs no hang pick before the first pick: the hang lock is
       held from there to the COMMIT, and two collectors' batches with
       hangs wait for each other's span. The groups after the picks
       (upsert_groups). */
    rc = insert_events(st, b, picks.picked, false);
    if (rc == 0) rc = add_rollups(st, b, picks.group, false);
    if (rc == 0) rc = insert_loop_stats(st, b);
    if (rc == 0) rc = insert_events(st, b, picks.picked, true);
    if (rc == 0) rc = upsert_groups(st, b);
    if (rc == 0) rc = add_rollups(st, b, picks.group, true);
    rollup_picks_free(&picks);
  }
  if (rc == 0) rc = pg_do(st, "COMMIT", NULL, "commit");
  if (rc == 0) rc = durable_mark(st);
  if (pg_pipeline_end(st) != 0) rc = -1;
  if (rc == 0) {
    note_sent(st, b);
    return STORE_OK;
  }
  const char *state = pg_last_state(st);
  /* A lost connection (the server restarted, a proxy cut it) is tried
     again on a new one: had the COMMIT gone through before the loss, the
     retry finds the batch (STORE_DUPLICATE, acknowledged as stored). */
  int retry = strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0 ||
              PQstatus(st->conn) != CONNECTION_OK;
  if (PQstatus(st->conn) == CONNECTION_OK) pg_do(st, "ROLLBACK", NULL, "rollback");
  return retry ? PUT_RETRY : STORE_ERROR;
}

static int pg_put_batch(store_t *st, const store_batch_t *b) {
  pthread_mutex_lock(&st->lock);
  pg_partitions_ensure(st, b->received_ns);
  int rc = PUT_RETRY;
  for (int i = 0; rc == PUT_RETRY && i < PUT_ATTEMPTS; i++)
    rc = put_once(st, b);
  pthread_mutex_unlock(&st->lock);
  return rc == PUT_RETRY ? STORE_ERROR : rc;
}

/* ---- retention -------------------------------------------------------------- */

/* The shared order (query_sql.h); last_seen trails the latest batch by up
   to PG_LAST_SEEN_STEP. */
static const char *const DELETES[] = QSQL_RETENTION(" - " PG_XSTR(PG_LAST_SEEN_STEP));
_Static_assert(sizeof DELETES / sizeof DELETES[0] == QSQL_RETENTION_STEPS, "one SQL a step");
/* The rollup buckets those deletes touch (rebuilt after them). */
static const char MARK_OLD[] =
    "INSERT INTO rollup_dirty(bucket_ns) SELECT DISTINCT " ROLLUP_BUCKET_OF(
        "e.start_ns") " FROM events e JOIN batches b ON e.batch_id = b.id"
                      " WHERE b.received_ns < $1::bigint AND e.start_ns IS NOT NULL ON CONFLICT DO "
                      "NOTHING";

/* One collector at a time (pg_try_advisory_xact_lock): another one
   running the job now makes this run a no-op. */
static int delete_locked(store_t *st, int64_t cutoff_ns, uint64_t *deleted) {
  if (pg_do(st, "BEGIN", NULL, "begin") != 0) return STORE_ERROR;
  pg_params_t p = {0};
  pg_int(&p, 1, PG_LOCK_RETENTION);
  PGresult *r = pg_run(st, "SELECT pg_try_advisory_xact_lock($1::bigint)", &p, "retention lock");
  int got = r && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
  PQclear(r);
  if (!r || !got) {
    pg_do(st, "ROLLBACK", NULL, "rollback");
    return r ? STORE_OK : STORE_ERROR;
  }
  pg_int(&p, 1, cutoff_ns);
  if (pg_rollups_mark(st, MARK_OLD, &p) != 0 || pg_partitions_drop_before(st, cutoff_ns) != 0) {
    pg_do(st, "ROLLBACK", NULL, "rollback");
    return STORE_ERROR;
  }
  bool rows_gone = false;
  for (size_t i = 0; i < sizeof DELETES / sizeof DELETES[0]; i++) {
    if (!(r = pg_run(st, DELETES[i], &p, "retention"))) break;
    if (i == QSQL_RETENTION_BATCHES && deleted)
      *deleted = (uint64_t)strtoull(PQcmdTuples(r), NULL, 10);
    if (i >= QSQL_RETENTION_STACKS && strcmp(PQcmdTuples(r), "0") != 0) rows_gone = true;
    PQclear(r);
  }
  /* The rows deleted were last seen over a step before the cutoff: no
     batch kept now can have left them out. The epoch makes every
     collector forget them anyway (a clock far off, a database edited). */
  if (r && rows_gone && pg_do(st, PG_BUMP_STACK_EPOCH, NULL, "retention") != 0) r = NULL;
  if (r && pg_hang_groups_prune(st) == 0 && pg_rollups_rebuild(st) == 0 &&
      pg_do(st, "COMMIT", NULL, "commit") == 0)
    return STORE_OK;
  pg_do(st, "ROLLBACK", NULL, "rollback");
  if (deleted) *deleted = 0;
  return STORE_ERROR;
}

static int pg_delete_older_than(store_t *st, int64_t cutoff_ns, uint64_t *deleted) {
  if (deleted) *deleted = 0;
  pthread_mutex_lock(&st->lock);
  int rc = delete_locked(st, cutoff_ns, deleted);
  pthread_mutex_unlock(&st->lock);
  return rc;
}

/* ---- stats, check ------------------------------------------------------------ */

static int pg_stats(store_t *st, store_stats_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&st->lock);
  PGresult *r = pg_run(st,
                       "SELECT (SELECT count(*) FROM batches), (SELECT count(*) FROM events),"
                       " (SELECT count(*) FROM stacks), (SELECT count(*) FROM stack_counts),"
                       " pg_database_size(current_database())",
                       NULL, "stats");
  if (r) {
    out->batches = (uint64_t)pg_i64(r, 0, 0);
    out->events = (uint64_t)pg_i64(r, 0, 1);
    out->stacks = (uint64_t)pg_i64(r, 0, 2);
    out->stack_counts = (uint64_t)pg_i64(r, 0, 3);
    out->db_bytes = (uint64_t)pg_i64(r, 0, 4);
  }
  PQclear(r);
  pthread_mutex_unlock(&st->lock);
  return r ? STORE_OK : STORE_ERROR;
}

/* A server is not a file a path can stop naming: never lost (a server
   down fails the statements instead, and the batches get a 500). */
/* Named jobs (claim_job): a session-level advisory lock on the store's
   connection, keyed by PG_LOCK_CLASS_JOB and the name's hash (a collision
   only makes one job wait for the other's next round). A lost connection
   drops it with the session. */
static int pg_claim_job(store_t *st, const char *job) {
  pg_params_t p = {0};
  pg_text(&p, 1, job);
  pthread_mutex_lock(&st->lock);
  PGresult *r = pg_run(st, "SELECT pg_try_advisory_lock(" PG_LOCK_CLASS_JOB ", hashtext($1))", &p,
                       "claim job");
  int got = !r ? -1 : strcmp(PQgetvalue(r, 0, 0), "t") == 0;
  PQclear(r);
  pthread_mutex_unlock(&st->lock);
  return got;
}

static void pg_release_job(store_t *st, const char *job) {
  pg_params_t p = {0};
  pg_text(&p, 1, job);
  pthread_mutex_lock(&st->lock);
  PQclear(pg_run(st, "SELECT pg_advisory_unlock(" PG_LOCK_CLASS_JOB ", hashtext($1))", &p,
                 "release job"));
  pthread_mutex_unlock(&st->lock);
}

static int pg_check(store_t *st, char *why, size_t why_len) {
  (void)st;
  if (why_len) why[0] = '\0';
  return STORE_OK;
}

const store_ops_t store_pg_ops = {
    .name = "postgresql",
    .open = pg_open,
    .close = pg_close,
    .put_batch = pg_put_batch,
    .delete_older_than = pg_delete_older_than,
    .stats = pg_stats,
    .check = pg_check,
    .health = pg_health,
    .claim_job = pg_claim_job,
    .release_job = pg_release_job,
    .top_rows = pg_top_rows,
    .stack_rows = pg_stack_rows,
    .event_rows = pg_event_rows,
    .event_detail = pg_event_detail,
    .drops = pg_drops,
    .time_buckets = pg_time_buckets,
    .event_states = pg_event_states,
    .state_rows = pg_state_rows,
    .loop_totals = pg_loop_totals,
    .resymbolize = pg_resymbolize,
    .group_stacks = pg_group_stacks,
    .alert_rule_add = pg_alert_rule_add,
    .alert_rule_delete = pg_alert_rule_delete,
    .alert_rules = pg_alert_rules,
    .alert_claim = pg_alert_claim,
    .alert_update = pg_alert_update,
    .alert_rows = pg_alert_rows,
    .app_versions = pg_app_versions,
    .new_groups = pg_new_groups,
};
