/*
 * server.c - the collector's MHD daemon (internal polling thread + thread
 * pool) and its request handling. Each request is checked in this order,
 * from its headers alone, before any byte of its body is read:
 * route (404/405), Authorization (401), Content-Type and Content-Encoding
 * (415), X-Perf-Batch-Id (400), Content-Length against --max-body-bytes
 * (413), the store's database still at its path (503 + Retry-After,
 * db_identity.h), the key's token bucket (429 + Retry-After). A refusal's
 * body is read and dropped (up to the route's limit) before the answer is
 * sent, so that the answer reaches a client still sending. An accepted
 * body is buffered up to --max-body-bytes (413 once more arrives) and
 * handed to ingest.c. Slow clients hit MHD's connection timeout; a connection's
 * header memory is bounded by MHD_OPTION_CONNECTION_MEMORY_LIMIT.
 *
 * A whole batch is stored on the ingest pool's threads, and the API, the
 * exports and /metrics read the store on the read pool's threads (two
 * job_pool.h pools, so that a flood of one kind never holds the other's
 * threads or queue), the request's connection suspended meanwhile: MHD's
 * workers never wait for the store and GET /healthz is answered whatever
 * the store is doing (health.h).
 *
 * Threads: MHD's workers call on_request and on_completed; a request's
 * state (request_t) belongs to the connection's worker, and to a pool
 * thread while its batch is stored or its read runs (the connection is
 * suspended then).
 */
#include "collector/http/server.h"

#include <limits.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "collector/alerts/alert_api.h"
#include "collector/alerts/alert_engine.h"
#include "collector/api/routes.h"
#include "collector/base/log.h"
#include "collector/http/conn_guard.h"
#include "collector/http/dashboard.h"
#include "collector/http/health.h"
#include "collector/http/job_pool.h"
#include "collector/http/ratelimit.h"
#include "collector/http/read_request.h"
#include "collector/http/request_checks.h"
#include "collector/ingest/ingest.h"
#include "collector/model/metrics.h"
#include "collector/symbols/symbols_lookup.h"
#include "collector/symbols/symbols_upload.h"

#define CONNECTION_MEMORY_LIMIT (64u * 1024)
#define STORE_RETRY_AFTER "10"        /* seconds, on a 503 of the store */
#define LOST_WHY_MAX (PATH_MAX + 512) /* the store's reason, a path in it */
#define BATCH_ID_HEX (2 * STORE_BATCH_ID_BYTES)

struct server_s {
  const collector_options_t *opts;
  const apikeys_t *keys;
  ingest_target_t ingest;
  ratelimit_t *limits;
  conn_guard_t *guard;     /* the absolute deadline of each request */
  job_pool_t *ingest_pool; /* stores the batches ("perf-ingest") */
  job_pool_t *read_pool;   /* answers the reads of the store ("perf-read") */
  alert_engine_t *alerts;  /* evaluates the alert rules after batches ("perf-alerts") */
  struct MHD_Daemon *daemon;
};

typedef struct request_s {
  bool started;               /* on_request has seen the headers */
  const char *target_problem; /* the raw URL's (request_checks.h): 400 */
  bool responded;             /* answered from the headers; the body is ignored */
  struct MHD_Response *held;  /* that answer, queued once the body has been read */
  unsigned held_status;
  size_t discard_max; /* body bytes read and dropped for a held answer, at most */
  bool over_limit;    /* body beyond --max-body-bytes: discarded, then 413 */
  size_t discarded;   /* bytes dropped after over_limit or for a held answer */
  uint8_t batch_id[STORE_BATCH_ID_BYTES];
  uint8_t *body;
  size_t len, cap;
  symbols_upload_t *upload; /* POST /v1/symbols/<build-id>: the body goes there */
  /* The batch on the ingest pool, or the read on the read pool: the job,
     and what it found. */
  job_t job;
  server_t *server;
  struct MHD_Connection *conn;
  bool submitted;       /* the pool holds it until on_completed releases it */
  read_request_t *read; /* a read of the store: on the read pool */
  bool read_done;       /* its answer is set; the connection was resumed */
  bool ingested;        /* status and res are set; the connection was resumed */
  unsigned status;
  ingest_result_t res;
  double ingest_s; /* how long the store took */
  const char *key; /* the bearer token: the connection's header, valid while it lives */
  bool alert_post; /* POST /api/v1/alerts/rules: the body is a rule */
} request_t;

/* The request whose answer waits for its body on this MHD worker: set
   around on_headers, where respond_bytes holds the answer instead of
   queuing it (see "answers held until the body is read"). */
static _Thread_local request_t *t_holding;

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- responses ------------------------------------------------------------ */

