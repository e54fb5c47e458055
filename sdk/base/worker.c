/*
 * worker.c - background threads and the registry of their tids (see
 * worker.h). start and stop run on the owner's thread, worker_main on the
 * worker's; the registry is read lock-free from any thread.
 *
 * The registry is a fixed table of atomic tids: a slot is reserved (-1)
 * by start, before the thread exists, so a full table fails the start
 * instead of leaving an SDK thread unregistered; the thread writes its tid
 * into the slot, and clears it when fn returns.
 */
#include "sdk/base/worker.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "sdk/base/threads.h"

#define SLOT_RESERVED (-1)

struct perf__worker_s {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond; /* on CLOCK_MONOTONIC */
  atomic_bool stop;
  perf__worker_fn fn;
  void *arg;
  int slot; /* in g_tids */
  char name[16];
  pid_t tid;     /* set before start returns, never changed */
  bool started;  /* lock: the tid is registered */
  bool returned; /* lock: fn has returned, the tid is unregistered */
  bool detached; /* lock: stop gave up; the thread frees the worker */
};

static atomic_int g_tids[PERF__WORKER_MAX]; /* 0 free, SLOT_RESERVED, or a tid */

static void *worker_main(void *arg);
static void wait_until(perf__worker_t *w, int64_t deadline_ns);
static int reserve_slot(void);
static void free_worker(perf__worker_t *w);

int perf__worker_start(const char *name, perf__worker_fn fn, void *arg, perf__worker_t **out) {
  *out = NULL;
  perf__worker_t *w = calloc(1, sizeof *w);
  if (!w) return PERF_E_NO_MEMORY;
  w->fn = fn;
  w->arg = arg;
  snprintf(w->name, sizeof w->name, "%s", name); /* the kernel keeps 15 characters */
  w->slot = reserve_slot();
  if (w->slot < 0) {
    free(w);
    perf__log(PERF__LOG_ERROR, "thread %s not started: %d SDK threads already run", name,
              PERF__WORKER_MAX);
    return PERF_E_NO_MEMORY;
  }
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cond, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&w->lock, NULL);
  *out = w; /* before the thread exists: fn may read it through its owner */
  if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
    *out = NULL;
    atomic_store(&g_tids[w->slot], 0);
    free_worker(w);
    perf__log(PERF__LOG_ERROR, "thread %s not started: pthread_create failed", name);
    return PERF_E_SYSTEM;
  }
  pthread_mutex_lock(&w->lock);
  while (!w->started)
    pthread_cond_wait(&w->cond, &w->lock);
  pthread_mutex_unlock(&w->lock);
  return PERF_OK;
}

int perf__worker_stop(perf__worker_t *w, int64_t deadline_ns) {
  pthread_mutex_lock(&w->lock);
  atomic_store(&w->stop, true);
  pthread_cond_broadcast(&w->cond);
  while (!w->returned && (deadline_ns == 0 || perf__now_ns() < deadline_ns))
    wait_until(w, deadline_ns);
  bool returned = w->returned;
  w->detached = !returned;
  pthread_t thread = w->thread;
  pthread_mutex_unlock(&w->lock);
  if (!returned) {
    /* From here on the thread may free w at any moment. */
    pthread_detach(thread);
    return PERF_E_TIMEOUT;
  }
  pthread_join(thread, NULL);
  free_worker(w);
  return PERF_OK;
}

void perf__worker_ask_stop(perf__worker_t *w) {
  pthread_mutex_lock(&w->lock);
  atomic_store(&w->stop, true);
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

bool perf__worker_stopping(const perf__worker_t *w) {
  return atomic_load(&w->stop);
}

pid_t perf__worker_tid(const perf__worker_t *w) {
  return w->tid;
}

void perf__worker_lock(perf__worker_t *w) {
  pthread_mutex_lock(&w->lock);
}

void perf__worker_unlock(perf__worker_t *w) {
  pthread_mutex_unlock(&w->lock);
}

void perf__worker_wait(perf__worker_t *w, int64_t deadline_ns) {
  /* The stop flag is set under the lock: checked here, it cannot be missed. */
  if (atomic_load(&w->stop) || (deadline_ns && perf__now_ns() >= deadline_ns)) return;
  wait_until(w, deadline_ns);
}

void perf__worker_notify(perf__worker_t *w) {
  pthread_mutex_lock(&w->lock);
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

void perf__worker_notify_locked(perf__worker_t *w) {
  /* Broadcast: the thread and its owner's waiters share the one condition. */
  pthread_cond_broadcast(&w->cond);
}

void perf__worker_sleep_until(perf__worker_t *w, int64_t deadline_ns) {
  pthread_mutex_lock(&w->lock);
  while (!atomic_load(&w->stop) && perf__now_ns() < deadline_ns)
    wait_until(w, deadline_ns);
  pthread_mutex_unlock(&w->lock);
}

bool perf__worker_is_sdk_thread(pid_t tid) {
  if (tid <= 0) return false;
  for (size_t i = 0; i < PERF__WORKER_MAX; i++)
    if (atomic_load_explicit(&g_tids[i], memory_order_acquire) == tid) return true;
  return false;
}

bool perf__worker_starting(void) {
  for (size_t i = 0; i < PERF__WORKER_MAX; i++)
    if (atomic_load_explicit(&g_tids[i], memory_order_acquire) == SLOT_RESERVED) return true;
  return false;
}

void perf__worker_forget_all(void) {
  for (size_t i = 0; i < PERF__WORKER_MAX; i++)
    atomic_store(&g_tids[i], 0);
}

static void *worker_main(void *arg) {
  perf__worker_t *w = arg;
  pthread_setname_np(pthread_self(), w->name);
  pid_t tid = perf__gettid();
  atomic_store_explicit(&g_tids[w->slot], tid, memory_order_release);
  pthread_mutex_lock(&w->lock);
  w->tid = tid;
  w->started = true;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);

  w->fn(w, w->arg);

  atomic_store_explicit(&g_tids[w->slot], 0, memory_order_release);
  pthread_mutex_lock(&w->lock);
  w->returned = true;
  bool detached = w->detached;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
  if (detached) free_worker(w); /* nobody will join: the stopper gave up */
  return NULL;
}

/* With the lock held: one wait on the condition, until deadline_ns if any. */
static void wait_until(perf__worker_t *w, int64_t deadline_ns) {
  if (!deadline_ns) {
    pthread_cond_wait(&w->cond, &w->lock);
    return;
  }
  struct timespec ts = {(time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000)};
  pthread_cond_timedwait(&w->cond, &w->lock, &ts);
}

/* A free registry slot, marked reserved; -1 when every slot is taken. */
static int reserve_slot(void) {
  for (int i = 0; i < PERF__WORKER_MAX; i++) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&g_tids[i], &expected, SLOT_RESERVED)) return i;
  }
  return -1;
}

/* The registry slot is not touched here: the thread cleared it when fn
   returned, and another worker may hold it by now. */
static void free_worker(perf__worker_t *w) {
  pthread_cond_destroy(&w->cond);
  pthread_mutex_destroy(&w->lock);
  free(w);
}
