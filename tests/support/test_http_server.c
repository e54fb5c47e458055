/*
 * test_http_server.c - the scriptable test server (http_server.c) against a
 * real libcurl client on 127.0.0.1: scripted statuses in order, exact
 * recording of headers and body, delays, dropped connections, keep-alive
 * reuse, restart on the same port, waits with a deadline, body bounds and
 * concurrent clients. Each case runs in its own process:
 * `test_http_server <case>`.
 *
 * Durations are measured on CLOCK_MONOTONIC, the clock the server records
 * arrival times on. The client's helper threads are the only threads the
 * test starts; the server's threads are libmicrohttpd's.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "check.h"
#include "http_server.h"
#include "test_util.h"

#define BATCH_ID "0123456789abcdef0123456789abcdef"

static uint64_t ms_since(uint64_t start_ns) {
  return (now_ns() - start_ns) / 1000000u;
}

/* ---- a small libcurl client ------------------------------------------------ */

typedef struct reply_s {
  CURLcode rc;
  long status;
  long new_connections; /* CURLINFO_NUM_CONNECTS: 0 when the connection was reused */
  char body[4096];
  size_t body_len;
  char retry_after[64];
  uint64_t elapsed_ms;
} reply_t;

static size_t on_body(char *data, size_t size, size_t n, void *arg) {
  reply_t *r = arg;
  size_t len = size * n, room = sizeof r->body - 1 - r->body_len;
  size_t keep = len < room ? len : room;
  memcpy(r->body + r->body_len, data, keep);
  r->body_len += keep;
  r->body[r->body_len] = '\0';
  return len;
}

/* Keeps the Retry-After value, trailing CR/LF removed. */
static size_t on_header(char *line, size_t size, size_t n, void *arg) {
  reply_t *r = arg;
  size_t len = size * n;
  const char *name = "Retry-After:";
  size_t nlen = strlen(name);
  if (len > nlen && strncasecmp(line, name, nlen) == 0) {
    size_t start = nlen;
    while (start < len && line[start] == ' ')
      start++;
    size_t end = len;
    while (end > start && (line[end - 1] == '\r' || line[end - 1] == '\n'))
      end--;
    size_t vlen = end - start < sizeof r->retry_after - 1 ? end - start : sizeof r->retry_after - 1;
    memcpy(r->retry_after, line + start, vlen);
    r->retry_after[vlen] = '\0';
  }
  return len;
}

typedef struct call_s {
  const char *path;         /* appended to the server's URL */
  const char *method;       /* NULL: POST when there is a body, GET otherwise */
  const void *body;         /* NULL: no body */
  size_t body_len;          /* 0 with a body: strlen */
  struct curl_slist *extra; /* request headers */
  long timeout_ms;          /* 0: 20 s */
} call_t;

static void setup_call(CURL *c, const char *base, const call_t *call, reply_t *r, char *url,
                       size_t url_size) {
  snprintf(url, url_size, "%s%s", base, call->path ? call->path : "/v1/batches");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, call->timeout_ms ? call->timeout_ms : 20000L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
  if (call->extra) curl_easy_setopt(c, CURLOPT_HTTPHEADER, call->extra);
  if (call->body) {
    size_t len = call->body_len ? call->body_len : strlen(call->body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, call->body);
  }
  if (call->method) curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, call->method);
}

/* One request on handle c (options reset first; live connections are kept,
   so consecutive calls on one handle reuse the connection). */
static reply_t perform(CURL *c, const http_server_t *s, const call_t *call) {
  reply_t r;
  memset(&r, 0, sizeof r);
  char url[512];
  curl_easy_reset(c);
  setup_call(c, http_server_url(s), call, &r, url, sizeof url);
  uint64_t start = now_ns();
  r.rc = curl_easy_perform(c);
  r.elapsed_ms = ms_since(start);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &r.new_connections);
  return r;
}

/* One request on a fresh handle (a fresh connection). */
static reply_t perform_once(const http_server_t *s, const call_t *call) {
  CURL *c = curl_easy_init();
  CHECK(c != NULL);
  reply_t r = perform(c, s, call);
  curl_easy_cleanup(c);
  return r;
}