/* len bytes of data with its type and one more header (name NULL: none). */
static enum MHD_Result respond_bytes(struct MHD_Connection *conn, unsigned status, const void *data,
                                     size_t len, const char *content_type, const char *name,
                                     const char *value) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
  if (!resp) return MHD_NO;
  enum MHD_Result ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (ok == MHD_YES && name) ok = MHD_add_response_header(resp, name, value);
  if (ok == MHD_YES && t_holding && !t_holding->held) {
    t_holding->held = resp;
    t_holding->held_status = status;
    return MHD_YES;
  }
  if (ok == MHD_YES) ok = MHD_queue_response(conn, status, resp);
  MHD_destroy_response(resp);
  return ok;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *text,
                               const char *content_type, const char *retry_after) {
  return respond_bytes(conn, status, text, strlen(text), content_type,
                       retry_after ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, retry_after);
}

static enum MHD_Result respond_text(struct MHD_Connection *conn, unsigned status,
                                    const char *text) {
  char line[256];
  snprintf(line, sizeof line, "%s\n", text);
  return respond(conn, status, line, "text/plain; charset=utf-8", NULL);
}

/* text and a newline, however long (a path), with Retry-After when given. */
static enum MHD_Result respond_line(struct MHD_Connection *conn, unsigned status, const char *text,
                                    const char *retry_after) {
  size_t n = strlen(text);
  char *line = malloc(n + 2);
  if (!line) return MHD_NO;
  memcpy(line, text, n);
  memcpy(line + n, "\n", 2);
  enum MHD_Result rc = respond(conn, status, line, "text/plain; charset=utf-8", retry_after);
  free(line);
  return rc;
}

/* A refused batch; a 503 (the store failed or was lost, out of memory)
   says when to come back: the SDK keeps the batch and waits that long. */
static enum MHD_Result reject(request_t *rq, struct MHD_Connection *conn, unsigned status,
                              reject_reason_t why, const char *text) {
  metrics_batch_rejected(why);
  rq->responded = true;
  if (status == 503) return respond_line(conn, status, text, STORE_RETRY_AFTER);
  return respond_text(conn, status, text);
}

/* A batch over its key's bound on new values (key_bounds.h): 429 naming
   the bound, with the seconds until the key's window frees. */
static enum MHD_Result reject_retry(request_t *rq, struct MHD_Connection *conn,
                                    const ingest_result_t *res) {
  char value[16];
  snprintf(value, sizeof value, "%u", res->retry_after_s);
  metrics_batch_rejected(res->reason);
  rq->responded = true;
  return respond_line(conn, 429, res->message, value);
}

/* GET /healthz: the store's state now (health.h), 200 "ok" or 503
   naming what is wrong. Answered on this worker within the store probe's
   bound, whatever the ingest threads wait for. */
static enum MHD_Result serve_health(server_t *s, struct MHD_Connection *conn) {
  char text[LOST_WHY_MAX + 64];
  job_load_t load;
  job_pool_load(s->ingest_pool, &load);
  unsigned status = health_answer(s->ingest.ops, s->ingest.store, &load, text, sizeof text);
  return respond_line(conn, status, text, NULL);
}

static unsigned access_status(const server_t *s, struct MHD_Connection *conn, unsigned scope,
                              const char **why);

static enum MHD_Result submit_read(server_t *s, struct MHD_Connection *conn, request_t *rq,
                                   const api_route_t *route, const char *item);

/* GET /metrics: the counters and the store's figures, read on the read
   pool (the store's figures wait for its lock). */
static enum MHD_Result serve_metrics(server_t *s, struct MHD_Connection *conn, request_t *rq) {
  const char *why;
  unsigned denied = s->opts->open_metrics ? 0 : access_status(s, conn, SCOPE_READ, &why);
  if (denied) return respond_text(conn, denied, why);
  return submit_read(s, conn, rq, NULL, NULL);
}

/* ---- header checks -------------------------------------------------------- */

