/*
 * http_server.c - the scriptable test HTTP server (see http_server.h).
 *
 * Owns one libmicrohttpd daemon: MHD's listening thread and one MHD thread
 * per connection call on_connection, on_request and on_completed; the test's
 * threads call the public functions. One mutex guards the script, the
 * default answer and the records; one condition variable (CLOCK_MONOTONIC)
 * is broadcast when a request is recorded and when the server stops, and is
 * what delayed answers and http_server_wait_requests sleep on.
 *
 * A scripted answer is turned into an MHD response when pushed (so a bad
 * header is reported to the test at once) and reference counted, because
 * the default answer may be in flight on several connections while the test
 * replaces it.
 */
#include "http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>

#include "test_util.h"

typedef struct answer_s answer_t;
struct answer_s {
  answer_t *next;            /* script order */
  unsigned refs;             /* under the server mutex */
  struct MHD_Response *resp; /* NULL when the connection is dropped */
  int status;
  unsigned delay_ms;
  char *path; /* NULL: any */
};

struct http_server_s {
  struct MHD_Daemon *daemon;
  uint16_t port;
  char url[40];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stopping;
  answer_t *script_head, *script_tail;
  size_t script_len;
  answer_t *default_answer;
  http_request_t *records; /* recorded entries, grown up to HTTP_SERVER_MAX_REQUESTS */
  size_t recorded, records_cap;
  size_t received;
  size_t body_bytes_kept;
  uint64_t last_connection_id;
};

/* One request in progress on a connection (MHD's con_cls). */
typedef struct exchange_s {
  uint64_t arrival_ns;
  unsigned char *body;
  size_t body_len, body_cap, body_size;
} exchange_t;

static void misuse(const char *what) {
  fprintf(stderr, "http_server: misuse: %s\n", what);
}

static struct timespec deadline_after_ms(unsigned ms) {
  uint64_t t = now_ns() + (uint64_t)ms * 1000000u;
  struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};
  return ts;
}

/* ---- answers ------------------------------------------------------------ */

static void answer_unref_locked(answer_t *a) {
  if (!a || --a->refs > 0) return;
  if (a->resp) MHD_destroy_response(a->resp);
  free(a->path);
  free(a);
}

static bool add_headers(struct MHD_Response *resp, const http_response_t *r) {
  for (size_t i = 0; i < HTTP_SERVER_MAX_RESPONSE_HEADERS && r->headers[i].name; i++) {
    const char *value = r->headers[i].value ? r->headers[i].value : "";
    if (MHD_add_response_header(resp, r->headers[i].name, value) != MHD_YES) {
      misuse("response header rejected by libmicrohttpd (Content-Length? a newline?)");
      return false;
    }
  }
  return true;
}

static struct MHD_Response *build_response(const http_response_t *r) {
  size_t len = r->body ? (r->body_len ? r->body_len : strlen(r->body)) : 0;
  void *body = len ? (void *)r->body : (void *)"";
  struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_COPY);
  if (!resp) return NULL;
  if (!add_headers(resp, r)) {
    MHD_destroy_response(resp);
    return NULL;
  }
  return resp;
}

static answer_t *answer_new(const http_response_t *r, bool with_path) {
  int status = r->status ? r->status : 200;
  if (status < 200 || status > 999) {
    misuse("status outside 200..999");
    return NULL;
  }
  answer_t *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->refs = 1;
  a->status = status;
  a->delay_ms = r->delay_ms;
  if ((with_path && r->path && !(a->path = strdup(r->path))) ||
      (!r->close_connection && !(a->resp = build_response(r)))) {
    free(a->path);
    free(a);
    return NULL;
  }
  return a;
}

static bool answer_matches(const answer_t *a, const char *path) {
  return !a->path || strcmp(a->path, path) == 0;
}

/* The oldest scripted answer for path, removed from the script, or the
   default; the caller owns one reference. */
static answer_t *take_answer_locked(http_server_t *s, const char *path) {
  answer_t **link = &s->script_head, *prev = NULL;
  while (*link && !answer_matches(*link, path)) {
    prev = *link;
    link = &(*link)->next;
  }
  answer_t *a = *link;
  if (!a) {
    s->default_answer->refs++;
    return s->default_answer;
  }
  *link = a->next;
  if (s->script_tail == a) s->script_tail = prev;
  s->script_len--;
  a->next = NULL;
  return a;
}

