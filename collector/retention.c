/*
 * retention.c - the retention thread (see retention.h). It owns nothing but
 * its timer; the deletes go through the store interface, which serializes
 * them with the ingest threads' writes.
 */
#include "retention.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct retention_s {
  const store_ops_t *ops;
  store_t *store;
  int64_t max_age_ns;
  unsigned interval_s;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  bool stopping;
  pthread_t thread;
};

static void run_once(retention_t *r) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t cutoff = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec - r->max_age_ns;
  uint64_t deleted = 0;
  if (r->ops->delete_older_than(r->store, cutoff, &deleted) == STORE_OK && deleted)
    fprintf(stderr, "perf-collector: retention deleted %llu batches\n",
            (unsigned long long)deleted);
}

static void *retention_main(void *arg) {
  retention_t *r = arg;
  pthread_mutex_lock(&r->lock);
  while (!r->stopping) {
    pthread_mutex_unlock(&r->lock);
    run_once(r);
    pthread_mutex_lock(&r->lock);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += r->interval_s;
    while (!r->stopping && pthread_cond_timedwait(&r->wake, &r->lock, &until) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&r->lock);
  return NULL;
}

retention_t *retention_start(const store_ops_t *ops, store_t *store, unsigned days,
                             unsigned interval_s) {
  retention_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->ops = ops;
  r->store = store;
  r->max_age_ns = (int64_t)days * 86400 * 1000000000;
  r->interval_s = interval_s;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->wake, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&r->lock, NULL);
  if (pthread_create(&r->thread, NULL, retention_main, r) != 0) {
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
    free(r);
    return NULL;
  }
  return r;
}

void retention_stop(retention_t *r) {
  if (!r) return;
  pthread_mutex_lock(&r->lock);
  r->stopping = true;
  pthread_cond_signal(&r->wake);
  pthread_mutex_unlock(&r->lock);
  pthread_join(r->thread, NULL);
  pthread_cond_destroy(&r->wake);
  pthread_mutex_destroy(&r->lock);
  free(r);
}
