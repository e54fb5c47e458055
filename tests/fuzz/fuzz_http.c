/*
 * fuzz_http.c - libFuzzer target for the collector's HTTP side: each input
 * is the bytes a client sends on one connection (method, target, headers,
 * body; several requests when it keeps the connection alive), handed to
 * the collector's real server (collector/http/server.c on libmicrohttpd, with
 * request_checks.c, key scopes, open mode's checks, the API routes, the
 * dashboard, ingest and symbol uploads) in this process: one end of a
 * loopback TCP connection (accepted here) is given to the server with
 * server_add_connection (the server has no listening socket of its own),
 * the input is written to the other end, which is then shut for writing,
 * and the answer is read until the server closes. The client's end closes
 * with a reset (SO_LINGER 0) so millions of runs leave no TIME_WAIT.
 *
 * The input's first byte picks the server: even, keys (a bare key and a
 * read-only one); odd, open mode (no keys). Both store into SQLite on
 * ":memory:" (emptied after each input) and keep symbols in a temporary
 * directory removed at exit; the rate limit is off.
 *
 * Invariants checked per input (a violation aborts, which libFuzzer
 * reports): the server answers every input (it closes the connection, by
 * the deadline below); every answer's status line is HTTP/1.x with a
 * status the collector or libmicrohttpd documents (docs/protocol.md), never
 * a 5xx but 503 (out of memory) and 507 (the symbols quota); a target with
 * %00 or a bad escape is never answered 2xx.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collector/http/apikeys.h"
#include "collector/http/options.h"
#include "collector/http/request_checks.h"
#include "collector/http/server.h"
#include "collector/store/store.h"
#include "collector/symbols/symbolize.h"

#define ANSWER_DEADLINE_MS 10000 /* far above any answer; a hang is a bug */
#define MAX_ANSWER (1u << 20)

typedef struct rig_s {
  collector_options_t opts;
  apikeys_t keys;
  store_t *store;
  symbolizer_t *symbols;
  server_t *server;
} rig_t;

static rig_t g_rigs[2];   /* 0: keys, 1: open mode */
static int g_listen = -1; /* where the connections come from (not the server's) */
static struct sockaddr_in g_listen_addr;
static char g_dir[] = "/tmp/fuzz-http.XXXXXX";
static char *g_key_names[] = {"fuzz-key", "read-key"};
static unsigned g_key_scopes[] = {SCOPE_ALL, SCOPE_READ};

#define REQUIRE(cond, ...)                                                                         \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_http: invariant failed: %s (line %d): ", #cond, __LINE__);             \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static void stop_all(void) {
  for (int i = 0; i < 2; i++) {
    server_stop(g_rigs[i].server);
    symbolizer_free(g_rigs[i].symbols);
    if (g_rigs[i].store) store_sqlite_ops.close(g_rigs[i].store);
  }
  nftw(g_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  close(g_listen);
}

/* The collector's defaults (main.c), small where a fuzzer would fill the
   disk or memory; no listening socket, one worker thread. */
static void start(rig_t *r, bool open_mode, const char *symbols_dir) {
  collector_options_t *o = &r->opts;
  memset(o, 0, sizeof *o);
  o->listen.sin_family = AF_INET;
  o->listen.sin_port = htons(4318);
  o->listen.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  o->listen_text = "127.0.0.1:4318";
  o->db_path = ":memory:";
  o->symbols_dir = symbols_dir;
  o->max_symbols_bytes = 1u << 20;
  o->max_symbols_dir_bytes = 4u << 20;
  o->max_body_bytes = 1u << 20;
  o->max_decompressed_bytes = 16u << 20;
  o->rate_limit = 0;
  o->rate_burst = 1;
  o->connection_timeout_s = 30;
  o->request_timeout_s = 60;
  o->threads = 1;
  o->max_connections = 64;
  o->max_connections_per_ip = 64;
  o->no_listen = true;
  batch_limits_default(&o->limits);
  r->keys = (apikeys_t){g_key_names, g_key_scopes, 2};
  if (store_sqlite_ops.open(":memory:", &(store_config_t){STORE_DURABLE_PROCESS, 0, 0},
                            &r->store) != STORE_OK ||
      !(r->symbols = symbolizer_new(symbols_dir, 4)) ||
      !(r->server = server_start(o, open_mode ? NULL : &r->keys, &store_sqlite_ops, r->store,
                                 r->symbols, NULL))) {
    fprintf(stderr, "fuzz_http: cannot start the server\n");
    abort();
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  signal(SIGPIPE, SIG_IGN);
  g_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_listen_addr = (struct sockaddr_in){.sin_family = AF_INET};
  g_listen_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof g_listen_addr;
  if (g_listen < 0 || bind(g_listen, (struct sockaddr *)&g_listen_addr, len) != 0 ||
      listen(g_listen, 16) != 0 || getsockname(g_listen, (struct sockaddr *)&g_listen_addr, &len))
    abort();
  if (!mkdtemp(g_dir)) abort();
  char keys_dir[64], open_dir[64];
  snprintf(keys_dir, sizeof keys_dir, "%s/keys", g_dir);
  snprintf(open_dir, sizeof open_dir, "%s/open", g_dir);
  static char dirs[2][64];
  memcpy(dirs[0], keys_dir, sizeof keys_dir);
  memcpy(dirs[1], open_dir, sizeof open_dir);
  if (mkdir(dirs[0], 0700) != 0 || mkdir(dirs[1], 0700) != 0) abort();
  start(&g_rigs[0], false, dirs[0]);
  start(&g_rigs[1], true, dirs[1]);
  atexit(stop_all);
  return 0;
}

/* Statuses the collector answers (docs/protocol.md) or libmicrohttpd
   does on its own (malformed requests, oversized headers, HTTP/2 or 0.9). */
static bool documented(int status) {
  static const int OK[] = {200, 201, 302, 400, 401, 403, 404, 405, 409, 411,
                           413, 414, 415, 417, 429, 431, 501, 503, 505, 507};
  for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++)
    if (status == OK[i]) return true;
  return false;
}