/* ---- records -------------------------------------------------------------- */

static void request_clear(http_request_t *r) {
  free(r->method);
  free(r->path);
  for (size_t i = 0; i < r->header_count; i++) {
    free((char *)r->headers[i].name);
    free((char *)r->headers[i].value);
  }
  free(r->headers);
  free(r->body);
  memset(r, 0, sizeof *r);
}

void http_request_free(http_request_t *r) {
  if (r) request_clear(r);
}

static bool push_header(http_request_t *r, const char *name, const char *value) {
  http_header_t *h = realloc(r->headers, (r->header_count + 1) * sizeof *h);
  if (!h) return false;
  r->headers = h;
  char *n = strdup(name), *v = strdup(value ? value : "");
  if (!n || !v) {
    free(n);
    free(v);
    return false;
  }
  h[r->header_count++] = (http_header_t){n, v};
  return true;
}

typedef struct header_sink_s {
  http_request_t *r;
  bool ok;
} header_sink_t;

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value) {
  (void)kind;
  header_sink_t *sink = cls;
  sink->ok = push_header(sink->r, key, value);
  return sink->ok ? MHD_YES : MHD_NO;
}

static uint16_t client_port(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!ci || !ci->client_addr || ci->client_addr->sa_family != AF_INET) return 0;
  return ntohs(((const struct sockaddr_in *)(const void *)ci->client_addr)->sin_port);
}

static uint64_t connection_id(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? (uint64_t)(uintptr_t)ci->socket_context : 0;
}

/* The record of the finished exchange; takes ex's body. False on no memory. */
static bool build_record(http_request_t *r, struct MHD_Connection *conn, const char *method,
                         const char *path, exchange_t *ex) {
  memset(r, 0, sizeof *r);
  header_sink_t sink = {r, true};
  r->method = strdup(method);
  r->path = strdup(path);
  if (r->method && r->path) MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, &sink);
  if (!r->method || !r->path || !sink.ok) {
    request_clear(r);
    return false;
  }
  r->body = ex->body;
  r->body_len = ex->body_len;
  r->body_size = ex->body_size;
  ex->body = NULL;
  r->arrival_ns = ex->arrival_ns;
  r->connection_id = connection_id(conn);
  r->client_port = client_port(conn);
  return true;
}

static bool records_reserve_locked(http_server_t *s) {
  if (s->recorded < s->records_cap) return true;
  size_t cap = s->records_cap ? s->records_cap * 2 : 64;
  if (cap > HTTP_SERVER_MAX_REQUESTS) cap = HTTP_SERVER_MAX_REQUESTS;
  http_request_t *grown = realloc(s->records, cap * sizeof *grown);
  if (!grown) return false;
  s->records = grown;
  s->records_cap = cap;
  return true;
}

/* Keep r (moved into the table) when there is room; drops its body when
   the total body budget is spent. */
static void store_record_locked(http_server_t *s, http_request_t *r) {
  if (s->recorded >= HTTP_SERVER_MAX_REQUESTS || !records_reserve_locked(s)) {
    request_clear(r);
    return;
  }
  if (r->body_len > HTTP_SERVER_MAX_TOTAL_BODY - s->body_bytes_kept) {
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
  }
  s->body_bytes_kept += r->body_len;
  s->records[s->recorded++] = *r;
}

static bool copy_request(const http_request_t *src, http_request_t *dst) {
  memset(dst, 0, sizeof *dst);
  dst->method = strdup(src->method);
  dst->path = strdup(src->path);
  bool ok = dst->method && dst->path;
  for (size_t i = 0; ok && i < src->header_count; i++)
    ok = push_header(dst, src->headers[i].name, src->headers[i].value);
  if (ok && src->body) {
    ok = (dst->body = malloc(src->body_len + 1)) != NULL;
    if (ok) memcpy(dst->body, src->body, src->body_len + 1);
  }
  if (!ok) {
    request_clear(dst);
    return false;
  }
  dst->body_len = src->body_len;
  dst->body_size = src->body_size;
  dst->arrival_ns = src->arrival_ns;
  dst->connection_id = src->connection_id;
  dst->client_port = src->client_port;
  dst->status = src->status;
  return true;
}