static void check_ok(const reply_t *r, long status) {
  CHECKF(r->rc == CURLE_OK, "curl: %s", curl_easy_strerror(r->rc));
  CHECK_EQ_INT(r->status, status);
}

static http_server_t *must_start(void) {
  http_server_t *s = http_server_start();
  CHECK(s != NULL);
  CHECK(http_server_port(s) != 0);
  return s;
}

static http_request_t must_get(http_server_t *s, size_t i) {
  http_request_t req;
  CHECKF(http_server_request(s, i, &req), "request %zu not recorded", i);
  return req;
}

/* ---- cases -------------------------------------------------------------------- */

static void case_url_and_port(void) {
  http_server_t *s = must_start();
  char expect[64];
  snprintf(expect, sizeof expect, "http://127.0.0.1:%u", (unsigned)http_server_port(s));
  CHECK(strcmp(http_server_url(s), expect) == 0);
  CHECK_EQ_INT(http_server_request_count(s), 0);
  http_request_t req;
  CHECK(!http_server_request(s, 0, &req));
  CHECK(req.method == NULL && req.body == NULL);
  http_server_stop(s);
  http_server_stop(NULL);
}

static void case_scripted_statuses(void) {
  http_server_t *s = must_start();
  CHECK(http_server_push(s, &(http_response_t){.status = 200, .body = "ok"}));
  CHECK(http_server_push(
      s,
      &(http_response_t){.status = 503, .headers = {{"Retry-After", "2"}}, .body = "overloaded"}));
  CHECK(http_server_push(s, &(http_response_t){.status = 400, .body = "bad batch"}));
  CHECK_EQ_INT(http_server_pending(s), 3);
  CURL *c = curl_easy_init();
  CHECK(c != NULL);
  call_t post = {.body = "batch"};
  reply_t r = perform(c, s, &post);
  check_ok(&r, 200);
  CHECK(strcmp(r.body, "ok") == 0 && r.retry_after[0] == '\0');
  r = perform(c, s, &post);
  check_ok(&r, 503);
  CHECK(strcmp(r.body, "overloaded") == 0);
  CHECKF(strcmp(r.retry_after, "2") == 0, "Retry-After: '%s'", r.retry_after);
  r = perform(c, s, &post);
  check_ok(&r, 400);
  CHECK(strcmp(r.body, "bad batch") == 0);
  CHECK_EQ_INT(http_server_pending(s), 0);
  r = perform(c, s, &post); /* script empty: the default */
  check_ok(&r, 200);
  CHECK_EQ_INT(r.body_len, 0);
  CHECK_EQ_INT(http_server_request_count(s), 4);
  const int expect[] = {200, 503, 400, 200};
  for (size_t i = 0; i < 4; i++) {
    http_request_t req = must_get(s, i);
    CHECK_EQ_INT(req.status, expect[i]);
    http_request_free(&req);
  }
  curl_easy_cleanup(c);
  http_server_stop(s);
}

static void case_http_date_retry_after(void) {
  http_server_t *s = must_start();
  const char *date = "Wed, 21 Oct 2026 07:28:00 GMT";
  CHECK(http_server_push(s, &(http_response_t){.status = 429, .headers = {{"Retry-After", date}}}));
  reply_t r = perform_once(s, &(call_t){.body = "x"});
  check_ok(&r, 429);
  CHECKF(strcmp(r.retry_after, date) == 0, "Retry-After: '%s'", r.retry_after);
  http_server_stop(s);
}

static const http_header_t *find_exact(const http_request_t *req, const char *name) {
  for (size_t i = 0; i < req->header_count; i++)
    if (strcmp(req->headers[i].name, name) == 0) return &req->headers[i];
  return NULL;
}

