/*
 * sqlite_fold.c - the SQLite store's fold thread (sqlite_store.h), a
 * perf__worker ("perf-sql-fold"): every --rollup-fold-interval seconds
 * that a batch committed since the last fold, it moves the delta rows the
 * batches appended into the rollups (store_rollups_fold) and the batches'
 * stack counts into their index by signature (sqlite_index_counts) in a
 * transaction of its own under the store's lock, and once more when stopped, so a
 * collector stopped cleanly leaves nothing to fold. A fold that failed or
 * found the database locked leaves the rows for the next one; the reads add them meanwhile, and
 * after a kill -9 the next collector folds them.
 */
#include "collector/base/log.h"
#include "collector/store/sqlite/sqlite_store.h"
#include "perf_sdk.h"
#include "sdk/base/clock.h"

/* One fold when the delta tables may hold rows. The write lock is taken
   without waiting: another connection holding it would hold the store's
   lock, and every batch and read behind it, for SQLite's busy wait; the
   fold waits for its next round instead (/healthz tells of the lock). */
static void fold_once(store_t *st) {
  char why[64];
  if (sqlite_check(st, why, sizeof why) != STORE_OK) return; /* nothing into a lost file */
  pthread_mutex_lock(&st->lock);
  if (st->unfolded) {
    sqlite3_busy_timeout(st->db, 0);
    int rc = sqlite_step_done(st, ST_BEGIN);
    sqlite3_busy_timeout(st->db, SQLITE_BUSY_TIMEOUT_MS);
    if (rc == SQLITE_BUSY) {
      pthread_mutex_unlock(&st->lock);
      return;
    }
    if (rc == SQLITE_OK) rc = store_rollups_fold(st->rollups);
    if (rc == SQLITE_OK) rc = sqlite_index_counts(st);
    if (rc == SQLITE_OK) rc = sqlite_step_done(st, ST_COMMIT);
    if (rc == SQLITE_OK) {
      st->unfolded = false;
    } else {
      sqlite_report(st, "rollups fold");
      sqlite_step_done(st, ST_ROLLBACK);
    }
  }
  pthread_mutex_unlock(&st->lock);
}

static void fold_main(perf__worker_t *w, void *arg) {
  store_t *st = arg;
  for (;;) {
    perf__worker_sleep_until(w, perf__now_ns() + (int64_t)st->fold_interval_s * 1000000000);
    fold_once(st); /* also when stopping: the last one */
    if (perf__worker_stopping(w)) break;
  }
}

int sqlite_fold_start(store_t *st) {
  if (perf__worker_start("perf-sql-fold", fold_main, st, &st->fold_worker) != PERF_OK) {
    collector_log("sqlite: the fold thread did not start");
    st->fold_worker = NULL;
    return STORE_ERROR;
  }
  return STORE_OK;
}

void sqlite_fold_stop(store_t *st) {
  if (!st->fold_worker) return;
  perf__worker_stop(st->fold_worker, 0); /* the last fold is waited for */
  st->fold_worker = NULL;
}
