/*
 * collector_rig.c - perf-collector as a real child process on 127.0.0.1 for
 * the collector tests (test_collector.c, test_collector_api.c): start it on
 * a free port with a temporary database and keys file, talk to it with
 * libcurl, stop it cleanly (see collector_rig.h).
 */
#include "collector_rig.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "tempdir.h"

double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- HTTP with libcurl ---------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *arg) {
  reply_t *r = arg;
  size_t len = size * n, room = sizeof r->body - 1 - r->body_len;
  r->total_len += len;
  memcpy(r->body + r->body_len, data, len < room ? len : room);
  r->body_len += len < room ? len : room;
  r->body[r->body_len] = '\0';
  return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg) {
  reply_t *r = arg;
  size_t len = size * n;
  if (len > 12 && strncasecmp(data, "Retry-After:", 12) == 0)
    sscanf(data + 12, " %31[^\r\n]", r->retry_after);
  return len;
}

typedef struct upload_s {
  const uint8_t *data;
  size_t len, pos;
} upload_t;

static size_t on_read(char *buf, size_t size, size_t n, void *arg) {
  upload_t *u = arg;
  size_t left = u->len - u->pos, max = size * n, k = left < max ? left : max;
  memcpy(buf, u->data + u->pos, k);
  u->pos += k;
  return k;
}

/* One request; headers is a NULL-terminated list; chunked sends the body
   without Content-Length. Returns the status (0: no answer). */
long request(const collector_t *c, const char *method, const char *path, const char *const *headers,
             const void *body, size_t len, bool chunked, reply_t *r) {
  memset(r, 0, sizeof *r);
  char url[4096];
  int url_len = snprintf(url, sizeof url, "%s%s", c->url, path);
  CHECKF(url_len > 0 && url_len < (int)sizeof url, "URL too long: %s", path); /* never cut */
  CURL *h = curl_easy_init();
  CHECK(h != NULL);
  struct curl_slist *list = NULL;
  for (size_t i = 0; headers && headers[i]; i++)
    list = curl_slist_append(list, headers[i]);
  upload_t up = {body, len, 0};
  if (chunked) list = curl_slist_append(list, "Transfer-Encoding: chunked");
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
  if (strcmp(method, "POST") == 0 && chunked) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(h, CURLOPT_READDATA, &up);
  } else if (strcmp(method, "POST") == 0) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  } else if (strcmp(method, "GET") != 0) {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method); /* DELETE, HEAD: no body */
    if (strcmp(method, "HEAD") == 0) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  }
  if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
  curl_slist_free_all(list);
  curl_easy_cleanup(h);
  return r->status;
}

long get(const collector_t *c, const char *path, reply_t *r) {
  return request(c, "GET", path, NULL, NULL, 0, false, r);
}

long get_key(const collector_t *c, const char *key, const char *path, reply_t *r) {
  char auth[256];
  snprintf(auth, sizeof auth, "Authorization: Bearer %s", key ? key : "");
  const char *headers[] = {key ? auth : NULL, NULL};
  return request(c, "GET", path, headers, NULL, 0, false, r);
}

/* GET path with the good key; the body parsed as JSON (the caller frees). */
json_t *get_json(const collector_t *c, const char *path, long *status) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  *status = get_key(c, GOOD_KEY, path, r);
  json_error_t err;
  json_t *j = json_loads(r->body, 0, &err);
  CHECKF(j != NULL, "GET %s -> %ld, not JSON: %s (%s)", path, *status, err.text, r->body);
  free(r);
  return j;
}

json_t *get_ok(const collector_t *c, const char *path) {
  long status = 0;
  json_t *j = get_json(c, path, &status);
  CHECKF(status == 200, "GET %s -> %ld", path, status);
  return j;
}

char *get_text(const collector_t *c, const char *path) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long status = get_key(c, GOOD_KEY, path, r);
  CHECKF(status == 200 && r->total_len == r->body_len, "GET %s -> %ld: %.300s", path, status,
         r->body);
  char *text = strdup(r->body);
  CHECK(text != NULL);
  free(r);
  return text;
}

long long metric(const collector_t *c, const char *name) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get_key(c, GOOD_KEY, "/metrics", r), 200);
  char line[256];
  snprintf(line, sizeof line, "\n%s ", name); /* a sample line, not # HELP */
  const char *at = strstr(r->body, line);
  CHECKF(at != NULL, "no %s in /metrics", name);
  long long v = atoll(at + strlen(line));
  free(r);
  return v;
}

