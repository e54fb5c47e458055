/*
 * curl_transport.c - the libcurl transport (see transport.h). One easy
 * handle, reused so the connection to the collector stays open between
 * batches. Uploader thread only.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "uploader/transport.h"

typedef struct {
  perf__transport_t base;
  CURL *curl;
  CURLM *multi;
  atomic_bool interrupted;
  perf__curl_options_t opts;
  char *ca_bundle;
  char error[CURL_ERROR_SIZE];
} curl_transport_t;

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init;

static void global_init(void);
static int post(perf__transport_t *t, const perf__http_request_t *req, perf__http_response_t *resp);
static void destroy(perf__transport_t *t);
static void interrupt(perf__transport_t *t);
static CURLcode perform(curl_transport_t *t);
static size_t on_header(char *line, size_t size, size_t n, void *arg);
static size_t on_body(char *data, size_t size, size_t n, void *arg);

int perf__curl_transport_new(const perf__curl_options_t *opts, perf__transport_t **out) {
  pthread_once(&g_curl_once, global_init);
  if (g_curl_init != CURLE_OK) return PERF_E_SYSTEM;
  curl_transport_t *t = calloc(1, sizeof *t);
  if (!t) return PERF_E_NO_MEMORY;
  t->base.post = post;
  t->base.interrupt = interrupt;
  t->base.destroy = destroy;
  t->opts = *opts;
  if (opts->ca_bundle && !(t->ca_bundle = strdup(opts->ca_bundle))) {
    free(t);
    return PERF_E_NO_MEMORY;
  }
  t->curl = curl_easy_init();
  t->multi = curl_multi_init();
  if (!t->curl || !t->multi) {
    destroy(&t->base);
    return PERF_E_NO_MEMORY;
  }
  *out = &t->base;
  return PERF_OK;
}

static void global_init(void) {
  g_curl_init = curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct {
  perf__http_response_t *resp;
  size_t reason_len;
} reply_t;

static int post(perf__transport_t *base, const perf__http_request_t *req,
                perf__http_response_t *resp) {
  curl_transport_t *t = (curl_transport_t *)base;
  CURL *c = t->curl;
  memset(resp, 0, sizeof *resp);
  char auth[600], id[64];
  struct curl_slist *headers = NULL, *h;
  headers = curl_slist_append(headers, "Content-Type: application/x-protobuf");
  if ((h = curl_slist_append(headers, "Content-Encoding: zstd")) != NULL) headers = h;
  snprintf(id, sizeof id, "X-Perf-Batch-Id: %s", req->batch_id);
  if ((h = curl_slist_append(headers, id)) != NULL) headers = h;
  if (req->api_key) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", req->api_key);
    if ((h = curl_slist_append(headers, auth)) != NULL) headers = h;
  }
  if ((h = curl_slist_append(headers, "Expect:")) != NULL) headers = h; /* no 100-continue wait */
  reply_t reply = {resp, 0};
  curl_easy_reset(c); /* keeps the connection cache: the connection is reused */
  curl_easy_setopt(c, CURLOPT_URL, req->url);
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_USERAGENT, PERF_SDK_NAME "/" PERF_SDK_VERSION);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, t->opts.connect_timeout_ms);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, t->opts.timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* no SIGALRM for DNS timeouts in a library */
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, t->opts.verify_tls ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, t->opts.verify_tls ? 2L : 0L);
  if (t->ca_bundle) curl_easy_setopt(c, CURLOPT_CAINFO, t->ca_bundle);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, t->error);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &reply);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply);
  t->error[0] = '\0';
  CURLcode rc = perform(t);
  curl_slist_free_all(headers);
  if (rc == CURLE_ABORTED_BY_CALLBACK) {
    snprintf(resp->reason, sizeof resp->reason, "interrupted (shutting down)");
    return PERF_E_BUSY;
  }
  if (rc != CURLE_OK) {
    resp->status = 0;
    snprintf(resp->reason, sizeof resp->reason, "%s",
             t->error[0] ? t->error : curl_easy_strerror(rc));
    return rc == CURLE_OPERATION_TIMEDOUT ? PERF_E_TIMEOUT : PERF_E_SYSTEM;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
  return PERF_OK;
}

/* The easy handle driven by the multi handle, so that another thread can
   cut a transfer short (interrupt -> curl_multi_wakeup) without waiting for
   a timeout. */
static CURLcode perform(curl_transport_t *t) {
  if (atomic_load(&t->interrupted)) return CURLE_ABORTED_BY_CALLBACK;
  if (curl_multi_add_handle(t->multi, t->curl) != CURLM_OK) return CURLE_FAILED_INIT;
  CURLcode result = CURLE_OK;
  int running = 1;
  while (running) {
    if (curl_multi_perform(t->multi, &running) != CURLM_OK) {
      result = CURLE_FAILED_INIT;
      break;
    }
    if (!running) break;
    if (atomic_load(&t->interrupted)) {
      result = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
    curl_multi_poll(t->multi, NULL, 0, 1000, NULL);
  }
  int left;
  CURLMsg *msg;
  while ((msg = curl_multi_info_read(t->multi, &left)) != NULL)
    if (msg->msg == CURLMSG_DONE && result == CURLE_OK) result = msg->data.result;
  curl_multi_remove_handle(t->multi, t->curl);
  return result;
}

static void interrupt(perf__transport_t *base) {
  curl_transport_t *t = (curl_transport_t *)base;
  atomic_store(&t->interrupted, true);
  curl_multi_wakeup(t->multi);
}

static void destroy(perf__transport_t *base) {
  curl_transport_t *t = (curl_transport_t *)base;
  if (!t) return;
  if (t->multi) curl_multi_cleanup(t->multi);
  curl_easy_cleanup(t->curl);
  free(t->ca_bundle);
  free(t);
}

/* Keep Retry-After; a new status line (after a redirect or 100) resets it. */
static size_t on_header(char *line, size_t size, size_t n, void *arg) {
  reply_t *reply = arg;
  size_t len = size * n;
  if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) reply->resp->retry_after[0] = '\0';
  static const char name[] = "retry-after:";
  if (len > sizeof name - 1 && strncasecmp(line, name, sizeof name - 1) == 0) {
    const char *v = line + sizeof name - 1;
    size_t vlen = len - (sizeof name - 1);
    while (vlen && isspace((unsigned char)*v))
      v++, vlen--;
    while (vlen && isspace((unsigned char)v[vlen - 1]))
      vlen--;
    if (vlen >= sizeof reply->resp->retry_after) vlen = sizeof reply->resp->retry_after - 1;
    memcpy(reply->resp->retry_after, v, vlen);
    reply->resp->retry_after[vlen] = '\0';
  }
  return len;
}

/* The body is only the server's reason: keep its start, drop the rest. */
static size_t on_body(char *data, size_t size, size_t n, void *arg) {
  reply_t *reply = arg;
  size_t len = size * n, room = sizeof reply->resp->reason - 1 - reply->reason_len;
  size_t take = len < room ? len : room;
  memcpy(reply->resp->reason + reply->reason_len, data, take);
  reply->reason_len += take;
  reply->resp->reason[reply->reason_len] = '\0';
  return len;
}