/* ---- MHD callbacks (MHD's threads) ---------------------------------------- */

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  (void)conn;
  http_server_t *s = cls;
  if (code != MHD_CONNECTION_NOTIFY_STARTED) return;
  pthread_mutex_lock(&s->mu);
  *socket_context = (void *)(uintptr_t)++s->last_connection_id;
  pthread_mutex_unlock(&s->mu);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
  (void)cls, (void)conn, (void)code;
  exchange_t *ex = *con_cls;
  if (!ex) return;
  free(ex->body);
  free(ex);
  *con_cls = NULL;
}

/* Keep up to HTTP_SERVER_MAX_BODY bytes (plus a NUL); count the rest. */
static bool append_body(exchange_t *ex, const char *data, size_t n) {
  ex->body_size += n;
  size_t room = HTTP_SERVER_MAX_BODY - ex->body_len;
  size_t keep = n < room ? n : room;
  if (keep == 0) return true;
  if (ex->body_len + keep + 1 > ex->body_cap) {
    size_t cap = ex->body_cap ? ex->body_cap : 4096;
    while (cap < ex->body_len + keep + 1)
      cap *= 2;
    if (cap > HTTP_SERVER_MAX_BODY + 1) cap = HTTP_SERVER_MAX_BODY + 1;
    unsigned char *grown = realloc(ex->body, cap);
    if (!grown) return false;
    ex->body = grown;
    ex->body_cap = cap;
  }
  memcpy(ex->body + ex->body_len, data, keep);
  ex->body_len += keep;
  ex->body[ex->body_len] = '\0';
  return true;
}

/* Record the request and pick its answer; the caller owns the reference. */
static answer_t *record_and_answer(http_server_t *s, struct MHD_Connection *conn,
                                   const char *method, const char *url, exchange_t *ex) {
  http_request_t r;
  bool built = build_record(&r, conn, method, url, ex);
  pthread_mutex_lock(&s->mu);
  answer_t *a = take_answer_locked(s, url);
  s->received++;
  if (built) {
    r.status = a->resp ? a->status : 0;
    store_record_locked(s, &r);
  }
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  return a;
}

/* Sleep delay_ms or until the server stops; false when it stops. */
static bool delay_answer(http_server_t *s, unsigned delay_ms) {
  struct timespec deadline = deadline_after_ms(delay_ms);
  pthread_mutex_lock(&s->mu);
  int rc = 0;
  while (!s->stopping && delay_ms > 0 && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&s->cv, &s->mu, &deadline);
  bool running = !s->stopping;
  pthread_mutex_unlock(&s->mu);
  return running;
}

static void release_answer(http_server_t *s, answer_t *a) {
  pthread_mutex_lock(&s->mu);
  answer_unref_locked(a);
  pthread_mutex_unlock(&s->mu);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  (void)version;
  http_server_t *s = cls;
  exchange_t *ex = *con_cls;
  if (!ex) { /* headers are in; the body (if any) follows */
    if (!(ex = calloc(1, sizeof *ex))) return MHD_NO;
    ex->arrival_ns = now_ns();
    *con_cls = ex;
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    bool ok = append_body(ex, upload_data, *upload_data_size);
    *upload_data_size = 0;
    return ok ? MHD_YES : MHD_NO;
  }
  answer_t *a = record_and_answer(s, conn, method, url, ex);
  enum MHD_Result rc = MHD_NO; /* drop the connection */
  if (delay_answer(s, a->delay_ms) && a->resp)
    rc = MHD_queue_response(conn, (unsigned)a->status, a->resp);
  release_answer(s, a);
  return rc;
}

/* ---- lifecycle -------------------------------------------------------------- */

static http_server_t *server_new(void) {
  http_server_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_init(&s->mu, NULL);
  http_response_t ok = {.status = 200};
  if (!(s->default_answer = answer_new(&ok, false))) {
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return NULL;
  }
  return s;
}

