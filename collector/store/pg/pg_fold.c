/*
 * pg_fold.c - the PostgreSQL backend's fold thread (pg_store.h), a
 * perf__worker ("perf-pg-fold") on a connection of its own: every
 * --rollup-fold-interval seconds it folds the rollup rows batches appended
 * (pg_rollups_fold, pg_rollups.c) in a transaction of its own, and
 * once more when stopped, so a collector stopped cleanly leaves nothing to
 * fold. The batches never wait for it: it takes only the rows committed
 * before its statement, and writes its own shard of the rollup rows.
 *
 * Several collectors: each tries PG_LOCK_FOLD and skips the round when
 * another one holds it; the delta rows of a collector that died (kill -9)
 * are folded by the next one. A fold that failed (the server down) leaves
 * its rows for the next round; the reads count them meanwhile.
 */
#include <stdio.h>

#include "collector/base/log.h"
#include "collector/store/pg/pg_store.h"
#include "perf_sdk.h"
#include "sdk/base/clock.h"

/* One fold in its own transaction: 0, or -1 (said). */
static int fold_once(store_t *f) {
  pthread_mutex_lock(&f->lock);
  int rc = pg_do(f, "BEGIN", NULL, "begin");
  if (rc == 0) rc = pg_rollups_fold(f, false);
  if (rc == 0) rc = pg_do(f, "COMMIT", NULL, "commit");
  if (rc != 0 && PQstatus(f->conn) == CONNECTION_OK) pg_do(f, "ROLLBACK", NULL, "rollback");
  pthread_mutex_unlock(&f->lock);
  return rc;
}

static void fold_main(perf__worker_t *w, void *arg) {
  store_t *f = arg;
  for (;;) {
    perf__worker_sleep_until(w, perf__now_ns() + (int64_t)f->fold_interval_s * 1000000000);
    fold_once(f); /* also when stopping: the last one */
    if (perf__worker_stopping(w)) break;
  }
}

int pg_fold_start(store_t *st) {
  store_t *f = pg_connect(st->conninfo, st->durability);
  if (!f) return -1;
  f->shard = st->shard;
  f->fold_interval_s = st->fold_interval_s;
  if (perf__worker_start("perf-pg-fold", fold_main, f, &st->fold_worker) != PERF_OK) {
    collector_log("postgresql: the fold thread did not start\n");
    pg_disconnect(f);
    return -1;
  }
  st->folder = f;
  return 0;
}

void pg_fold_stop(store_t *st) {
  if (!st->fold_worker) return;
  perf__worker_stop(st->fold_worker, 0); /* the last fold is waited for */
  st->fold_worker = NULL;
  pg_disconnect(st->folder);
  st->folder = NULL;
}