/* The request target of the first request line (up to the space), into
   out; false when there is no request line. */
static bool first_target(const uint8_t *data, size_t size, char *out, size_t out_size) {
  const uint8_t *sp = memchr(data, ' ', size);
  if (!sp) return false;
  const uint8_t *start = sp + 1, *end = start;
  while (end < data + size && *end != ' ' && *end != '\r' && *end != '\n')
    end++;
  size_t n = (size_t)(end - start);
  if (n == 0 || n >= out_size) return false;
  memcpy(out, start, n);
  out[n] = '\0';
  return true;
}

/* Every status line in the answer is documented (pipelined requests get
   several); the first request's with a bad target is never 2xx. */
static void check_answer(const char *answer, size_t len, bool bad_target) {
  bool first = true;
  for (const char *p = answer; p && p < answer + len; p = strstr(p + 1, "HTTP/1.")) {
    if (strncmp(p, "HTTP/1.", 7) != 0) continue;
    int status = 0;
    if (sscanf(p, "HTTP/1.%*1d %3d", &status) != 1) continue;
    REQUIRE(documented(status), "status %d: %.200s", status, answer);
    REQUIRE(!(first && bad_target && status / 100 == 2), "bad target answered %d: %.200s", status,
            answer);
    first = false;
  }
}

/* A loopback TCP connection: sv[0] the client's end, sv[1] the accepted
   one, peer its address. */
static void connect_pair(int sv[2], struct sockaddr_in *peer) {
  sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(sv[0] >= 0, "socket: %s", strerror(errno));
  struct linger no_linger = {1, 0};
  setsockopt(sv[0], SOL_SOCKET, SO_LINGER, &no_linger, sizeof no_linger);
  int rc = connect(sv[0], (struct sockaddr *)&g_listen_addr, sizeof g_listen_addr);
  if (rc != 0 && errno == EINTR) {
    /* A signal (libFuzzer's timers) interrupted the connect: it goes on
       in the background; wait for it and read its outcome. */
    struct pollfd pfd = {sv[0], POLLOUT, 0};
    int err = 0;
    socklen_t elen = sizeof err;
    while (poll(&pfd, 1, -1) < 0 && errno == EINTR) {
    }
    rc = getsockopt(sv[0], SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0 ? 0 : -1;
    if (err) errno = err;
  }
  REQUIRE(rc == 0, "connect: %s", strerror(errno));
  socklen_t len = sizeof *peer;
  do
    sv[1] = accept4(g_listen, (struct sockaddr *)peer, &len, SOCK_CLOEXEC);
  while (sv[1] < 0 && errno == EINTR);
  REQUIRE(sv[1] >= 0, "accept: %s", strerror(errno));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  rig_t *rig = &g_rigs[data[0] & 1];
  data++, size--;
  int sv[2];
  struct sockaddr_in peer;
  connect_pair(sv, &peer);
  if (server_add_connection(rig->server, sv[1], (struct sockaddr *)&peer, sizeof peer) != 0) {
    close(sv[0]);
    return 0; /* the server owns sv[1] even on failure */
  }
  /* Write and read at once: the server may answer (and stop reading)
     before the whole input is written. */
  static char answer[MAX_ANSWER + 1];
  size_t sent = 0, got = 0;
  bool write_open = true;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long elapsed = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
    answer[got < MAX_ANSWER ? got : MAX_ANSWER] = '\0';
    REQUIRE(elapsed < ANSWER_DEADLINE_MS, "no end of the answer after %ld ms (%zu bytes: %.300s)",
            elapsed, got, answer);
    if (write_open && sent == size) shutdown(sv[0], SHUT_WR), write_open = false;
    struct pollfd p = {sv[0], (short)(POLLIN | (write_open ? POLLOUT : 0)), 0};
    if (poll(&p, 1, 100) <= 0) continue;
    if (write_open && (p.revents & POLLOUT)) {
      ssize_t n = send(sv[0], data + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += (size_t)n;
      if (n < 0 && errno != EAGAIN && errno != EINTR) write_open = false;
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char scratch[65536];
      char *dst = got < MAX_ANSWER ? answer + got : scratch;
      size_t room = got < MAX_ANSWER ? MAX_ANSWER - got : sizeof scratch;
      ssize_t n = recv(sv[0], dst, room, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
      if (n > 0 && dst != scratch) got += (size_t)n;
    }
  }
  close(sv[0]);
  answer[got] = '\0';
  char target[4096];
  size_t args;
  bool bad_target = first_target(data, size, target, sizeof target) &&
                    request_target_problem(target, &args) != NULL;
  check_answer(answer, got, bad_target);
  REQUIRE(store_sqlite_ops.delete_older_than(rig->store, INT64_MAX, NULL) == STORE_OK, "%s",
          "emptying the store");
  return 0;
}