static void case_headers_and_body_recorded(void) {
  http_server_t *s = must_start();
  unsigned char body[3000];
  for (size_t i = 0; i < sizeof body; i++)
    body[i] = (unsigned char)(i * 7 + 3); /* includes NUL bytes */
  struct curl_slist *h = NULL;
  h = curl_slist_append(h, "Content-Type: application/x-protobuf");
  h = curl_slist_append(h, "Content-Encoding: zstd");
  h = curl_slist_append(h, "Authorization: Bearer key-123");
  h = curl_slist_append(h, "X-Perf-Batch-Id: " BATCH_ID);
  h = curl_slist_append(h, "Expect:");
  CHECK(h != NULL);
  uint64_t before = now_ns();
  reply_t r = perform_once(s, &(call_t){.body = body, .body_len = sizeof body, .extra = h});
  uint64_t after = now_ns();
  curl_slist_free_all(h);
  check_ok(&r, 200);
  CHECK(http_server_wait_requests(s, 1, 0));
  http_request_t req = must_get(s, 0);
  CHECK(strcmp(req.method, "POST") == 0);
  CHECK(strcmp(req.path, "/v1/batches") == 0);
  CHECK(strcmp(http_request_header(&req, "content-type"), "application/x-protobuf") == 0);
  CHECK(strcmp(http_request_header(&req, "Content-Encoding"), "zstd") == 0);
  CHECK(strcmp(http_request_header(&req, "Authorization"), "Bearer key-123") == 0);
  CHECK(strcmp(http_request_header(&req, "Content-Length"), "3000") == 0);
  CHECK(http_request_header(&req, "Expect") == NULL);
  const http_header_t *id = find_exact(&req, "X-Perf-Batch-Id"); /* name case kept */
  CHECK(id != NULL && strcmp(id->value, BATCH_ID) == 0);
  CHECK(find_exact(&req, "Host") != NULL);
  CHECK_EQ_INT(req.body_len, sizeof body);
  CHECK_EQ_INT(req.body_size, sizeof body);
  CHECK(memcmp(req.body, body, sizeof body) == 0);
  CHECK(req.arrival_ns >= before && req.arrival_ns <= after);
  CHECK(req.connection_id == 1 && req.client_port != 0);
  http_request_free(&req);
  CHECK_EQ_INT(http_server_count_header_value(s, "x-perf-batch-id", BATCH_ID), 1);
  CHECK_EQ_INT(http_server_count_header_value(s, "X-Perf-Batch-Id", "0123"), 0);
  CHECK_EQ_INT(http_server_count_header_value(s, "Authorization", NULL), 1);
  CHECK_EQ_INT(http_server_count_header_value(s, "X-Missing", NULL), 0);
  http_server_stop(s);
}

static void case_get_and_query(void) {
  http_server_t *s = must_start();
  reply_t r = perform_once(s, &(call_t){.path = "/health?verbose=1"});
  check_ok(&r, 200);
  r = perform_once(s, &(call_t){.path = "/v1/batches", .method = "PUT", .body = "p"});
  check_ok(&r, 200);
  http_request_t req = must_get(s, 0);
  CHECK(strcmp(req.method, "GET") == 0 && strcmp(req.path, "/health") == 0);
  CHECK(req.body == NULL && req.body_len == 0 && req.body_size == 0);
  http_request_free(&req);
  req = must_get(s, 1);
  CHECK(strcmp(req.method, "PUT") == 0 && req.body_len == 1 && req.body[0] == 'p');
  http_request_free(&req);
  http_server_stop(s);
}

static void case_default_response(void) {
  http_server_t *s = must_start();
  CHECK(http_server_set_default(
      s,
      &(http_response_t){.status = 204, .headers = {{"X-Default", "yes"}, {"Retry-After", "7"}}}));
  reply_t r = perform_once(s, &(call_t){.body = "x"});
  check_ok(&r, 204);
  CHECK(strcmp(r.retry_after, "7") == 0);
  CHECK(http_server_push(s, &(http_response_t){.status = 500}));
  r = perform_once(s, &(call_t){.body = "x"});
  check_ok(&r, 500);
  r = perform_once(s, &(call_t){.body = "x"});
  check_ok(&r, 204);
  http_server_stop(s);
}

