/*
 * transport.h - how the uploader sends one batch: a small interface so that
 * tests can put a fake (or failing) transport in place of libcurl, and the
 * libcurl implementation. Uploader thread only.
 */
#ifndef PERF_TRANSPORT_H
#define PERF_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct perf__http_request_s {
  const char *url;      /* {endpoint}/v1/batches */
  const char *api_key;  /* sent as "Authorization: Bearer <key>"; NULL: no header */
  const char *batch_id; /* 32 hex digits, sent as X-Perf-Batch-Id */
  const void *body;     /* zstd-compressed protobuf Batch */
  size_t body_len;
} perf__http_request_t;

typedef struct perf__http_response_s {
  long status;          /* HTTP status, 0 when no response arrived */
  char retry_after[64]; /* the Retry-After header's value, "" when absent */
  char reason[256];     /* the start of the body (the server's reason) or the network error */
} perf__http_response_t;

typedef struct perf__transport_s perf__transport_t;
struct perf__transport_s {
  /* Send req; fill *resp. Returns 0 when a response (any status) arrived,
     or a negative perf_error_t for a network error (resp->reason says which):
     PERF_E_TIMEOUT when it timed out, PERF_E_BUSY when interrupted. */
  int (*post)(perf__transport_t *t, const perf__http_request_t *req, perf__http_response_t *resp);
  /* From any thread: make the post in progress (and every later one) give
     up at once. Shutdown uses it to keep its deadline. */
  void (*interrupt)(perf__transport_t *t);
  /* Optional (NULL: nothing to do): the uploader found nothing to send for
     a while; release what only a post needs (the helper's process). */
  void (*idle)(perf__transport_t *t);
  void (*destroy)(perf__transport_t *t);
};

typedef struct perf__curl_options_s {
  long connect_timeout_ms; /* default 5000 */
  long timeout_ms;         /* the whole request; default 30000 */
  bool verify_tls;         /* default true */
  const char *ca_bundle;   /* NULL: the system's */
} perf__curl_options_t;

/* libcurl: one easy handle in one multi handle, reused for every request
   (keep-alive), proxy from the usual environment variables (http_proxy,
   https_proxy, no_proxy); interrupt() wakes the multi's poll.
   libcurl itself is loaded (dlopen) by the first call; PERF_E_UNSUPPORTED
   (logged) when it cannot be. Free with t->destroy(t). */
int perf__curl_transport_new(const perf__curl_options_t *opts, perf__transport_t **out);

/* The same, made at the first post instead of now (uploader/lazy_transport.c):
   libcurl is loaded only once there is a batch to send. When it cannot be
   made, that post and every later one answer the error (status 0, the
   reason says so): the uploader keeps the batches and tries again later.
   Returns 0 or PERF_E_NO_MEMORY. */
int perf__lazy_curl_transport_new(const perf__curl_options_t *opts, perf__transport_t **out);

/* libcurl in the upload helper, a process of its own (uploader/
   helper_transport.c, the program at helper_path): started at the first
   post, ended by idle() and on any failure of the exchange, started again
   by the next post; where no helper can run, the lazy libcurl transport
   (logged once). Returns 0, PERF_E_NO_MEMORY or PERF_E_SYSTEM. */
int perf__helper_transport_new(const perf__curl_options_t *opts, const char *helper_path,
                               perf__transport_t **out);

/* How many helper processes this transport has started (tests). */
uint64_t perf__helper_transport_started(perf__transport_t *t);

/* The upload helper to use (uploader/helper_path.c): `configured` (the
   config's upload_helper) when set; "off" or "": none; NULL: perfsdk/
   perf-upload beside the library holding this code, else the one in the
   installed library directory. Returns 0 with the path in out,
   PERF_E_UNSUPPORTED when there is none to use (libcurl then loads in
   this process), PERF_E_INVALID_CONFIG (logged) when `configured` names
   no executable file. */
int perf__upload_helper_find(const char *configured, char *out, size_t out_len);

#endif
