/*
 * retention.c - the retention thread (see retention.h), a perf__worker
 * ("perf-retention") that sleeps on the monotonic clock. It owns nothing but
 * its timer; the deletes go through the store interface, which serializes
 * them with the ingest threads' writes.
 */
#include "collector/store/retention.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "collector/base/log.h"
#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/worker.h"

struct retention_s {
  const store_ops_t *ops;
  store_t *store;
  int64_t max_age_ns;
  unsigned interval_s;
  perf__worker_t *worker;
};

static void run_once(retention_t *r) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t cutoff = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec - r->max_age_ns;
  uint64_t deleted = 0;
  if (r->ops->delete_older_than(r->store, cutoff, &deleted) == STORE_OK && deleted)
    collector_log("retention deleted %llu batches\n", (unsigned long long)deleted);
}

static void retention_main(perf__worker_t *worker, void *arg) {
  retention_t *r = arg;
  while (!perf__worker_stopping(worker)) {
    run_once(r);
    perf__worker_sleep_until(worker, perf__now_ns() + (int64_t)r->interval_s * 1000000000);
  }
}

retention_t *retention_start(const store_ops_t *ops, store_t *store, unsigned days,
                             unsigned interval_s) {
  retention_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->ops = ops;
  r->store = store;
  r->max_age_ns = (int64_t)days * 86400 * 1000000000;
  r->interval_s = interval_s;
  if (perf__worker_start("perf-retention", retention_main, r, &r->worker) != PERF_OK) {
    free(r);
    return NULL;
  }
  return r;
}

void retention_stop(retention_t *r) {
  if (!r) return;
  perf__worker_stop(r->worker, 0); /* a delete in progress is waited for */
  free(r);
}