static const char *header(struct MHD_Connection *conn, const char *name) {
  return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

/* The bearer token, "" when there is none (open mode), NULL when the
   header is present but not a bearer token. */
static const char *bearer_token(struct MHD_Connection *conn) {
  const char *auth = header(conn, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!auth) return "";
  if (strncasecmp(auth, "Bearer ", 7) != 0) return NULL;
  return auth + 7;
}

/* May the request's key do `scope`? 0 when it may; 401 (no key, not a
   bearer token, an unknown key) or 403 (a known key without that scope)
   with *why the reason. Open mode: any key, or none, may do anything. */
static unsigned access_status(const server_t *s, struct MHD_Connection *conn, unsigned scope,
                              const char **why) {
  static _Thread_local char text[96];
  const char *token = bearer_token(conn);
  *why = "missing or unknown API key";
  if (!s->keys) return token ? 0 : 401;
  unsigned scopes = token && *token ? apikeys_scopes(s->keys, token) : 0;
  if (!scopes) return 401;
  if (scopes & scope) return 0;
  snprintf(text, sizeof text, "this API key lacks the %s scope", apikeys_scope_name(scope));
  *why = text;
  return 403;
}

/* Open mode only (no keys file: nothing else tells our own pages and
   tools from another site's): the Host must name this collector (DNS
   rebinding) and the Origin must be ours (a cross-site page). NULL when
   the request may go on, else the reason for a 403. */
static const char *origin_problem(const server_t *s, struct MHD_Connection *conn) {
  if (s->keys) return NULL;
  if (!request_host_ok(header(conn, MHD_HTTP_HEADER_HOST), &s->opts->listen))
    return "the Host header does not name this collector (open mode)";
  return request_origin_problem(header(conn, "Origin"), header(conn, "Sec-Fetch-Site"),
                                &s->opts->listen);
}

/* Content-Type application/x-protobuf (parameters allowed), encoding zstd. */
static bool media_supported(struct MHD_Connection *conn) {
  static const char TYPE[] = "application/x-protobuf";
  const char *type = header(conn, MHD_HTTP_HEADER_CONTENT_TYPE);
  const char *enc = header(conn, MHD_HTTP_HEADER_CONTENT_ENCODING);
  if (!type || !enc || strcasecmp(enc, "zstd") != 0) return false;
  size_t n = strlen(TYPE);
  return strncasecmp(type, TYPE, n) == 0 && (type[n] == '\0' || type[n] == ';' || type[n] == ' ');
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool parse_batch_id(const char *text, uint8_t id[STORE_BATCH_ID_BYTES]) {
  if (!text || strlen(text) != BATCH_ID_HEX) return false;
  for (size_t i = 0; i < STORE_BATCH_ID_BYTES; i++) {
    int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    id[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}

static bool declared_too_large(const server_t *s, struct MHD_Connection *conn) {
  const char *cl = header(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (!cl) return false; /* chunked: checked as the bytes arrive */
  char *end;
  unsigned long long n = strtoull(cl, &end, 10);
  return end == cl || n > s->opts->max_body_bytes;
}

/* Every check the headers allow; MHD_YES with nothing queued lets the body in. */
static enum MHD_Result check_batch_headers(server_t *s, struct MHD_Connection *conn,
                                           request_t *rq) {
  const char *token = bearer_token(conn), *why;
  unsigned denied = access_status(s, conn, SCOPE_INGEST, &why);
  if (denied)
    return reject(rq, conn, denied, denied == 401 ? REJECT_UNAUTHORIZED : REJECT_FORBIDDEN, why);
  if (!media_supported(conn))
    return reject(rq, conn, 415, REJECT_UNSUPPORTED_MEDIA,
                  "expected Content-Type application/x-protobuf and Content-Encoding zstd");
  if (!parse_batch_id(header(conn, "X-Perf-Batch-Id"), rq->batch_id))
    return reject(rq, conn, 400, REJECT_BAD_BATCH_ID,
                  "X-Perf-Batch-Id must be 32 hexadecimal digits");
  if (declared_too_large(s, conn))
    return reject(rq, conn, 413, REJECT_BODY_TOO_LARGE, "body over the limit");
  char lost[LOST_WHY_MAX];
  if (s->ingest.ops->check(s->ingest.store, lost, sizeof lost) != STORE_OK)
    return reject(rq, conn, 503, REJECT_DB_LOST, lost);
  unsigned retry_after = 1;
  if (!ratelimit_take(s->limits, token, monotonic_s(), &retry_after)) {
    char value[16];
    snprintf(value, sizeof value, "%u", retry_after);
    metrics_batch_rejected(REJECT_RATE_LIMITED);
    rq->responded = true;
    return respond(conn, 429, "rate limit exceeded for this API key\n", "text/plain; charset=utf-8",
                   value);
  }
  return MHD_YES;
}

/* ---- the body ------------------------------------------------------------- */

/* Buffer a chunk, never past --max-body-bytes; MHD_NO (connection closed)
   once a client keeps sending far beyond it. */
static enum MHD_Result take_body(const server_t *s, request_t *rq, const char *data, size_t n) {
  size_t max = s->opts->max_body_bytes;
  if (!rq->over_limit && n > max - rq->len) {
    rq->over_limit = true;
    free(rq->body);
    rq->body = NULL;
    rq->len = rq->cap = 0;
  }
  if (rq->over_limit) {
    rq->discarded += n;
    return rq->discarded > max ? MHD_NO : MHD_YES;
  }
  if (rq->len + n > rq->cap) {
    size_t cap = rq->cap ? rq->cap : 16384;
    while (cap < rq->len + n)
      cap *= 2;
    if (cap > max) cap = max;
    uint8_t *grown = realloc(rq->body, cap);
    if (!grown) return MHD_NO;
    rq->body = grown;
    rq->cap = cap;
  }
  memcpy(rq->body + rq->len, data, n);
  rq->len += n;
  return MHD_YES;
}

static enum MHD_Result answer_batch(server_t *s, struct MHD_Connection *conn, request_t *rq);
static void store_batch(job_t *job, bool cancelled);

/* Why a pool refused a request: it is stopping, or every thread is busy
   and the queue full. */
static void busy_text(char *text, size_t len, const job_load_t *load, const char *what) {
  if (load->stopping)
    snprintf(text, len, "collector stopping");
  else
    snprintf(text, len, "collector busy: %zu %s in the store, %zu waiting", load->running, what,
             load->waiting);
}

/* The body is whole: hand it to the ingest pool with the connection
   suspended; the worker answers once a pool thread has stored it and
   resumed the connection (answer_batch). */
static enum MHD_Result finish_batch(server_t *s, struct MHD_Connection *conn, request_t *rq) {
  if (rq->ingested) return answer_batch(s, conn, rq);
  if (rq->over_limit) return reject(rq, conn, 413, REJECT_BODY_TOO_LARGE, "body over the limit");
  if (rq->len == 0) return reject(rq, conn, 400, REJECT_BAD_PAYLOAD, "empty body");
  rq->server = s;
  rq->conn = conn;
  rq->key = bearer_token(conn);
  rq->job.run = store_batch;
  MHD_suspend_connection(conn);
  rq->submitted = job_pool_submit(s->ingest_pool, &rq->job);
  if (rq->submitted) return MHD_YES;
  /* Every ingest thread busy and the queue full, or stopping: 503 at once. */
  job_load_t load;
  job_pool_load(s->ingest_pool, &load);
  memset(&rq->res, 0, sizeof rq->res);
  rq->status = rq->res.status = 503;
  rq->res.reason = REJECT_STORE_ERROR;
  busy_text(rq->res.message, sizeof rq->res.message, &load, "batches");
  rq->ingested = true;
  MHD_resume_connection(conn);
  return MHD_YES;
}

/* On an ingest pool thread: decode and store the batch (cancelled: the
   server is stopping, 503), then give the connection back to its worker. */
static void store_batch(job_t *job, bool cancelled) {
  request_t *rq = (request_t *)((char *)job - offsetof(request_t, job));
  double t0 = monotonic_s();
  if (cancelled) {
    memset(&rq->res, 0, sizeof rq->res);
    rq->status = rq->res.status = 503;
    rq->res.reason = REJECT_STORE_ERROR;
    snprintf(rq->res.message, sizeof rq->res.message, "collector stopping");
  } else {
    rq->status =
        ingest_batch(&rq->server->ingest, rq->key, rq->body, rq->len, rq->batch_id, &rq->res);
  }
  rq->ingest_s = monotonic_s() - t0;
  free(rq->body);
  rq->body = NULL;
  rq->ingested = true;
  MHD_resume_connection(rq->conn);
}

static enum MHD_Result answer_batch(server_t *s, struct MHD_Connection *conn, request_t *rq) {
  ingest_result_t *res = &rq->res;
  if (rq->status == 429) return reject_retry(rq, conn, res);
  if (rq->status == 503 && res->reason == REJECT_DB_LOST) {
    char why[LOST_WHY_MAX];
    s->ingest.ops->check(s->ingest.store, why, sizeof why);
    return reject(rq, conn, 503, REJECT_DB_LOST, why);
  }
  if (rq->status != 200) return reject(rq, conn, rq->status, res->reason, res->message);
  if (res->duplicate)
    metrics_batch_duplicate();
  else
    metrics_batch_accepted(res->events, res->samples, rq->ingest_s);
  rq->responded = true;
  return respond_text(conn, 200, res->message);
}

/* ---- the JSON API (read-only) --------------------------------------------- */

/* The API needs the read scope; its refusals are JSON. */
static bool api_denied(const server_t *s, struct MHD_Connection *conn) {
  const char *why;
  return access_status(s, conn, SCOPE_READ, &why) != 0;
}

static enum MHD_Result api_refusal(const server_t *s, struct MHD_Connection *conn) {
  const char *why;
  unsigned status = access_status(s, conn, SCOPE_READ, &why);
  char *body = query_error_json(why);
  if (!body) return MHD_NO;
  enum MHD_Result rc = respond(conn, status, body, "application/json", NULL);
  free(body);
  return rc;
}

/* GET /api/v1/...: the same API keys as ingest (any, or none, in open
   mode); no rate limit. The route's handler answers from the query string
   or the path's item, on the read pool; errors are JSON. */
static enum MHD_Result serve_api(server_t *s, struct MHD_Connection *conn, request_t *rq,
                                 const api_route_t *r, const char *item) {
  if (api_denied(s, conn)) return api_refusal(s, conn);
  return submit_read(s, conn, rq, r, item);
}

static void run_read(job_t *job, bool cancelled);

static enum MHD_Result respond_no_memory(struct MHD_Connection *conn) {
  return respond(conn, 503, "{\"error\":\"out of memory\"}\n", "application/json", NULL);
}

/* A read of the store (route NULL: /metrics) handed to the read pool with
   the connection suspended; the worker answers once a read thread has run
   it and resumed the connection (answer_read). A query argument that is
   not text is refused here; every read thread busy and the queue full,
   or stopping: 503 "collector busy" at once. */
static enum MHD_Result submit_read(server_t *s, struct MHD_Connection *conn, request_t *rq,
                                   const api_route_t *route, const char *item) {
  rq->read = read_request_new(conn, route, item);
  if (!rq->read) return respond_no_memory(conn);
  char *body;
  unsigned status = read_request_check_text(rq->read, &body);
  if (status) {
    if (!body) return respond_no_memory(conn);
    enum MHD_Result rc = respond(conn, status, body, "application/json", NULL);
    free(body);
    return rc;
  }
  rq->server = s;
  rq->conn = conn;
  rq->job.run = run_read;
  MHD_suspend_connection(conn);
  rq->submitted = job_pool_submit(s->read_pool, &rq->job);
  if (rq->submitted) return MHD_YES;
  job_load_t load;
  job_pool_load(s->read_pool, &load);
  char text[128];
  busy_text(text, sizeof text, &load, "reads");
  read_request_refuse(rq->read, text);
  rq->read_done = true;
  MHD_resume_connection(conn);
  return MHD_YES;
}

/* On a read pool thread: the read (cancelled: the server is stopping,
   503), then the connection back to its worker. */
static void run_read(job_t *job, bool cancelled) {
  request_t *rq = (request_t *)((char *)job - offsetof(request_t, job));
  read_request_run(rq->read, rq->server->ingest.ops, rq->server->ingest.store, cancelled);
  rq->read_done = true;
  MHD_resume_connection(rq->conn);
}

/* The read's answer, on the connection's worker; a 503 says when to come
   back. */
static enum MHD_Result answer_read(struct MHD_Connection *conn, request_t *rq) {
  const read_request_t *r = rq->read;
  rq->read_done = false;
  if (!r->body) return respond_no_memory(conn);
  const char *name = r->disposition     ? MHD_HTTP_HEADER_CONTENT_DISPOSITION
                     : r->status == 503 ? MHD_HTTP_HEADER_RETRY_AFTER
                                        : NULL;
  const char *value = r->disposition ? r->disposition : STORE_RETRY_AFTER;
  return respond_bytes(conn, r->status, r->body, r->len, r->type, name, value);
}

/* ---- the alert rules (admin) ------------------------------------------------ */

/* A JSON answer of an alert route; body NULL: none (204), or out of memory. */
static enum MHD_Result respond_json(struct MHD_Connection *conn, unsigned status, char *body) {
  if (!body && status != 204) return respond_no_memory(conn);
  enum MHD_Result rc = respond(conn, status, body ? body : "", "application/json", NULL);
  free(body);
  return rc;
}

static bool json_content(struct MHD_Connection *conn) {
  const char *type = header(conn, MHD_HTTP_HEADER_CONTENT_TYPE);
  size_t n = strlen("application/json");
  return type && strncasecmp(type, "application/json", n) == 0 &&
         (type[n] == '\0' || type[n] == ';' || type[n] == ' ');
}

/* /api/v1/alerts/rules[/<id>] for an admin key, on this worker (one row
   of the store): GET lists, DELETE /<id> deletes, POST reads its body
   first (finish_alert_post). */
static enum MHD_Result serve_alert_rules(server_t *s, struct MHD_Connection *conn, request_t *rq,
                                         const char *method, const char *rest) {
  const char *why;
  char *body = NULL;
  unsigned status = access_status(s, conn, SCOPE_ADMIN, &why);
  bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  if (status) {
    body = query_error_json(why);
  } else if (!*rest && strcmp(method, "POST") == 0 && !json_content(conn)) {
    /* a type a cross-site form cannot send without a preflight */
    status = 415;
    body = query_error_json("a rule is sent as Content-Type: application/json");
  } else if (!*rest && strcmp(method, "POST") == 0) {
    rq->alert_post = true;
    return MHD_YES;
  } else if (!*rest && get) {
    status = alert_rules_get(s->ingest.ops, s->ingest.store, &body);
  } else if (*rest == '/' && strcmp(method, "DELETE") == 0) {
    status = alert_rules_delete(s->ingest.ops, s->ingest.store, rest + 1, &body);
  } else {
    status = 405;
    body = query_error_json(*rest ? "use DELETE" : "use GET or POST");
  }
  rq->responded = true;
  return respond_json(conn, status, body);
}

static enum MHD_Result finish_alert_post(server_t *s, struct MHD_Connection *conn, request_t *rq) {
  rq->responded = true;
  char *body = NULL;
  unsigned status = 413;
  if (rq->over_limit || rq->len > ALERT_RULE_MAX_BYTES)
    body = query_error_json("body: a rule is at most " STORE_STR(ALERT_RULE_MAX_BYTES) " bytes");
  else
    status = alert_rules_post(s->ingest.ops, s->ingest.store, &s->opts->alerts,
                              (const char *)rq->body, rq->len, &body);
  return respond_json(conn, status, body);
}

static bool alert_rules_path(const char *url, const char **rest) {
  size_t n = strlen(ALERT_RULES_PATH);
  if (strncmp(url, ALERT_RULES_PATH, n) != 0 || (url[n] && url[n] != '/')) return false;
  *rest = url + n;
  return true;
}

/* An ingest thread's batch stored: the alert thread evaluates it. */
static void on_stored(void *user, const char *app, const char *version) {
  alert_engine_notify(user, app, version);
}

/* ---- POST /v1/symbols/<build-id> ----------------------------------------- */

#define SYMBOLS_PREFIX "/v1/symbols/"

static enum MHD_Result respond_upload(struct MHD_Connection *conn, const upload_reply_t *reply) {
  char line[sizeof reply->text + 2];
  snprintf(line, sizeof line, "%s\n", reply->text);
  return respond(conn, reply->status, line, "text/plain; charset=utf-8", NULL);
}

static enum MHD_Result check_symbols_headers(server_t *s, struct MHD_Connection *conn,
                                             const char *id_text, request_t *rq) {
  const char *why;
  unsigned denied = access_status(s, conn, SCOPE_SYMBOLS, &why);
  if (denied) return rq->responded = true, respond_text(conn, denied, why);
  if (!s->keys && !request_write_type_ok(header(conn, MHD_HTTP_HEADER_CONTENT_TYPE)))
    return rq->responded = true,
           respond_text(conn, 403,
                        "a write in open mode needs Content-Type application/octet-stream (a "
                        "cross-site page cannot send it)");
  const char *replace = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "replace");
  bool keep = !replace || strcmp(replace, "0") == 0;
  if (!keep && strcmp(replace, "1") != 0)
    return rq->responded = true,
           respond_text(conn, 400, "parameter replace: must be 1 (replace a stored file) or 0");
  upload_reply_t reply;
  rq->upload = symbols_upload_begin(s->opts->symbols_dir, id_text,
                                    header(conn, MHD_HTTP_HEADER_CONTENT_LENGTH),
                                    s->opts->max_symbols_bytes, s->opts->max_symbols_dir_bytes,
                                    keep ? SYMBOL_KEEP : SYMBOL_REPLACE, &reply);
  if (rq->upload) return MHD_YES;
  rq->responded = true;
  return respond_upload(conn, &reply);
}

/* GET (or HEAD) /v1/symbols/<build-id>: 200 stored, 404 not (symbols scope). */
static enum MHD_Result serve_symbols_lookup(server_t *s, struct MHD_Connection *conn,
                                            const char *id_text) {
  const char *why;
  unsigned denied = access_status(s, conn, SCOPE_SYMBOLS, &why);
  if (denied) return respond_text(conn, denied, why);
  char text[200];
  unsigned status = symbols_lookup(s->opts->symbols_dir, id_text, text, sizeof text);
  return respond_text(conn, status, text);
}

static enum MHD_Result finish_symbols(server_t *s, struct MHD_Connection *conn, request_t *rq) {
  upload_reply_t reply;
  symbols_upload_finish(rq->upload, s->ingest.resym, &reply);
  rq->upload = NULL;
  rq->responded = true;
  return respond_upload(conn, &reply);
}

/* ---- answers held until the body is read ---------------------------------- */

/* An answer queued before the request's body has arrived makes
   libmicrohttpd close the connection right after it, unread bytes and
   all: a client still sending its body gets a broken pipe or a reset
   instead of the status. So a request that carries a body (any method
   but GET and HEAD) and declares no more than its route's limit has its
   answer from the headers held, its body read and dropped, and the
   answer queued once the body is complete. A body declared over the
   limit is answered at once (413, read no further). */
static bool hold_answer(const server_t *s, struct MHD_Connection *conn, const char *url,
                        const char *method, request_t *rq) {
  if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) return false;
  bool symbols = strncmp(url, SYMBOLS_PREFIX, strlen(SYMBOLS_PREFIX)) == 0;
  rq->discard_max = symbols ? s->opts->max_symbols_bytes : s->opts->max_body_bytes;
  const char *cl = header(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (!cl) return true; /* chunked: bounded as the bytes arrive */
  char *end;
  unsigned long long n = strtoull(cl, &end, 10);
  return end != cl && n <= rq->discard_max;
}

/* A body chunk of a request already answered (held): dropped; past the
   route's limit the connection is closed. */
static enum MHD_Result drop_body(request_t *rq, size_t n) {
  rq->discarded += n;
  return rq->discarded > rq->discard_max ? MHD_NO : MHD_YES;
}

static enum MHD_Result queue_held(struct MHD_Connection *conn, request_t *rq) {
  enum MHD_Result rc = MHD_queue_response(conn, rq->held_status, rq->held);
  MHD_destroy_response(rq->held);
  rq->held = NULL;
  return rc;
}

/* ---- MHD callbacks -------------------------------------------------------- */

/* First call of a request: route it and check what the headers allow. */
static enum MHD_Result on_headers(server_t *s, struct MHD_Connection *conn, const char *url,
                                  const char *method, request_t *rq) {
  bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  bool api = strncmp(url, "/api/", 5) == 0;
  const char *problem = rq->target_problem;
  unsigned status = problem ? 400 : (problem = origin_problem(s, conn)) ? 403 : 0;
  if (status) {
    rq->responded = true;
    if (!api) return respond_text(conn, status, problem);
    char *body = query_error_json(problem);
    enum MHD_Result rc = body ? respond(conn, status, body, "application/json", NULL) : MHD_NO;
    free(body);
    return rc;
  }
  if (strcmp(url, "/v1/batches") == 0) {
    if (strcmp(method, "POST") == 0) return check_batch_headers(s, conn, rq);
    rq->responded = true;
    return respond_text(conn, 405, "use POST");
  }
  if (strncmp(url, SYMBOLS_PREFIX, strlen(SYMBOLS_PREFIX)) == 0) {
    if (strcmp(method, "POST") == 0)
      return check_symbols_headers(s, conn, url + strlen(SYMBOLS_PREFIX), rq);
    rq->responded = true;
    if (get) return serve_symbols_lookup(s, conn, url + strlen(SYMBOLS_PREFIX));
    return respond_text(conn, 405, "use GET or POST");
  }
  const char *rest;
  if (alert_rules_path(url, &rest)) return serve_alert_rules(s, conn, rq, method, rest);
  rq->responded = true;
  if (strcmp(url, "/healthz") == 0 && get) return serve_health(s, conn);
  if (strcmp(url, "/metrics") == 0 && get) return serve_metrics(s, conn, rq);
  const char *item = NULL;
  const api_route_t *route = api_route_find(url, &item);
  if (route) return get ? serve_api(s, conn, rq, route, item) : respond_text(conn, 405, "use GET");
  if (dashboard_owns(url))
    return get ? dashboard_serve(conn, url) : respond_text(conn, 405, "use GET");
  return respond_text(conn, 404, "not found");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  (void)version;
  server_t *s = cls;
  request_t *rq = *con_cls;
  if (!rq) return MHD_NO; /* on_uri ran out of memory */
  if (!rq->started) {
    rq->started = true;
    t_holding = hold_answer(s, conn, url, method, rq) ? rq : NULL;
    enum MHD_Result rc = on_headers(s, conn, url, method, rq);
    t_holding = NULL;
    return rc;
  }
  if (*upload_data_size) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    if (rq->upload) return symbols_upload_write(rq->upload, upload_data, n) ? MHD_YES : MHD_NO;
    return rq->responded ? drop_body(rq, n) : take_body(s, rq, upload_data, n);
  }
  if (rq->upload) return finish_symbols(s, conn, rq);
  if (rq->read_done) return answer_read(conn, rq);
  if (rq->held) return queue_held(conn, rq);
  if (rq->alert_post && !rq->responded) return finish_alert_post(s, conn, rq);
  return rq->responded ? MHD_YES : finish_batch(s, conn, rq);
}

/* MHD's URI log callback: the request target as sent, before MHD decodes
   it or splits its query. Its result is the request's state (*con_cls).
   Too many arguments: the query is cut here, in MHD's own buffer, so MHD
   does not parse them (past its memory pool it answered nothing and
   left the client waiting for the timeout); the request gets 400. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  (void)cls, (void)conn;
  request_t *rq = calloc(1, sizeof *rq);
  if (!rq) return NULL;
  size_t args = 0;
  rq->target_problem = request_target_problem(uri, &args);
  char *query = strchr(uri, '?');
  if (args > REQUEST_MAX_ARGS && query) query[1] = '\0';
  return rq;
}

/* Connections opened and closed: the per-request deadline's table. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  server_t *s = cls;
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    conn_guard_closed(s->guard, *socket_context);
    return;
  }
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info) conn_guard_opened(s->guard, info->connect_fd, socket_context);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
  server_t *s = cls;
  (void)code;
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  if (info) conn_guard_answered(s->guard, info->socket_context);
  request_t *rq = *con_cls;
  if (!rq) return;
  symbols_upload_abort(rq->upload);
  if (rq->held) MHD_destroy_response(rq->held);
  if (rq->submitted) job_pool_release(rq->read ? s->read_pool : s->ingest_pool);
  read_request_free(rq->read);
  free(rq->body);
  free(rq);
  *con_cls = NULL;
}

/* libmicrohttpd's own messages (a bind that failed, a request it answered
   itself): one log line each, its error pages' HTML reduced to their words
   ("Error processing request (HTTP response code is 431 (`Request Header
   Fields Too Large')). Closing connection." and the page's text). */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char text[1024];
  vsnprintf(text, sizeof text, fmt, ap);
  if (collector_log_one_line(text, true)) collector_log("libmicrohttpd: %s", text);
}

/* Built stacks kept between batches (stack_cache.h): a fleet's distinct
   stacks of the last minutes, at most 32 MiB. */
#define STACK_CACHE_ENTRIES 8192
#define STACK_CACHE_BYTES (32u << 20)

/* Requests waiting for a pool thread, at most, in each pool: a batch holds
   its body (up to --max-body-bytes), a read its query; more get 503 +
   Retry-After at once. */
#define POOL_MAX_WAITING(threads) (4u * (threads))
#define STOP_ANSWER_NS INT64_C(2000000000) /* at a stop, for the waiting answers */

server_t *server_start(const collector_options_t *opts, const apikeys_t *keys,
                       const store_ops_t *ops, store_t *store, symbolizer_t *symbols,
                       resymbolizer_t *resym) {
  server_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->opts = opts;
  s->keys = keys;
  s->ingest = (ingest_target_t){ops,
                                store,
                                opts->max_decompressed_bytes,
                                symbols,
                                resym,
                                &opts->limits,
                                stack_cache_new(STACK_CACHE_ENTRIES, STACK_CACHE_BYTES),
                                key_bounds_new(&opts->key_bounds),
                                NULL,
                                NULL};
  s->limits = ratelimit_new(opts->rate_limit, opts->rate_burst);
  s->guard = s->limits ? conn_guard_start(opts->max_connections, opts->request_timeout_s) : NULL;
  unsigned waiting = POOL_MAX_WAITING(opts->threads);
  s->ingest_pool = s->guard ? job_pool_start("perf-ingest", opts->threads, waiting) : NULL;
  s->read_pool = s->ingest_pool ? job_pool_start("perf-read", opts->threads, waiting) : NULL;
  s->alerts = s->read_pool ? alert_engine_start(ops, store, &opts->alerts) : NULL;
  s->ingest.stored = on_stored;
  s->ingest.stored_user = s->alerts;
  if (!s->alerts) {
    server_stop(s);
    return NULL;
  }
  /* poll(), not MHD_USE_AUTO's epoll: with libmicrohttpd 0.9.75's edge-
     triggered epoll, a client that sent a request with a body and then
     shut its side (FIN) was never seen to close: its connection stayed
     until the idle timeout after the answer (fuzz_http found it). */
  unsigned flags =
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
  if (opts->no_listen) flags |= MHD_USE_NO_LISTEN_SOCKET;
  s->daemon = MHD_start_daemon(
      flags, ntohs(opts->listen.sin_port), NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
      on_mhd_log, s, /* first: every message goes through it */
      MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)&opts->listen, MHD_OPTION_THREAD_POOL_SIZE,
      (unsigned int)opts->threads, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int)opts->connection_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      (size_t)CONNECTION_MEMORY_LIMIT, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned int)opts->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      (unsigned int)opts->max_connections_per_ip, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
      MHD_OPTION_END);
  if (!s->daemon) {
    collector_log("cannot listen on %s\n", opts->listen_text);
    server_stop(s);
    return NULL;
  }
  return s;
}

int server_add_connection(server_t *s, int fd, const struct sockaddr *addr, socklen_t len) {
  return MHD_add_connection(s->daemon, fd, addr, len) == MHD_YES ? 0 : -1;
}

void server_stop(server_t *s) {
  if (!s) return;
  /* Every suspended connection resumed once its batch or its read is done
     and, within 2 s more, answered; the waiting ones and later ones 503. */
  job_pool_close(s->ingest_pool);
  job_pool_close(s->read_pool);
  job_pool_stop(s->ingest_pool, STOP_ANSWER_NS);
  job_pool_stop(s->read_pool, STOP_ANSWER_NS);
  if (s->daemon) MHD_stop_daemon(s->daemon);
  job_pool_free(s->ingest_pool);
  job_pool_free(s->read_pool);
  alert_engine_stop(s->alerts); /* after the ingest threads: nothing notifies it now */
  conn_guard_stop(s->guard);
  ratelimit_free(s->limits);
  stack_cache_free(s->ingest.stack_cache);
  key_bounds_free(s->ingest.bounds);
  free(s);
}
