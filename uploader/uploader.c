/*
 * uploader.c - the upload thread (see uploader.h). One thread, one transport
 * (one reused connection). The thread is a perf__worker ("perf-uploader"):
 * its tid is registered, so the SDK never reports it as the app's, and its
 * lock guards the flags below. Timing is on the monotonic clock; the only
 * wall clock read is for Retry-After dates.
 *
 * Loop: take the oldest batch in the spool, POST it, then by the response:
 * 2xx -> remove; 429/502/503/504 or no response -> keep, wait Retry-After or
 * an exponential backoff with full jitter; 401/403/404/408 -> keep, wait a
 * long backoff (a rotated key, a proxy: a later key or process may send
 * it); other 4xx -> quarantine (the batch itself can never succeed); other
 * 5xx -> retry, and drop after max_server_errors attempts.
 * Batches are sent strictly in order: a batch being retried holds back the
 * newer ones (the collector is down or busy for them too).
 *
 * When no batch has arrived for stall_warn_ms since an attempt failed, the
 * app is told once why (upload_stall.c); the thread wakes for it in a
 * backoff or with an empty spool too.
 */
#include "uploader/uploader.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "sdk/base/worker.h"
#include "uploader/retry_policy.h"
#include "uploader/upload_stall.h"

/* How long the transport stays ready (the helper's process alive) after
   the spool empties: a batch within it is sent at once. */
#define TRANSPORT_LINGER_MS 3000

struct perf__uploader_s {
  perf__uploader_options_t o;
  char *url, *api_key;
  perf__worker_t *worker;     /* the thread; its lock guards the fields below */
  bool kicked;                /* a batch was added: look at the spool */
  bool idle;                  /* the spool was found empty (flushers wait for it) */
  int64_t next_attempt_ns;    /* 0: now */
  unsigned attempts;          /* failed attempts of the oldest batch */
  uint64_t attempts_seq;      /* ... which is this one */
  perf__upload_stall_t stall; /* the uploader thread's alone */
};

static void uploader_main(perf__worker_t *worker, void *arg);
static void send_one(perf__uploader_t *u, const perf__spool_entry_t *e);
static void after_failure(perf__uploader_t *u, const perf__spool_entry_t *e,
                          const perf__http_response_t *resp, perf__upload_action_t action);
static void wait_until(perf__uploader_t *u, int64_t deadline_ns);
static int64_t or_stall(perf__uploader_t *u, int64_t deadline_ns);
static void stall_check(perf__uploader_t *u);
static void wait_for_batch(perf__uploader_t *u);
static double random01(void);

int perf__uploader_start(const perf__uploader_options_t *opts, perf__uploader_t **out) {
  perf__uploader_t *u = calloc(1, sizeof *u);
  if (!u) return PERF_E_NO_MEMORY;
  u->o = *opts;
  perf__upload_stall_init(&u->stall, opts->stall_warn_ms);
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
  int err = perf__worker_start("perf-uploader", uploader_main, u, &u->worker);
  if (err) {
    free(u->url);
    free(u->api_key);
    free(u);
    return err;
  }
  *out = u;
  return PERF_OK;
}

void perf__uploader_wake(perf__uploader_t *u) {
  perf__worker_lock(u->worker);
  u->kicked = true;
  u->idle = false; /* not idle until it has looked at the spool again */
  perf__worker_notify_locked(u->worker);
  perf__worker_unlock(u->worker);
}

int perf__uploader_flush(perf__uploader_t *u, int64_t deadline_ns) {
  perf__uploader_wake(u);
  perf__worker_lock(u->worker);
  /* "idle" is only set when the thread found the spool empty. A backoff
     that ends past the deadline settles it at once: nothing is sent
     before then (a shutdown behind a refused key does not spend its whole
     timeout waiting). */
  while (!u->idle && !perf__worker_stopping(u->worker) && perf__now_ns() < deadline_ns &&
         u->next_attempt_ns <= deadline_ns)
    perf__worker_wait(u->worker, deadline_ns);
  int err = u->idle ? PERF_OK : PERF_E_TIMEOUT;
  perf__worker_unlock(u->worker);
  return err;
}

void perf__uploader_stop(perf__uploader_t *u) {
  if (!u) return;
  perf__worker_ask_stop(u->worker);
  u->o.transport->interrupt(u->o.transport); /* a request in flight ends now */
  perf__worker_stop(u->worker, 0);
  u->o.transport->destroy(u->o.transport);
  free(u->url);
  free(u->api_key);
  free(u);
}

