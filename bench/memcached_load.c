/*
 * memcached_load.c - a load client for memcached's text protocol, for
 * bench/preload_bench.sh (Debian 12 packages no memtier_benchmark):
 *
 *   memcached_load PORT CONNECTIONS REQUESTS [VALUE_BYTES]
 *
 * CONNECTIONS connections to 127.0.0.1:PORT, each with one request in
 * flight at a time (as redis-benchmark without pipelining), alternating
 * `set k<conn> 0 0 <VALUE_BYTES>` (answered STORED) and `get k<conn>`
 * (answered VALUE ... END), until REQUESTS were answered in all. Every
 * answer is checked. Prints "requests N seconds S requests/s R"; exit 1
 * with the reason when a connection fails or an answer is not the one
 * expected. One thread, poll() over the connections. Not linked with the
 * SDK.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNECTIONS 1024
#define MAX_VALUE_BYTES 4096
#define REPLY_BYTES (MAX_VALUE_BYTES + 256)

typedef struct {
  int fd;
  int id;
  bool is_get;
  long sent; /* requests sent on this connection */
  size_t got;
  char reply[REPLY_BYTES];
} conn_t;

static conn_t g_conns[MAX_CONNECTIONS];
static char g_value[MAX_VALUE_BYTES + 1];
static size_t g_value_bytes;

static int fail(const char *what, int id) {
  fprintf(stderr, "memcached_load: connection %d: %s\n", id, what);
  return 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The next request of c: a set, then a get of what it set, and so on. */
static int send_next(conn_t *c) {
  char req[MAX_VALUE_BYTES + 128];
  int len;
  c->is_get = c->sent % 2 == 1;
  if (c->is_get)
    len = snprintf(req, sizeof req, "get k%d\r\n", c->id);
  else
    len = snprintf(req, sizeof req, "set k%d 0 0 %zu\r\n%s\r\n", c->id, g_value_bytes, g_value);
  if (write(c->fd, req, (size_t)len) != len) return fail("write failed", c->id);
  c->sent++;
  c->got = 0;
  return 0;
}

/* The reply is whole: 1; not yet: 0; not what was asked: -1. */
static int reply_state(const conn_t *c) {
  const char *r = c->reply;
  if (!c->is_get) {
    if (c->got < 8) return 0;
    return strcmp(r, "STORED\r\n") == 0 ? 1 : -1;
  }
  if (c->got < 5 || strcmp(r + c->got - 5, "END\r\n") != 0) return 0;
  char head[64];
  int n = snprintf(head, sizeof head, "VALUE k%d 0 %zu\r\n", c->id, g_value_bytes);
  bool ok = c->got == (size_t)n + g_value_bytes + 2 + 5 && memcmp(r, head, (size_t)n) == 0 &&
            memcmp(r + n, g_value, g_value_bytes) == 0;
  return ok ? 1 : -1;
}

int main(int argc, char **argv) {
  if (argc < 4 || argc > 5) {
    fprintf(stderr, "usage: memcached_load PORT CONNECTIONS REQUESTS [VALUE_BYTES]\n");
    return 2;
  }
  int port = atoi(argv[1]), n = atoi(argv[2]);
  long total = atol(argv[3]);
  g_value_bytes = argc == 5 ? (size_t)atol(argv[4]) : 32;
  if (port <= 0 || n <= 0 || n > MAX_CONNECTIONS || total <= 0 || g_value_bytes == 0 ||
      g_value_bytes > MAX_VALUE_BYTES) {
    fprintf(stderr,
            "memcached_load: PORT > 0, CONNECTIONS 1..%d, REQUESTS > 0, VALUE_BYTES "
            "1..%d\n",
            MAX_CONNECTIONS, MAX_VALUE_BYTES);
    return 2;
  }
  memset(g_value, 'v', g_value_bytes);
  struct pollfd *pfds = calloc((size_t)n, sizeof *pfds);
  if (!pfds) return 1;
  for (int i = 0; i < n; i++) {
    g_conns[i] = (conn_t){.fd = connect_to(port), .id = i};
    if (g_conns[i].fd < 0) return fail(strerror(errno), i);
    pfds[i] = (struct pollfd){.fd = g_conns[i].fd, .events = POLLIN};
  }
  long sent = 0, done = 0;
  double t0 = now_s();
  for (int i = 0; i < n && sent < total; i++, sent++)
    if (send_next(&g_conns[i])) return 1;
  while (done < total) {
    if (poll(pfds, (nfds_t)n, 30000) <= 0) return fail("no reply in 30 s", -1);
    for (int i = 0; i < n; i++) {
      if (!pfds[i].revents) continue;
      conn_t *c = &g_conns[i];
      ssize_t r = read(c->fd, c->reply + c->got, sizeof c->reply - 1 - c->got);
      if (r <= 0) return fail(r == 0 ? "closed by the server" : strerror(errno), i);
      c->got += (size_t)r;
      c->reply[c->got] = '\0';
      int state = reply_state(c);
      if (state < 0) return fail(c->reply, i);
      if (state == 0) {
        if (c->got == sizeof c->reply - 1) return fail("reply too long", i);
        continue;
      }
      done++;
      if (sent < total) {
        if (send_next(c)) return 1;
        sent++;
      }
    }
  }
  double s = now_s() - t0;
  printf("requests %ld seconds %.3f requests/s %.0f\n", done, s, (double)done / s);
  return 0;
}