static void case_path_filter(void) {
  http_server_t *s = must_start();
  CHECK(http_server_push(s, &(http_response_t){.status = 503, .path = "/v1/batches"}));
  CHECK(http_server_push(s, &(http_response_t){.status = 404, .path = "/other"}));
  reply_t r = perform_once(s, &(call_t){.path = "/health"});
  check_ok(&r, 200); /* nothing scripted for /health */
  CHECK_EQ_INT(http_server_pending(s), 2);
  r = perform_once(s, &(call_t){.path = "/other"});
  check_ok(&r, 404); /* not the head of the script, but the first for its path */
  r = perform_once(s, &(call_t){.body = "x"});
  check_ok(&r, 503);
  CHECK_EQ_INT(http_server_pending(s), 0);
  http_server_stop(s);
}

static void case_delay_honoured(void) {
  http_server_t *s = must_start();
  CHECK(http_server_push(s, &(http_response_t){.status = 202, .delay_ms = 300}));
  reply_t r = perform_once(s, &(call_t){.body = "slow"});
  uint64_t end = now_ns();
  check_ok(&r, 202);
  CHECKF(r.elapsed_ms >= 300, "took %llu ms", (unsigned long long)r.elapsed_ms);
  CHECKF(r.elapsed_ms < 10000, "took %llu ms", (unsigned long long)r.elapsed_ms);
  http_request_t req = must_get(s, 0);
  CHECK(end - req.arrival_ns >= 300u * 1000000u);
  http_request_free(&req);
  r = perform_once(s, &(call_t){.body = "fast"});
  check_ok(&r, 200);
  CHECKF(r.elapsed_ms < 300, "took %llu ms", (unsigned long long)r.elapsed_ms);
  http_server_stop(s);
}

static void case_close_connection(void) {
  http_server_t *s = must_start();
  CHECK(http_server_push(s, &(http_response_t){.close_connection = true}));
  reply_t r = perform_once(s, &(call_t){.body = "dropped"});
  CHECKF(r.rc == CURLE_GOT_NOTHING || r.rc == CURLE_RECV_ERROR, "curl: %d %s", (int)r.rc,
         curl_easy_strerror(r.rc));
  CHECK_EQ_INT(r.status, 0);
  CHECK_EQ_INT(http_server_request_count(s), 1);
  http_request_t req = must_get(s, 0);
  CHECK(req.status == 0 && strcmp((char *)req.body, "dropped") == 0);
  http_request_free(&req);
  r = perform_once(s, &(call_t){.body = "again"});
  check_ok(&r, 200);
  http_server_stop(s);
}

static void case_delayed_close(void) {
  http_server_t *s = must_start();
  CHECK(http_server_push(s, &(http_response_t){.close_connection = true, .delay_ms = 200}));
  reply_t r = perform_once(s, &(call_t){.body = "x"});
  CHECK(r.rc == CURLE_GOT_NOTHING || r.rc == CURLE_RECV_ERROR);
  CHECKF(r.elapsed_ms >= 200, "took %llu ms", (unsigned long long)r.elapsed_ms);
  http_server_stop(s);
}

/* What uploader tests must know: libcurl resends a request, once and
   silently, when a reused keep-alive connection is dropped before any byte of
   the answer; the resend takes the next scripted response. */
static void case_close_on_reused_connection(void) {
  http_server_t *s = must_start();
  CHECK(http_server_push(s, &(http_response_t){.status = 200}));
  CHECK(http_server_push(s, &(http_response_t){.close_connection = true}));
  CHECK(http_server_push(s, &(http_response_t){.status = 503}));
  CURL *c = curl_easy_init();
  CHECK(c != NULL);
  check_ok((reply_t[]){perform(c, s, &(call_t){.body = "first"})}, 200);
  reply_t r = perform(c, s, &(call_t){.body = "second"});
  check_ok(&r, 503); /* not an error: curl retried on a new connection */
  CHECK_EQ_INT(r.new_connections, 1);
  CHECK_EQ_INT(http_server_request_count(s), 3);
  http_request_t dropped = must_get(s, 1), resent = must_get(s, 2);
  CHECK(dropped.status == 0 && resent.status == 503);
  CHECK(strcmp((char *)dropped.body, "second") == 0 && strcmp((char *)resent.body, "second") == 0);
  CHECK(resent.connection_id != dropped.connection_id);
  http_request_free(&dropped);
  http_request_free(&resent);
  curl_easy_cleanup(c);
  http_server_stop(s);
}

