/*
 * uploader.c - the upload thread (see uploader.h). One thread, one transport
 * (one reused connection). Timing is on the monotonic clock; the only wall
 * clock read is for Retry-After dates.
 *
 * Loop: take the oldest batch in the spool, POST it, then by the response:
 * 2xx -> remove; 429/502/503/504 or no response -> keep, wait Retry-After or
 * an exponential backoff with full jitter; 4xx -> quarantine (it can never
 * succeed); other 5xx -> retry, and drop after max_server_errors attempts.
 * Batches are sent strictly in order: a batch being retried holds back the
 * newer ones (the collector is down or busy for them too).
 */
#include "uploader/uploader.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "uploader/retry_policy.h"

struct perf__uploader_s {
  perf__uploader_options_t o;
  char *url, *api_key;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond; /* wake-ups for the thread, and "idle" for flushers */
  bool stop, kicked, idle;
  int64_t next_attempt_ns; /* 0: now */
  unsigned attempts;       /* failed attempts of the oldest batch */
  uint64_t attempts_seq;   /* ... which is this one */
};

static void *uploader_main(void *arg);
static void send_one(perf__uploader_t *u, const perf__spool_entry_t *e);
static void after_failure(perf__uploader_t *u, const perf__spool_entry_t *e,
                          const perf__http_response_t *resp, perf__upload_action_t action);
static void wait_until(perf__uploader_t *u, int64_t deadline_ns);
static double random01(void);
static void cond_deadline(struct timespec *ts, int64_t deadline_ns);

int perf__uploader_start(const perf__uploader_options_t *opts, perf__uploader_t **out) {
  perf__uploader_t *u = calloc(1, sizeof *u);
  if (!u) return PERF_E_NO_MEMORY;
  u->o = *opts;
  size_t n = strlen(opts->endpoint) + sizeof "/v1/batches";
  u->url = malloc(n);
  u->api_key = opts->api_key ? strdup(opts->api_key) : NULL;
  if (!u->url || (opts->api_key && !u->api_key)) {
    free(u->url);
    free(u->api_key);
    free(u);
    return PERF_E_NO_MEMORY;
  }
  /* "{endpoint}/v1/batches", whether or not the endpoint ends with '/'. */
  size_t len = strlen(opts->endpoint);
  while (len > 0 && opts->endpoint[len - 1] == '/')
    len--;
  snprintf(u->url, n, "%.*s/v1/batches", (int)len, opts->endpoint);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&u->cond, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&u->lock, NULL);
  if (pthread_create(&u->thread, NULL, uploader_main, u) != 0) {
    pthread_cond_destroy(&u->cond);
    pthread_mutex_destroy(&u->lock);
    free(u->url);
    free(u->api_key);
    free(u);
    return PERF_E_SYSTEM;
  }
  *out = u;
  return PERF_OK;
}

void perf__uploader_wake(perf__uploader_t *u) {
  pthread_mutex_lock(&u->lock);
  u->kicked = true;
  u->idle = false; /* not idle until it has looked at the spool again */
  pthread_cond_broadcast(&u->cond);
  pthread_mutex_unlock(&u->lock);
}

int perf__uploader_flush(perf__uploader_t *u, int64_t deadline_ns) {
  perf__uploader_wake(u);
  pthread_mutex_lock(&u->lock);
  struct timespec ts;
  cond_deadline(&ts, deadline_ns);
  /* "idle" is only set when the thread found the spool empty. */
  while (!u->idle && !u->stop && perf__now_ns() < deadline_ns)
    pthread_cond_timedwait(&u->cond, &u->lock, &ts);
  int err = u->idle ? PERF_OK : PERF_E_TIMEOUT;
  pthread_mutex_unlock(&u->lock);
  return err;
}

void perf__uploader_stop(perf__uploader_t *u) {
  if (!u) return;
  pthread_mutex_lock(&u->lock);
  u->stop = true;
  pthread_cond_broadcast(&u->cond);
  pthread_mutex_unlock(&u->lock);
  u->o.transport->interrupt(u->o.transport); /* a request in flight ends now */
  pthread_join(u->thread, NULL);
  u->o.transport->destroy(u->o.transport);
  pthread_cond_destroy(&u->cond);
  pthread_mutex_destroy(&u->lock);
  free(u->url);
  free(u->api_key);
  free(u);
}

static void *uploader_main(void *arg) {
  perf__uploader_t *u = arg;
  pthread_setname_np(pthread_self(), "perf-uploader");
  pthread_mutex_lock(&u->lock);
  while (!u->stop) {
    if (u->next_attempt_ns && perf__now_ns() < u->next_attempt_ns) {
      wait_until(u, u->next_attempt_ns); /* backoff: new batches do not cut it short */
      continue;
    }
    u->kicked = false;
    pthread_mutex_unlock(&u->lock);
    perf__spool_entry_t e;
    int rc = perf__spool_peek_oldest(u->o.spool, &e);
    pthread_mutex_lock(&u->lock);
    if (rc == PERF__E_SPOOL_EMPTY) {
      u->idle = true;
      pthread_cond_broadcast(&u->cond); /* flushers */
      while (!u->stop && !u->kicked)
        pthread_cond_wait(&u->cond, &u->lock);
      u->idle = false;
      continue;
    }
    pthread_mutex_unlock(&u->lock);
    if (rc == PERF_OK) send_one(u, &e);
    pthread_mutex_lock(&u->lock);
  }
  pthread_mutex_unlock(&u->lock);
  return NULL;
}

