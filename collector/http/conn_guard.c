/*
 * conn_guard.c - the per-request deadline (see conn_guard.h): a fixed table
 * of slots (one per allowed connection, allocated at start) under one
 * mutex, and a perf__worker that shuts down the sockets past their
 * deadline.
 */
#include "collector/http/conn_guard.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "collector/model/metrics.h"
#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/worker.h"

#define SWEEP_NS 500000000LL /* how often deadlines are looked at */

typedef struct slot_s {
  int fd;           /* -1: free */
  bool shut;        /* shut down already: once is enough */
  int64_t deadline; /* monotonic ns */
} slot_t;

struct conn_guard_s {
  pthread_mutex_t lock;
  slot_t *slots;
  size_t n;
  int64_t timeout_ns;
  atomic_ullong expired;
  perf__worker_t *worker;
};

static void sweep(conn_guard_t *g, int64_t now) {
  pthread_mutex_lock(&g->lock);
  for (size_t i = 0; i < g->n; i++) {
    slot_t *s = &g->slots[i];
    if (s->fd < 0 || s->shut || now < s->deadline) continue;
    /* MHD sees end of file and closes the connection on its own thread. */
    shutdown(s->fd, SHUT_RDWR);
    s->shut = true;
    atomic_fetch_add(&g->expired, 1);
    metrics_request_expired();
  }
  pthread_mutex_unlock(&g->lock);
}

static void guard_main(perf__worker_t *w, void *arg) {
  conn_guard_t *g = arg;
  while (!perf__worker_stopping(w)) {
    sweep(g, perf__now_ns());
    perf__worker_sleep_until(w, perf__now_ns() + SWEEP_NS);
  }
}

conn_guard_t *conn_guard_start(size_t max_connections, unsigned timeout_s) {
  conn_guard_t *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->slots = calloc(max_connections, sizeof *g->slots);
  g->n = max_connections;
  g->timeout_ns = (int64_t)timeout_s * 1000000000;
  for (size_t i = 0; g->slots && i < g->n; i++)
    g->slots[i].fd = -1;
  pthread_mutex_init(&g->lock, NULL);
  if (!g->slots || perf__worker_start("perf-conn-guard", guard_main, g, &g->worker) != PERF_OK) {
    pthread_mutex_destroy(&g->lock);
    free(g->slots);
    free(g);
    return NULL;
  }
  return g;
}

void conn_guard_stop(conn_guard_t *g) {
  if (!g) return;
  perf__worker_stop(g->worker, 0);
  pthread_mutex_destroy(&g->lock);
  free(g->slots);
  free(g);
}

void conn_guard_opened(conn_guard_t *g, int fd, void **slot) {
  *slot = NULL;
  pthread_mutex_lock(&g->lock);
  for (size_t i = 0; i < g->n; i++) {
    if (g->slots[i].fd >= 0) continue;
    g->slots[i] = (slot_t){fd, false, perf__now_ns() + g->timeout_ns};
    *slot = &g->slots[i];
    break;
  }
  pthread_mutex_unlock(&g->lock);
}

void conn_guard_answered(conn_guard_t *g, void *slot) {
  if (!slot) return;
  pthread_mutex_lock(&g->lock);
  ((slot_t *)slot)->deadline = perf__now_ns() + g->timeout_ns;
  pthread_mutex_unlock(&g->lock);
}

void conn_guard_closed(conn_guard_t *g, void *slot) {
  if (!slot) return;
  pthread_mutex_lock(&g->lock);
  ((slot_t *)slot)->fd = -1;
  pthread_mutex_unlock(&g->lock);
}

unsigned long long conn_guard_expired(const conn_guard_t *g) {
  return g ? atomic_load(&((conn_guard_t *)g)->expired) : 0;
}