static void uploader_main(perf__worker_t *worker, void *arg) {
  perf__uploader_t *u = arg;
  perf__worker_lock(worker);
  while (!perf__worker_stopping(worker)) {
    stall_check(u);
    if (u->next_attempt_ns && perf__now_ns() < u->next_attempt_ns) {
      perf__transport_t *t = u->o.transport;
      if (t->idle && u->next_attempt_ns - perf__now_ns() > (int64_t)TRANSPORT_LINGER_MS * 1000000) {
        perf__worker_unlock(worker); /* a long backoff: the helper's process ends meanwhile */
        t->idle(t);
        perf__worker_lock(worker);
      }
      wait_until(u, or_stall(u, u->next_attempt_ns)); /* backoff: new batches do not cut it short */
      continue;
    }
    u->kicked = false;
    perf__worker_unlock(worker);
    perf__spool_entry_t e;
    int rc = perf__spool_peek_oldest(u->o.spool, &e);
    perf__worker_lock(worker);
    if (rc == PERF__E_SPOOL_EMPTY) {
      u->idle = true;
      perf__worker_notify_locked(worker); /* flushers */
      wait_for_batch(u);
      u->idle = false;
      continue;
    }
    perf__worker_unlock(worker);
    if (rc == PERF_OK) send_one(u, &e);
    perf__worker_lock(worker);
  }
  perf__worker_unlock(worker);
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
  int post_rc = rc = u->o.transport->post(u->o.transport, &req, &resp);
  free(payload);
  if (rc == PERF_E_BUSY) return; /* interrupted: shutting down, the batch stays */
  perf__upload_action_t action = perf__upload_action(rc == PERF_OK ? resp.status : 0);
  if (action == PERF__UPLOAD_DONE)
    perf__upload_stall_arrived(&u->stall);
  else
    perf__upload_stall_failed(&u->stall, perf__now_ns(), post_rc, &resp);
  if (action == PERF__UPLOAD_DONE) {
    perf__spool_remove(u->o.spool, e);
    PERF__COUNT(u->o.stats, batches_sent, 1);
    perf__worker_lock(u->worker);
    u->attempts = 0;
    u->next_attempt_ns = 0;
    perf__worker_unlock(u->worker);
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
  perf__worker_lock(u->worker);
  if (u->attempts_seq != e->seq) {
    u->attempts_seq = e->seq;
    u->attempts = 0;
  }
  unsigned attempt = ++u->attempts;
  perf__worker_unlock(u->worker);
  if (action == PERF__UPLOAD_RETRY_LIMITED && attempt >= u->o.max_server_errors) {
    perf__log(PERF__LOG_WARN, "batch %llu: %u server errors (last %ld), dropped",
              (unsigned long long)e->seq, attempt, resp->status);
    perf__spool_remove(u->o.spool, e);
    PERF__COUNT(u->o.stats, batches_dropped_server, 1);
    perf__worker_lock(u->worker);
    u->attempts = 0;
    perf__worker_unlock(u->worker);
    return;
  }
  int64_t delay = -1;
  if (resp->status == 429 || resp->status == 503)
    delay = perf__retry_after_ms(resp->retry_after[0] ? resp->retry_after : NULL, time(NULL));
  if (delay < 0 && action == PERF__UPLOAD_RETRY_LONG) {
    delay = perf__long_backoff_ms(attempt, u->o.backoff_cap_ms, random01());
    if (attempt == 1) /* once per batch: a rotated key answers every batch alike */
      perf__log(PERF__LOG_WARN,
                "collector answered %ld (%s) for batch %llu: kept, retried in %lld s", resp->status,
                resp->reason, (unsigned long long)e->seq, (long long)(delay / 1000));
  }
  if (delay < 0)
    delay = perf__backoff_ms(attempt, u->o.backoff_base_ms, u->o.backoff_cap_ms, random01());
  PERF__COUNT(u->o.stats, batches_retried, 1);
  perf__log(PERF__LOG_DEBUG, "batch %llu: %s; retry in %lld ms", (unsigned long long)e->seq,
            resp->status ? "refused or busy" : resp->reason, (long long)delay);
  perf__worker_lock(u->worker);
  u->next_attempt_ns = perf__now_ns() + delay * 1000000;
  perf__worker_notify_locked(u->worker); /* a flusher: past its deadline? */
  perf__worker_unlock(u->worker);
}

/* With the lock held, the spool empty: sleep until a batch comes or stop.
   The transport is told it is idle after TRANSPORT_LINGER_MS without one
   (the helper's process ends; a batch within the linger reuses it). */
static void wait_for_batch(perf__uploader_t *u) {
  perf__transport_t *t = u->o.transport;
  int64_t linger_end = perf__now_ns() + (int64_t)TRANSPORT_LINGER_MS * 1000000;
  while (!perf__worker_stopping(u->worker) && !u->kicked && t->idle && perf__now_ns() < linger_end)
    perf__worker_wait(u->worker, linger_end);
  if (!perf__worker_stopping(u->worker) && !u->kicked && t->idle) {
    perf__worker_unlock(u->worker);
    t->idle(t);
    perf__worker_lock(u->worker);
  }
  /* Until a batch comes, or a stall warning is due (then the loop says
     it and comes back here). */
  int64_t stall = or_stall(u, 0);
  while (!perf__worker_stopping(u->worker) && !u->kicked && (!stall || perf__now_ns() < stall))
    perf__worker_wait(u->worker, stall);
}

/* deadline_ns (0: none), or the stall warning's deadline when sooner. */
static int64_t or_stall(perf__uploader_t *u, int64_t deadline_ns) {
  int64_t stall = perf__upload_stall_deadline(&u->stall);
  return stall && (!deadline_ns || stall < deadline_ns) ? stall : deadline_ns;
}

/* With the lock held: say the stall warning when it is due. */
static void stall_check(perf__uploader_t *u) {
  char msg[512];
  if (!perf__upload_stall_due(&u->stall, perf__now_ns(), u->url, msg, sizeof msg)) return;
  perf__worker_unlock(u->worker);
  perf__log(PERF__LOG_WARN, "%s", msg);
  perf__worker_lock(u->worker);
}

/* With the lock held: sleep until deadline_ns or stop. */
static void wait_until(perf__uploader_t *u, int64_t deadline_ns) {
  while (!perf__worker_stopping(u->worker) && perf__now_ns() < deadline_ns)
    perf__worker_wait(u->worker, deadline_ns);
}

static double random01(void) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) r = (uint64_t)perf__now_ns();
  return (double)(r >> 11) / (double)(UINT64_C(1) << 53);
}
