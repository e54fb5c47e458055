/*
 * lazy_transport.c - the http sink's transport, made at the first post (see
 * transport.h): the libcurl transport, and libcurl with it (~5.6 MiB
 * resident with its TLS, Kerberos, LDAP and ssh libraries), is loaded only
 * when there is a batch to send, not when the sink starts: an app whose
 * spool stays empty never maps it.
 *
 * post runs on the uploader thread only; interrupt may come from any
 * thread, also while the first post is loading libcurl (the lock is not
 * held meanwhile, so the interrupt does not wait for the dlopen).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_sdk.h"
#include "uploader/transport.h"

typedef struct {
  perf__transport_t base;
  perf__curl_options_t opts;
  char *ca_bundle; /* opts.ca_bundle points here */
  pthread_mutex_t lock;
  perf__transport_t *inner; /* the libcurl transport, once made */
  int err;                  /* making it failed: every post answers this */
  bool interrupted;
} lazy_t;

static int post(perf__transport_t *t, const perf__http_request_t *req, perf__http_response_t *resp);
static void interrupt(perf__transport_t *t);
static void destroy(perf__transport_t *t);

int perf__lazy_curl_transport_new(const perf__curl_options_t *opts, perf__transport_t **out) {
  *out = NULL;
  lazy_t *l = calloc(1, sizeof *l);
  if (!l) return PERF_E_NO_MEMORY;
  l->opts = *opts;
  if (opts->ca_bundle && !(l->ca_bundle = strdup(opts->ca_bundle))) {
    free(l);
    return PERF_E_NO_MEMORY;
  }
  l->opts.ca_bundle = l->ca_bundle;
  pthread_mutex_init(&l->lock, NULL);
  l->base.post = post;
  l->base.interrupt = interrupt;
  l->base.destroy = destroy;
  *out = &l->base;
  return PERF_OK;
}

static int post(perf__transport_t *t, const perf__http_request_t *req,
                perf__http_response_t *resp) {
  lazy_t *l = (lazy_t *)t;
  memset(resp, 0, sizeof *resp);
  pthread_mutex_lock(&l->lock);
  bool stop = l->interrupted;
  perf__transport_t *inner = l->inner;
  int err = l->err;
  pthread_mutex_unlock(&l->lock);
  if (stop) {
    snprintf(resp->reason, sizeof resp->reason, "interrupted");
    return PERF_E_BUSY;
  }
  if (!inner && !err) {
    perf__transport_t *made = NULL;
    err = perf__curl_transport_new(&l->opts, &made);
    pthread_mutex_lock(&l->lock);
    l->inner = made;
    l->err = err;
    if (made && l->interrupted) made->interrupt(made);
    pthread_mutex_unlock(&l->lock);
    inner = made;
  }
  if (err) {
    snprintf(resp->reason, sizeof resp->reason, "no libcurl transport: %s", perf_strerror(err));
    return err;
  }
  return inner->post(inner, req, resp);
}

static void interrupt(perf__transport_t *t) {
  lazy_t *l = (lazy_t *)t;
  pthread_mutex_lock(&l->lock);
  l->interrupted = true;
  if (l->inner) l->inner->interrupt(l->inner);
  pthread_mutex_unlock(&l->lock);
}

static void destroy(perf__transport_t *t) {
  lazy_t *l = (lazy_t *)t;
  if (l->inner) l->inner->destroy(l->inner);
  pthread_mutex_destroy(&l->lock);
  free(l->ca_bundle);
  free(l);
}