static void server_free(http_server_t *s) {
  while (s->script_head) {
    answer_t *a = s->script_head;
    s->script_head = a->next;
    answer_unref_locked(a);
  }
  answer_unref_locked(s->default_answer);
  for (size_t i = 0; i < s->recorded; i++)
    request_clear(&s->records[i]);
  free(s->records);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* Without `reuse` the option is left out: MHD then sets SO_REUSEADDR, while
   passing it as 0 would turn that off. With it MHD adds SO_REUSEPORT. */
static struct MHD_Daemon *daemon_start(http_server_t *s, uint16_t port, bool reuse) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct MHD_OptionItem extra[] = {
      {reuse ? MHD_OPTION_LISTENING_ADDRESS_REUSE : MHD_OPTION_END, 1, NULL},
      {MHD_OPTION_END, 0, NULL},
  };
  unsigned flags =
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO | MHD_USE_ITC;
  return MHD_start_daemon(flags, port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                          (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                          MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_ARRAY, extra,
                          MHD_OPTION_END);
}

/* Thread ids of this process, up to cap; returns how many. */
static size_t task_ids(long *ids, size_t cap) {
  size_t n = 0;
  DIR *d = opendir("/proc/self/task");
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL)
    if (de->d_name[0] != '.' && n < cap) ids[n++] = strtol(de->d_name, NULL, 10);
  if (d) closedir(d);
  return n;
}

/* The first line of /proc/self/task/TID/<file> into line; false when the
   thread is gone. */
static bool task_line(long tid, const char *file, char *line, int cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%ld/%s", tid, file);
  FILE *f = fopen(path, "re");
  if (!f) return false;
  bool got = fgets(line, cap, f) != NULL;
  fclose(f);
  return got;
}

/* True when thread tid sleeps in poll(2)/ppoll(2) or is gone: the first
   line of its syscall file is the syscall number when it is blocked in one,
   "running" otherwise. */
static bool task_in_poll(long tid) {
  char line[32];
  if (!task_line(tid, "syscall", line, sizeof line)) return true;
  long nr = strtol(line, NULL, 10);
  return nr == SYS_poll || nr == SYS_ppoll;
}

/* Wait (at most 10 s) until the threads the daemon started (every thread
   that appeared while it started) have reached
   their poll. A test forks right after starting a server, and GCC 12's
   AddressSanitizer allocator is not fork-safe: a listener still allocating
   its start-up state at the fork leaves the child an allocator lock held
   forever (seen: daemonize_http_sink's app stuck in its first calloc).
   glibc's malloc takes its locks around fork; this costs a few ms. */
static void wait_threads_idle(const long *before, size_t n_before) {
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    long ids[256];
    size_t n = task_ids(ids, 256);
    bool idle = true;
    for (size_t i = 0; i < n && idle; i++) {
      bool old = false;
      for (size_t j = 0; j < n_before && !old; j++)
        old = ids[i] == before[j];
      if (!old) idle = task_in_poll(ids[i]);
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (idle || now.tv_sec - t0.tv_sec >= 10) return;
    nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
  }
}

static http_server_t *start(uint16_t port, bool reuse) {
  long before[256];
  size_t n_before = task_ids(before, 256);
  http_server_t *s = server_new();
  if (!s) {
    errno = ENOMEM;
    return NULL;
  }
  if (!(s->daemon = daemon_start(s, port, reuse))) {
    int err = errno ? errno : EADDRINUSE;
    server_free(s);
    errno = err;
    return NULL;
  }
  wait_threads_idle(before, n_before);
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
  s->port = info ? info->port : 0;
  snprintf(s->url, sizeof s->url, "http://127.0.0.1:%u", (unsigned)s->port);
  return s;
}

http_server_t *http_server_start(void) {
  return start(0, false);
}

http_server_t *http_server_start_on_port(uint16_t port) {
  if (port == 0) {
    misuse("http_server_start_on_port: port 0 (use http_server_start)");
    errno = EINVAL;
    return NULL;
  }
  return start(port, true);
}

void http_server_stop(http_server_t *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stopping = true; /* delayed answers wake up and drop their connection */
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  MHD_stop_daemon(s->daemon); /* closes every connection, joins MHD's threads */
  server_free(s);
}