static void case_keep_alive_reuse(void) {
  http_server_t *s = must_start();
  CURL *c = curl_easy_init();
  CHECK(c != NULL);
  reply_t r1 = perform(c, s, &(call_t){.body = "one"});
  reply_t r2 = perform(c, s, &(call_t){.body = "two"});
  check_ok(&r1, 200);
  check_ok(&r2, 200);
  CHECK_EQ_INT(r1.new_connections, 1);
  CHECK_EQ_INT(r2.new_connections, 0); /* curl says it reused the connection */
  reply_t r3 = perform_once(s, &(call_t){.body = "three"});
  check_ok(&r3, 200);
  http_request_t a = must_get(s, 0), b = must_get(s, 1), other = must_get(s, 2);
  CHECK(a.connection_id != 0 && a.connection_id == b.connection_id);
  CHECK(a.client_port == b.client_port);
  CHECK(other.connection_id != a.connection_id && other.client_port != a.client_port);
  http_request_free(&a);
  http_request_free(&b);
  http_request_free(&other);
  curl_easy_cleanup(c);
  http_server_stop(s);
}

static void case_restart_same_port(void) {
  http_server_t *s = must_start();
  uint16_t port = http_server_port(s);
  CURL *c = curl_easy_init(); /* keeps its connection to the first server */
  CHECK(c != NULL);
  check_ok((reply_t[]){perform(c, s, &(call_t){.body = "up"})}, 200);
  char url[64];
  snprintf(url, sizeof url, "%s", http_server_url(s));
  http_server_stop(s); /* collector down */
  CURL *probe = curl_easy_init();
  CHECK(probe != NULL);
  curl_easy_setopt(probe, CURLOPT_URL, url);
  curl_easy_setopt(probe, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(probe, CURLOPT_TIMEOUT_MS, 5000L);
  CURLcode rc = curl_easy_perform(probe);
  CHECKF(rc == CURLE_COULDNT_CONNECT, "curl: %s", curl_easy_strerror(rc));
  curl_easy_cleanup(probe);
  s = http_server_start_on_port(port); /* collector up again */
  CHECK(s != NULL);
  CHECK_EQ_INT(http_server_port(s), port);
  CHECK(strcmp(http_server_url(s), url) == 0);
  CHECK(http_server_push(s, &(http_response_t){.status = 201}));
  reply_t r = perform(c, s, &(call_t){.body = "back"}); /* the old connection is dead */
  check_ok(&r, 201);
  CHECK_EQ_INT(r.new_connections, 1);
  CHECK_EQ_INT(http_server_request_count(s), 1); /* a fresh server: fresh records */
  http_request_t req = must_get(s, 0);
  CHECK(strcmp((char *)req.body, "back") == 0 && req.connection_id == 1);
  http_request_free(&req);
  curl_easy_cleanup(c);
  http_server_stop(s);
}

static void case_wait_requests_timeout(void) {
  http_server_t *s = must_start();
  uint64_t start = now_ns();
  CHECK(!http_server_wait_requests(s, 1, 200));
  uint64_t waited = ms_since(start);
  CHECKF(waited >= 200 && waited < 5000, "waited %llu ms", (unsigned long long)waited);
  CHECK(http_server_wait_requests(s, 0, 0));
  check_ok((reply_t[]){perform_once(s, &(call_t){.body = "x"})}, 200);
  start = now_ns();
  CHECK(http_server_wait_requests(s, 1, 10000));
  CHECK(ms_since(start) < 1000); /* already there: no wait */
  CHECK(!http_server_wait_requests(s, 2, 50));
  http_server_stop(s);
}

typedef struct client_s {
  http_server_t *s;
  call_t call;
  int repeat;
  reply_t last;
  int ok;
  pthread_t thread;
} client_t;

static void *client_main(void *arg) {
  client_t *cl = arg;
  CURL *c = curl_easy_init();
  if (!c) return NULL;
  for (int i = 0; i < cl->repeat; i++) {
    cl->last = perform(c, cl->s, &cl->call);
    cl->ok += cl->last.rc == CURLE_OK && cl->last.status == 200;
  }
  curl_easy_cleanup(c);
  return NULL;
}

static void client_start(client_t *cl) {
  CHECK(pthread_create(&cl->thread, NULL, client_main, cl) == 0);
}

static void case_wait_wakes_on_arrival(void) {
  http_server_t *s = must_start();
  CHECK(http_server_push(s, &(http_response_t){.delay_ms = 1000}));
  client_t cl = {.s = s, .call = {.body = "x"}, .repeat = 1};
  client_start(&cl);
  uint64_t start = now_ns();
  CHECK(http_server_wait_requests(s, 1, 20000)); /* recorded before the delay */
  CHECKF(ms_since(start) < 1000, "waited %llu ms", (unsigned long long)ms_since(start));
  pthread_join(cl.thread, NULL);
  check_ok(&cl.last, 200);
  http_server_stop(s);
}

static void case_stop_cuts_delay(void) {
  http_server_t *s = must_start();
  CHECK(http_server_push(s, &(http_response_t){.delay_ms = 30000}));
  client_t cl = {.s = s, .call = {.body = "x"}, .repeat = 1};
  client_start(&cl);
  CHECK(http_server_wait_requests(s, 1, 20000));
  uint64_t start = now_ns();
  http_server_stop(s);
  uint64_t stop_ms = ms_since(start);
  pthread_join(cl.thread, NULL);
  CHECKF(stop_ms < 5000, "stop took %llu ms", (unsigned long long)stop_ms);
  CHECKF(cl.last.rc != CURLE_OK, "curl: %s", curl_easy_strerror(cl.last.rc));
  CHECKF(cl.last.elapsed_ms < 10000, "took %llu ms", (unsigned long long)cl.last.elapsed_ms);
}

static void case_body_cap(void) {
  http_server_t *s = must_start();
  size_t len = HTTP_SERVER_MAX_BODY + 4096;
  unsigned char *big = malloc(len);
  CHECK(big != NULL);
  for (size_t i = 0; i < len; i++)
    big[i] = (unsigned char)(i % 251);
  reply_t r = perform_once(s, &(call_t){.body = big, .body_len = len}); /* with 100-continue */
  check_ok(&r, 200);
  http_request_t req = must_get(s, 0);
  CHECK_EQ_INT(req.body_len, HTTP_SERVER_MAX_BODY);
  CHECK_EQ_INT(req.body_size, len);
  CHECK(memcmp(req.body, big, req.body_len) == 0);
  http_request_free(&req);
  free(big);
  http_server_stop(s);
}

static void case_concurrent_clients(void) {
  http_server_t *s = must_start();
  enum { CLIENTS = 4, EACH = 25 };
  client_t cl[CLIENTS];
  char ids[CLIENTS][40];
  struct curl_slist *h[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    snprintf(ids[i], sizeof ids[i], "X-Client: %d", i);
    h[i] = curl_slist_append(NULL, ids[i]);
    cl[i] = (client_t){.s = s, .call = {.body = "x", .extra = h[i]}, .repeat = EACH};
    client_start(&cl[i]);
  }
  for (int i = 0; i < CLIENTS; i++) {
    pthread_join(cl[i].thread, NULL);
    curl_slist_free_all(h[i]);
    CHECK_EQ_INT(cl[i].ok, EACH);
  }
  CHECK_EQ_INT(http_server_request_count(s), CLIENTS * EACH);
  for (int i = 0; i < CLIENTS; i++) {
    char v[8];
    snprintf(v, sizeof v, "%d", i);
    CHECK_EQ_INT(http_server_count_header_value(s, "X-Client", v), EACH);
  }
  /* Each client kept one connection: one connection id per X-Client value. */
  uint64_t conn[CLIENTS] = {0};
  for (size_t i = 0; i < CLIENTS * EACH; i++) {
    http_request_t req = must_get(s, i);
    int who = atoi(http_request_header(&req, "X-Client"));
    CHECK(who >= 0 && who < CLIENTS);
    if (!conn[who]) conn[who] = req.connection_id;
    CHECK_EQ_INT(req.connection_id, conn[who]);
    http_request_free(&req);
  }
  http_server_stop(s);
}

static void case_record_bound(void) {
  http_server_t *s = must_start();
  CURL *c = curl_easy_init();
  CHECK(c != NULL);
  size_t total = HTTP_SERVER_MAX_REQUESTS + 5;
  for (size_t i = 0; i < total; i++) {
    char body[32];
    snprintf(body, sizeof body, "%zu", i);
    reply_t r = perform(c, s, &(call_t){.body = body});
    CHECKF(r.rc == CURLE_OK && r.status == 200, "request %zu: %s %ld", i, curl_easy_strerror(r.rc),
           r.status);
  }
  CHECK_EQ_INT(http_server_request_count(s), total); /* all counted */
  http_request_t last = must_get(s, HTTP_SERVER_MAX_REQUESTS - 1), none;
  CHECK(atoi((char *)last.body) == HTTP_SERVER_MAX_REQUESTS - 1); /* the first ones are kept */
  http_request_free(&last);
  CHECK(!http_server_request(s, HTTP_SERVER_MAX_REQUESTS, &none));
  CHECK_EQ_INT(http_server_count_header_value(s, "Content-Type", NULL), HTTP_SERVER_MAX_REQUESTS);
  curl_easy_cleanup(c);
  http_server_stop(s);
}

static void case_misuse_rejected(void) {
  http_server_t *s = must_start();
  CHECK(!http_server_push(s, &(http_response_t){.status = 42}));
  CHECK(!http_server_push(s, NULL));
  CHECK(!http_server_push(NULL, &(http_response_t){.status = 200}));
  CHECK(!http_server_set_default(s, &(http_response_t){.status = 1000}));
  CHECK(!http_server_push(s, &(http_response_t){.headers = {{"Bad\nName", "v"}}}));
  CHECK(http_server_start_on_port(0) == NULL);
  CHECK_EQ_INT(http_server_pending(s), 0);
  /* Still the initial default after the rejected set_default. */
  check_ok((reply_t[]){perform_once(s, &(call_t){.body = "x"})}, 200);
  http_server_stop(s);
}

static void case_port_in_use(void) {
  http_server_t *s = must_start();
  http_server_t *twin = http_server_start_on_port(http_server_port(s));
  CHECK(twin == NULL); /* the first server has no SO_REUSEPORT: no sharing */
  http_server_stop(s);
}

/* ------------------------------------------------------------------------ */

static const test_case_t g_cases[] = {
    TEST_CASE(url_and_port),
    TEST_CASE(scripted_statuses),
    TEST_CASE(http_date_retry_after),
    TEST_CASE(headers_and_body_recorded),
    TEST_CASE(get_and_query),
    TEST_CASE(default_response),
    TEST_CASE(path_filter),
    TEST_CASE(delay_honoured),
    TEST_CASE(close_connection),
    TEST_CASE(delayed_close),
    TEST_CASE(close_on_reused_connection),
    TEST_CASE(keep_alive_reuse),
    TEST_CASE(restart_same_port),
    TEST_CASE(wait_requests_timeout),
    TEST_CASE(wait_wakes_on_arrival),
    TEST_CASE(stop_cuts_delay),
    TEST_CASE(body_cap),
    TEST_CASE(concurrent_clients),
    TEST_CASE(record_bound),
    TEST_CASE(misuse_rejected),
    TEST_CASE(port_in_use),
};

int main(int argc, char **argv) {
  CHECK(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK);
  int rc = test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
  curl_global_cleanup();
  return rc;
}