static void send_one(perf__uploader_t *u, const perf__spool_entry_t *e) {
  uint8_t *payload = NULL;
  size_t len = 0;
  int rc = perf__spool_read(u->o.spool, e, &payload, &len);
  if (rc == PERF__E_SPOOL_CORRUPT || rc == PERF__E_SPOOL_GONE) return; /* next one */
  if (rc != PERF_OK) { /* I/O error: the file stays; try again later */
    perf__http_response_t none = {0};
    after_failure(u, e, &none, PERF__UPLOAD_RETRY);
    return;
  }
  char id[33];
  for (int i = 0; i < 16; i++)
    snprintf(id + 2 * i, 3, "%02x", e->id[i]);
  perf__http_request_t req = {u->url, u->api_key, id, payload, len};
  perf__http_response_t resp;
  rc = u->o.transport->post(u->o.transport, &req, &resp);
  free(payload);
  if (rc == PERF_E_BUSY) return; /* interrupted: shutting down, the batch stays */
  perf__upload_action_t action = perf__upload_action(rc == PERF_OK ? resp.status : 0);
  if (action == PERF__UPLOAD_DONE) {
    perf__spool_remove(u->o.spool, e);
    PERF__COUNT(u->o.stats, batches_sent, 1);
    pthread_mutex_lock(&u->lock);
    u->attempts = 0;
    u->next_attempt_ns = 0;
    pthread_mutex_unlock(&u->lock);
  } else if (action == PERF__UPLOAD_REJECTED) {
    char reason[32];
    snprintf(reason, sizeof reason, "http_%ld", resp.status);
    perf__log(PERF__LOG_WARN, "collector refused batch %s with %ld (%s); set aside", id,
              resp.status, resp.reason);
    perf__spool_quarantine(u->o.spool, e, reason);
    PERF__COUNT(u->o.stats, batches_rejected, 1);
  } else {
    after_failure(u, e, &resp, action);
  }
}

/* Keep the batch and decide when to try again (or, past the 5xx limit, drop
   it). */
static void after_failure(perf__uploader_t *u, const perf__spool_entry_t *e,
                          const perf__http_response_t *resp, perf__upload_action_t action) {
  pthread_mutex_lock(&u->lock);
  if (u->attempts_seq != e->seq) {
    u->attempts_seq = e->seq;
    u->attempts = 0;
  }
  unsigned attempt = ++u->attempts;
  pthread_mutex_unlock(&u->lock);
  if (action == PERF__UPLOAD_RETRY_LIMITED && attempt >= u->o.max_server_errors) {
    perf__log(PERF__LOG_WARN, "batch %llu: %u server errors (last %ld), dropped",
              (unsigned long long)e->seq, attempt, resp->status);
    perf__spool_remove(u->o.spool, e);
    PERF__COUNT(u->o.stats, batches_dropped_server, 1);
    pthread_mutex_lock(&u->lock);
    u->attempts = 0;
    pthread_mutex_unlock(&u->lock);
    return;
  }
  int64_t delay = -1;
  if (resp->status == 429 || resp->status == 503)
    delay = perf__retry_after_ms(resp->retry_after[0] ? resp->retry_after : NULL, time(NULL));
  if (delay < 0)
    delay = perf__backoff_ms(attempt, u->o.backoff_base_ms, u->o.backoff_cap_ms, random01());
  PERF__COUNT(u->o.stats, batches_retried, 1);
  perf__log(PERF__LOG_DEBUG, "batch %llu: %s; retry in %lld ms", (unsigned long long)e->seq,
            resp->status ? "busy collector" : resp->reason, (long long)delay);
  pthread_mutex_lock(&u->lock);
  u->next_attempt_ns = perf__now_ns() + delay * 1000000;
  pthread_mutex_unlock(&u->lock);
}

/* With u->lock held: sleep until deadline_ns or stop. */
static void wait_until(perf__uploader_t *u, int64_t deadline_ns) {
  struct timespec ts;
  cond_deadline(&ts, deadline_ns);
  while (!u->stop && perf__now_ns() < deadline_ns)
    pthread_cond_timedwait(&u->cond, &u->lock, &ts);
}

static double random01(void) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) r = (uint64_t)perf__now_ns();
  return (double)(r >> 11) / (double)(UINT64_C(1) << 53);
}

static void cond_deadline(struct timespec *ts, int64_t deadline_ns) {
  ts->tv_sec = (time_t)(deadline_ns / 1000000000);
  ts->tv_nsec = (long)(deadline_ns % 1000000000);
}
