/*
 * job_pool.c - a fixed set of threads taking jobs from one bounded
 * queue (see job_pool.h).
 */
#include "collector/http/job_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "sdk/base/clock.h"

typedef struct pool_thread_s {
  struct job_pool_s *pool;
  pthread_t tid;
  int64_t running_since; /* when its job started (monotonic ns), 0 idle; pool lock */
} pool_thread_t;

struct job_pool_s {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  job_t *head, *tail; /* waiting, oldest first */
  size_t waiting, max_waiting;
  size_t outstanding; /* queued and not released yet */
  bool stopping;
  unsigned started;
  pool_thread_t *threads;
};

static void *pool_thread(void *arg);
static job_t *take_job(job_pool_t *p);

job_pool_t *job_pool_start(const char *name, unsigned threads, size_t max_waiting) {
  job_pool_t *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  pthread_mutex_init(&p->lock, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&p->wake, &attr);
  pthread_condattr_destroy(&attr);
  p->max_waiting = max_waiting;
  p->threads = calloc(threads, sizeof *p->threads);
  bool ok = p->threads != NULL;
  for (unsigned i = 0; ok && i < threads; i++) {
    p->threads[i].pool = p;
    ok = pthread_create(&p->threads[i].tid, NULL, pool_thread, &p->threads[i]) == 0;
    if (ok) {
      pthread_setname_np(p->threads[i].tid, name);
      p->started++;
    }
  }
  if (!ok) {
    job_pool_stop(p, 0);
    job_pool_free(p);
    return NULL;
  }
  return p;
}

bool job_pool_submit(job_pool_t *p, job_t *job) {
  pthread_mutex_lock(&p->lock);
  bool ok = !p->stopping && p->waiting < p->max_waiting;
  if (ok) {
    job->next = NULL;
    if (p->tail)
      p->tail->next = job;
    else
      p->head = job;
    p->tail = job;
    p->waiting++;
    p->outstanding++;
    pthread_cond_signal(&p->wake);
  }
  pthread_mutex_unlock(&p->lock);
  return ok;
}

void job_pool_release(job_pool_t *p) {
  pthread_mutex_lock(&p->lock);
  if (p->outstanding && --p->outstanding == 0) pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
}

void job_pool_load(job_pool_t *p, job_load_t *out) {
  int64_t now = perf__now_ns();
  pthread_mutex_lock(&p->lock);
  *out = (job_load_t){0, p->waiting, 0, p->stopping};
  for (unsigned i = 0; i < p->started; i++) {
    int64_t since = p->threads[i].running_since;
    if (!since) continue;
    out->running++;
    if (now - since > out->oldest_running_ns) out->oldest_running_ns = now - since;
  }
  pthread_mutex_unlock(&p->lock);
}

void job_pool_close(job_pool_t *p) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->stopping = true;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
}

void job_pool_stop(job_pool_t *p, int64_t answer_wait_ns) {
  if (!p) return;
  job_pool_close(p);
  for (unsigned i = 0; i < p->started; i++)
    pthread_join(p->threads[i].tid, NULL);
  for (;;) { /* the jobs no thread was left to take */
    pthread_mutex_lock(&p->lock);
    p->started = 0;
    job_t *job = take_job(p);
    pthread_mutex_unlock(&p->lock);
    if (!job) break;
    job->run(job, true);
  }
  /* Every connection was resumed: let the workers send the answers. */
  int64_t deadline_ns = perf__now_ns() + answer_wait_ns;
  pthread_mutex_lock(&p->lock);
  while (p->outstanding && perf__now_ns() < deadline_ns) {
    struct timespec ts = {(time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000)};
    pthread_cond_timedwait(&p->wake, &p->lock, &ts);
  }
  pthread_mutex_unlock(&p->lock);
}

void job_pool_free(job_pool_t *p) {
  if (!p) return;
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->lock);
  free(p->threads);
  free(p);
}

/* The oldest waiting job, or NULL. Pool lock held. */
static job_t *take_job(job_pool_t *p) {
  job_t *job = p->head;
  if (!job) return NULL;
  p->head = job->next;
  if (!p->head) p->tail = NULL;
  p->waiting--;
  return job;
}

/* Jobs until the pool stops; once stopping, the waiting ones are run
   cancelled (they answer at once), so a stop waits only for the jobs
   already running. */
static void *pool_thread(void *arg) {
  pool_thread_t *t = arg;
  job_pool_t *p = t->pool;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    job_t *job = take_job(p);
    if (!job) {
      if (p->stopping) break;
      pthread_cond_wait(&p->wake, &p->lock);
      continue;
    }
    bool cancelled = p->stopping;
    t->running_since = perf__now_ns();
    pthread_mutex_unlock(&p->lock);
    job->run(job, cancelled);
    pthread_mutex_lock(&p->lock);
    t->running_since = 0;
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}