void batch_id_hex(const uint8_t id[16], char hex[33]) {
  for (int i = 0; i < 16; i++)
    snprintf(hex + 2 * i, 3, "%02x", id[i]);
}

long post_batch(const collector_t *c, const char *key, const char *id_hex, const void *body,
                size_t len, reply_t *r) {
  char auth[256], id[64];
  bool basic = key && strncmp(key, "Basic ", 6) == 0;
  snprintf(auth, sizeof auth, basic ? "Authorization: %s" : "Authorization: Bearer %s",
           key ? key : "");
  snprintf(id, sizeof id, "X-Perf-Batch-Id: %s", id_hex);
  const char *headers[] = {"Content-Type: application/x-protobuf", "Content-Encoding: zstd", id,
                           key ? auth : "Expect:", NULL};
  return request(c, "POST", "/v1/batches", headers, body, len, false, r);
}

void check_bad_parameter(const collector_t *c, const char *endpoint, const char *query,
                         const char *param) {
  char path[1024], name[64];
  snprintf(path, sizeof path, "%s%s%s", endpoint, *query ? "?" : "", query);
  snprintf(name, sizeof name, "parameter %s:", param);
  long status = 0;
  json_t *o = get_json(c, path, &status);
  const char *error = json_string_value(json_object_get(o, "error"));
  CHECKF(status == 400 && error && strstr(error, name) == error, "GET %s -> %ld %s", path, status,
         error ? error : "(no error)");
  json_decref(o);
}

/* ---- the collector as a child process ------------------------------------ */

uint16_t free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  socklen_t alen = sizeof a;
  CHECK(getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

pid_t g_running; /* the collector a failed check leaves behind */

/* Every child spawn made: a failed check may leave any of them running
   (a second collector of a test), holding ctest's output pipe open. */
#define MAX_SPAWNED 256
static pid_t g_spawned[MAX_SPAWNED];
static size_t g_n_spawned;

void kill_running(void) {
  if (g_running > 0) kill(g_running, SIGKILL), waitpid(g_running, NULL, 0);
  /* Only children still ours and running: a reaped one's pid may be
     another process's now, and waitpid says ECHILD for it. */
  for (size_t i = 0; i < g_n_spawned; i++)
    if (waitpid(g_spawned[i], NULL, WNOHANG) == 0)
      kill(g_spawned[i], SIGKILL), waitpid(g_spawned[i], NULL, 0);
}

pid_t spawn(char *const argv[], const char *stderr_path) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    if (stderr_path) {
      int fd = open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) dup2(fd, 2), dup2(fd, 1);
    }
    execv(argv[0], argv);
    _exit(127);
  }
  if (g_n_spawned < MAX_SPAWNED) g_spawned[g_n_spawned++] = pid;
  return pid;
}