uint16_t http_server_port(const http_server_t *s) {
  if (!s) misuse("http_server_port: NULL server");
  return s ? s->port : 0;
}

const char *http_server_url(const http_server_t *s) {
  if (!s) misuse("http_server_url: NULL server");
  return s ? s->url : "";
}

/* ---- script ------------------------------------------------------------------- */

bool http_server_push(http_server_t *s, const http_response_t *r) {
  if (!s || !r) {
    misuse("http_server_push: NULL argument");
    return false;
  }
  answer_t *a = answer_new(r, true);
  if (!a) return false;
  pthread_mutex_lock(&s->mu);
  bool room = s->script_len < HTTP_SERVER_MAX_SCRIPT;
  if (room) {
    if (s->script_tail)
      s->script_tail->next = a;
    else
      s->script_head = a;
    s->script_tail = a;
    s->script_len++;
  } else {
    answer_unref_locked(a);
  }
  pthread_mutex_unlock(&s->mu);
  if (!room) misuse("http_server_push: script full");
  return room;
}

bool http_server_set_default(http_server_t *s, const http_response_t *r) {
  if (!s || !r) {
    misuse("http_server_set_default: NULL argument");
    return false;
  }
  answer_t *a = answer_new(r, false);
  if (!a) return false;
  pthread_mutex_lock(&s->mu);
  answer_unref_locked(s->default_answer); /* answers in flight keep theirs */
  s->default_answer = a;
  pthread_mutex_unlock(&s->mu);
  return true;
}

size_t http_server_pending(http_server_t *s) {
  if (!s) {
    misuse("http_server_pending: NULL server");
    return 0;
  }
  pthread_mutex_lock(&s->mu);
  size_t n = s->script_len;
  pthread_mutex_unlock(&s->mu);
  return n;
}

/* ---- recorded requests -------------------------------------------------------- */

size_t http_server_request_count(http_server_t *s) {
  if (!s) {
    misuse("http_server_request_count: NULL server");
    return 0;
  }
  pthread_mutex_lock(&s->mu);
  size_t n = s->received;
  pthread_mutex_unlock(&s->mu);
  return n;
}

bool http_server_request(http_server_t *s, size_t i, http_request_t *out) {
  if (!s || !out) {
    misuse("http_server_request: NULL argument");
    if (out) memset(out, 0, sizeof *out);
    return false;
  }
  pthread_mutex_lock(&s->mu);
  bool ok = i < s->recorded && copy_request(&s->records[i], out);
  pthread_mutex_unlock(&s->mu);
  if (!ok) memset(out, 0, sizeof *out);
  return ok;
}

const char *http_request_header(const http_request_t *r, const char *name) {
  if (!r || !name) {
    misuse("http_request_header: NULL argument");
    return NULL;
  }
  for (size_t i = 0; i < r->header_count; i++)
    if (strcasecmp(r->headers[i].name, name) == 0) return r->headers[i].value;
  return NULL;
}

bool http_server_wait_requests(http_server_t *s, size_t n, unsigned timeout_ms) {
  if (!s) {
    misuse("http_server_wait_requests: NULL server");
    return false;
  }
  struct timespec deadline = deadline_after_ms(timeout_ms);
  pthread_mutex_lock(&s->mu);
  int rc = 0;
  while (s->received < n && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&s->cv, &s->mu, &deadline);
  bool reached = s->received >= n;
  pthread_mutex_unlock(&s->mu);
  return reached;
}

static bool has_header_value(const http_request_t *r, const char *name, const char *value) {
  for (size_t i = 0; i < r->header_count; i++)
    if (strcasecmp(r->headers[i].name, name) == 0 &&
        (!value || !strcmp(r->headers[i].value, value)))
      return true;
  return false;
}

size_t http_server_count_header_value(http_server_t *s, const char *name, const char *value) {
  if (!s || !name) {
    misuse("http_server_count_header_value: NULL argument");
    return 0;
  }
  pthread_mutex_lock(&s->mu);
  size_t n = 0;
  for (size_t i = 0; i < s->recorded; i++)
    n += has_header_value(&s->records[i], name, value);
  pthread_mutex_unlock(&s->mu);
  return n;
}