int spawn_wait(pid_t pid, double seconds) {
  double end = now_s() + seconds;
  int st = 0;
  pid_t w;
  while ((w = waitpid(pid, &st, WNOHANG)) == 0) {
    if (now_s() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      return -1;
    }
    usleep(50000);
  }
  CHECK(w == pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool healthy_within(const collector_t *c, double seconds) {
  double end = now_s() + seconds;
  reply_t r;
  while (now_s() < end) {
    if (get(c, "/healthz", &r) == 200) return true;
    int st;
    if (waitpid(c->pid, &st, WNOHANG) == c->pid) return false;
    usleep(50000);
  }
  return false;
}

bool db_is_pg(const char *db) {
  return strncmp(db, "postgresql://", 13) == 0;
}

/* perf-collector on a free port (first c->port when same_port) with
   c->db, the keys file (NULL: open mode) and extra; up to 5 ports tried. */
static void spawn_on_db(collector_t *c, const char *keys, const char *const *extra,
                        bool same_port) {
  char listen[32];
  for (int attempt = 0; attempt < 5; attempt++) {
    if (!same_port || attempt > 0) c->port = free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%u", (unsigned)c->port);
    snprintf(c->url, sizeof c->url, "http://%s", listen);
    char *argv[MAX_ARGS] = {PERF_COLLECTOR_PATH, "--listen", listen, "--db", c->db,
                            "--threads",         "2"};
    size_t n = 7;
    if (keys) argv[n++] = "--api-keys-file", argv[n++] = (char *)keys;
    /* PostgreSQL: the SQLite default's place for the debug files. */
    char symbols[sizeof c->dir + 32];
    snprintf(symbols, sizeof symbols, "%s/collector.db.symbols", c->dir);
    bool has_symbols = false;
    for (size_t i = 0; extra && extra[i]; i++)
      has_symbols |= strcmp(extra[i], "--symbols-dir") == 0;
    if (db_is_pg(c->db) && !has_symbols) argv[n++] = "--symbols-dir", argv[n++] = symbols;
    for (size_t i = 0; extra && extra[i] && n < MAX_ARGS - 1; i++)
      argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    c->pid = g_running = spawn(argv, NULL);
    if (healthy_within(c, 20)) return;
    kill(c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
  }
  CHECKF(false, "perf-collector did not start");
}

/* Start perf-collector with a temp db, a keys file holding keys_text
   (NULL: no keys file, open mode) and extra (NULL-ended). */
bool rig_pg(void) {
  const char *v = getenv("PERF_TEST_DB");
  return v && strcmp(v, "pg") == 0;
}

/* A fresh database on the tests' PostgreSQL, one per process as the
   SQLite file: its URI in c->db. */
static void pg_database(collector_t *c) {
  static char made[256]; /* one per process, as the SQLite file in its temp directory */
  if (made[0]) {
    snprintf(c->db, sizeof c->db, "%s", made);
    return;
  }
  const char *dir = getenv("PERF_TEST_PG_DIR");
  CHECKF(dir && *dir, "PERF_TEST_DB=pg needs PERF_TEST_PG_DIR (the pg_server fixture)");
  char name[64], admin[256], sql[128];
  /* The pid alone repeats: pids wrap (pid_max 32,768 here) within one
     run of the suite, and the databases stay until the server stops. */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(name, sizeof name, "t%ld_%llx", (long)getpid(),
           (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
  snprintf(admin, sizeof admin, "postgresql:///postgres?host=%s&user=perf", dir);
  PGconn *conn = PQconnectdb(admin);
  CHECKF(PQstatus(conn) == CONNECTION_OK, "%s", PQerrorMessage(conn));
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
  PGresult *r = PQexec(conn, sql);
  CHECKF(PQresultStatus(r) == PGRES_COMMAND_OK, "%s", PQerrorMessage(conn));
  PQclear(r);
  PQfinish(conn);
  snprintf(c->db, sizeof c->db, "postgresql:///%s?host=%s&user=perf", name, dir);
  snprintf(made, sizeof made, "%s", c->db);
}

void rig_db_location(char *out, size_t size, const char *dir) {
  collector_t c = {0};
  snprintf(c.db, sizeof c.db, "%s/collector.db", dir);
  if (rig_pg()) pg_database(&c);
  snprintf(out, size, "%s", c.db);
}

static PGresult *pg_query(const char *db, const char *sql, ExecStatusType want) {
  PGconn *conn = PQconnectdb(db);
  CHECKF(PQstatus(conn) == CONNECTION_OK, "%s", PQerrorMessage(conn));
  PGresult *r = PQexec(conn, sql);
  CHECKF(PQresultStatus(r) == want, "%s: %s", sql, PQerrorMessage(conn));
  PQfinish(conn);
  return r;
}

/* sql's one row on SQLite database db, stepped to (*h and the statement
   to be closed with sqlite_done). */
static sqlite3_stmt *sqlite_row(const char *db, const char *sql, sqlite3 **h) {
  sqlite3_stmt *s = NULL;
  CHECK(sqlite3_open_v2(db, h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
  sqlite3_busy_timeout(*h, 5000);
  CHECKF(sqlite3_prepare_v2(*h, sql, -1, &s, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(*h));
  CHECKF(sqlite3_step(s) == SQLITE_ROW, "%s: %s", sql, sqlite3_errmsg(*h));
  return s;
}

static void sqlite_done(sqlite3 *h, sqlite3_stmt *s) {
  sqlite3_finalize(s);
  sqlite3_close(h);
}

/* sql's one row on PostgreSQL database db (the caller clears it). */
static PGresult *pg_row(const char *db, const char *sql) {
  PGresult *r = pg_query(db, sql, PGRES_TUPLES_OK);
  CHECK(PQntuples(r) == 1);
  return r;
}

long long db_count(const char *db, const char *sql) {
  long long n = 0;
  if (db_is_pg(db)) {
    PGresult *r = pg_row(db, sql);
    n = PQgetisnull(r, 0, 0) ? 0 : strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return n;
  }
  sqlite3 *h = NULL;
  sqlite3_stmt *s = sqlite_row(db, sql, &h);
  n = sqlite3_column_int64(s, 0);
  sqlite_done(h, s);
  return n;
}

char *db_text(const char *db, const char *sql) {
  char *text = NULL;
  if (db_is_pg(db)) {
    PGresult *r = pg_row(db, sql);
    if (!PQgetisnull(r, 0, 0)) CHECK((text = strdup(PQgetvalue(r, 0, 0))) != NULL);
    PQclear(r);
    return text;
  }
  sqlite3 *h = NULL;
  sqlite3_stmt *s = sqlite_row(db, sql, &h);
  const unsigned char *v = sqlite3_column_text(s, 0);
  if (v) CHECK((text = strdup((const char *)v)) != NULL);
  sqlite_done(h, s);
  return text;
}

long long rolled_sum(const char *db, const char *table, const char *col, const char *where) {
  char sql[1024], delta[64];
  size_t base = strlen(table);
  if (base > 4 && strcmp(table + base - 4, "_day") == 0) base -= 4;
  snprintf(delta, sizeof delta, "%.*s_delta", (int)base, table);
  if (db_is_pg(db))
    snprintf(sql, sizeof sql,
             "SELECT (SELECT coalesce(sum(%s), 0) FROM %s WHERE %s)"
             " + (SELECT coalesce(sum(%s), 0) FROM %s WHERE %s)",
             col, table, where, col, delta, where);
  else
    snprintf(sql, sizeof sql,
             "SELECT (SELECT coalesce(sum(%s), 0) FROM %s WHERE %s)"
             " + (SELECT coalesce(sum(%s), 0) FROM %s WHERE %s)",
             col, table, where, col, delta, where);
  return db_count(db, sql);
}

void db_exec(const char *db, const char *sql) {
  if (db_is_pg(db)) {
    PQclear(pg_query(db, sql, PGRES_COMMAND_OK));
    return;
  }
  sqlite3 *h = NULL;
  CHECK(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
  sqlite3_busy_timeout(h, 5000);
  CHECKF(sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(h));
  sqlite3_close(h);
}

void collector_start_keys(collector_t *c, const char *keys_text, const char *const *extra) {
  const char *dir = tempdir_make("perf-coll");
  snprintf(c->dir, sizeof c->dir, "%s", dir);
  char keys[128];
  snprintf(keys, sizeof keys, "%s/keys", dir);
  if (keys_text) {
    FILE *f = fopen(keys, "w");
    CHECK(f != NULL);
    fputs(keys_text, f);
    fclose(f);
  }
  snprintf(c->db, sizeof c->db, "%s/collector.db", dir);
  if (rig_pg()) pg_database(c);
  spawn_on_db(c, keys_text ? keys : NULL, extra, false);
}

void collector_restart(collector_t *c, const char *const *extra) {
  char keys[sizeof c->dir + 8];
  snprintf(keys, sizeof keys, "%s/keys", c->dir);
  spawn_on_db(c, access(keys, R_OK) == 0 ? keys : NULL, extra, true);
}

void collector_start(collector_t *c, const char *const *extra) {
  collector_start_keys(c, "# test keys\n" GOOD_KEY "\n\nsecond-key\n" READ_KEY " read\n", extra);
}

/* Healthy after everything, then a clean stop on SIGTERM (exit 0). */
void collector_stop_healthy(collector_t *c) {
  reply_t r;
  CHECK_EQ_INT(get(c, "/healthz", &r), 200);
  CHECK(strncmp(r.body, "ok", 2) == 0);
  CHECK(kill(c->pid, SIGTERM) == 0);
  int st = 0;
  CHECK(waitpid(c->pid, &st, 0) == c->pid);
  g_running = 0;
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "collector status 0x%x", st);
}

int collector_test_main(int argc, char **argv, const test_case_t *cases, size_t n) {
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    test_list_cases(cases, n);
    return 0;
  }
  if (argc != 2) {
    fprintf(stderr, "usage: %s --list | <case>\n", argv[0]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  atexit(kill_running);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  if (!test_run_case(cases, n, argv[1])) {
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
  }
  curl_global_cleanup();
  return 0;
}
