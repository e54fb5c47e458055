/*
 * test_collector_conns.c - perf-collector (the real binary, a child process
 * on 127.0.0.1) against slow and careless clients at the socket level:
 * 300 slow clients holding connections while /healthz is still answered,
 * the absolute request deadline (--request-timeout) closing a client that
 * sends a header line every half second, the per-address connection cap
 * (--max-connections-per-ip), and the raw request target: numbers in 64
 * bits, %00 and bad percent-escapes, 1,000 query arguments. Requests are
 * written by hand on plain sockets (curl would normalize the target), from
 * chosen loopback addresses (127.0.0.0/8 is all loopback on Linux), each
 * with a deadline; the latencies measured are printed for the report.
 * Each case runs in its own process: `test_collector_conns <case>`.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "collector_rig.h"

/* A request's answer must come within this (the failure it guards against
   is no answer at all: 30 s and more); the measured time is printed. */
#define ANSWER_DEADLINE_S 10.0

/* ---- sockets ------------------------------------------------------------- */

/* A blocking TCP connection from src (a loopback address) to the collector. */
static int connect_from(const char *src, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  CHECK(inet_pton(AF_INET, src, &a.sin_addr) == 1);
  CHECKF(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind %s: %s", src, strerror(errno));
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECKF(connect(fd, (struct sockaddr *)&to, sizeof to) == 0, "connect: %s", strerror(errno));
  return fd;
}

static bool send_all(int fd, const char *text) {
  size_t len = strlen(text);
  while (len) {
    ssize_t n = send(fd, text, len, MSG_NOSIGNAL);
    if (n <= 0) return false;
    text += n, len -= (size_t)n;
  }
  return true;
}

/* Read until the peer closes or the deadline: bytes read into out (NUL-
   ended), -1 at the deadline. A reset counts as the peer closing. */
static ssize_t read_until_closed(int fd, char *out, size_t size, double deadline) {
  size_t got = 0;
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) return -1;
    struct pollfd p = {fd, POLLIN, 0};
    int rc = poll(&p, 1, (int)(left * 1000) + 1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char scratch[4096];
    char *dst = got + 1 < size ? out + got : scratch;
    size_t room = got + 1 < size ? size - 1 - got : sizeof scratch;
    ssize_t n = recv(fd, dst, room, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (dst != scratch) got += (size_t)n;
  }
  out[got] = '\0';
  return (ssize_t)got;
}

/* One request (the whole text, "Connection: close" in it) from src: the
   status, 0 when the connection closed without an answer, -1 when nothing
   came by the deadline. *elapsed: seconds until the answer. */
static long raw_request(const collector_t *c, const char *src, const char *text, double *elapsed,
                        char *out, size_t size) {
  double t0 = now_s();
  int fd = connect_from(src, c->port);
  long status = 0;
  if (send_all(fd, text)) {
    ssize_t n = read_until_closed(fd, out, size, t0 + ANSWER_DEADLINE_S);
    int code;
    if (n < 0)
      status = -1;
    else if (sscanf(out, "HTTP/1.%*d %d", &code) == 1)
      status = code;
  }
  if (elapsed) *elapsed = now_s() - t0;
  close(fd);
  return status;
}

/* GET target from src with the good key. */
static long raw_get(const collector_t *c, const char *src, const char *target, double *elapsed,
                    char *out, size_t size) {
  size_t len = strlen(target) + 256;
  char *text = malloc(len);
  CHECK(text != NULL);
  snprintf(text, len,
           "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nAuthorization: Bearer " GOOD_KEY
           "\r\nConnection: close\r\n\r\n",
           target, (unsigned)c->port);
  long status = raw_request(c, src, text, elapsed, out, size);
  free(text);
  return status;
}

/* The collector's open descriptors (/proc/PID/fd): how many connections
   it holds, give or take its own files. */
static int collector_fds(const collector_t *c) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)c->pid);
  DIR *d = opendir(path);
  CHECK(d != NULL);
  int n = 0;
  while (readdir(d))
    n++;
  closedir(d);
  return n - 2;
}

/* The collector's descriptors once they stop changing (the rig's own
   /healthz connection closes asynchronously): the same count for 200 ms. */
static int settled_fds(const collector_t *c) {
  double deadline = now_s() + 10;
  int last = collector_fds(c), same = 0;
  while (same < 10 && now_s() < deadline) {
    poll(NULL, 0, 20);
    int n = collector_fds(c);
    same = n == last ? same + 1 : 0;
    last = n;
  }
  return last;
}

/* Wait (deadline: seconds) until the collector holds at least n fds. */
static bool fds_at_least(const collector_t *c, int n, double seconds) {
  double deadline = now_s() + seconds;
  while (now_s() < deadline) {
    if (collector_fds(c) >= n) return true;
    poll(NULL, 0, 20);
  }
  return false;
}

/* The peer has closed fd (EOF or reset), checked without waiting. */
static bool peer_closed(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char b;
  ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* ---- slow clients ---------------------------------------------------------- */

#define SLOW_CLIENTS 300
#define SLOW_ADDRESSES 10 /* 30 connections each: under the per-IP cap (32) */
#define SLOW_PERIOD_S 2.0 /* a header line from every slow client this often */
#define SLOW_ROUNDS 5

/* 300 clients, each sending a request's headers one line every 2 s (the
   idle timeout never fires, the request never completes), from 10
   addresses; meanwhile /healthz from another address is answered 200 every
   round (the measured latencies are printed). The collector holds every
   slow connection (its descriptors), none is answered or closed: the slots
   are there for them and for the normal client. --request-timeout 600:
   on a loaded machine the setup and rounds may pass the default 60 s,
   and the slow clients must still be held at the end (the deadline is
   request_deadline's). */
static void case_slow_clients(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--request-timeout", "600", NULL});
  int base = settled_fds(&c);
  static int fds[SLOW_CLIENTS];
  for (int i = 0; i < SLOW_CLIENTS; i++) {
    char src[32];
    snprintf(src, sizeof src, "127.0.1.%d", 1 + i % SLOW_ADDRESSES);
    fds[i] = connect_from(src, c.port);
    CHECK(send_all(fds[i], "GET /healthz HTTP/1.1\r\n"));
  }
  CHECKF(fds_at_least(&c, base + SLOW_CLIENTS, 30), "the collector holds %d of %d connections",
         collector_fds(&c) - base, SLOW_CLIENTS);
  double worst = 0, sum = 0;
  char out[4096];
  for (int round = 0; round < SLOW_ROUNDS; round++) {
    double round_end = now_s() + SLOW_PERIOD_S;
    for (int i = 0; i < SLOW_CLIENTS; i++) {
      char line[64];
      snprintf(line, sizeof line, "X-Slow-%d: %d\r\n", round, i);
      CHECKF(send_all(fds[i], line), "slow client %d was dropped in round %d", i, round);
    }
    double latency;
    long st = raw_get(&c, "127.0.0.1", "/healthz", &latency, out, sizeof out);
    CHECKF(st == 200, "round %d: /healthz -> %ld after %.3f s", round, st, latency);
    fprintf(stderr, "round %d: /healthz 200 in %.1f ms with %d slow connections held\n", round,
            latency * 1000, collector_fds(&c) - base);
    worst = latency > worst ? latency : worst;
    sum += latency;
    double left = round_end - now_s();
    if (left > 0) poll(NULL, 0, (int)(left * 1000)); /* the slow clients' pace */
  }
  fprintf(stderr, "/healthz with %d slow clients: mean %.1f ms, worst %.1f ms\n", SLOW_CLIENTS,
          sum / SLOW_ROUNDS * 1000, worst * 1000);
  int alive = 0;
  for (int i = 0; i < SLOW_CLIENTS; i++) {
    alive += !peer_closed(fds[i]);
    close(fds[i]);
  }
  CHECK_EQ_INT(alive, SLOW_CLIENTS);
  collector_stop_healthy(&c);
}

/* A slow-client flood from one address: 300 slow clients from 127.0.2.1
   (header lines every 2 s) get --max-connections-per-ip (32) connections;
   the other 268 are closed at once, unanswered; /healthz from another
   address is answered 200 while the 32 are held. */
static void case_slow_clients_one_address(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--request-timeout", "600", NULL});
  int base = settled_fds(&c);
  static int fds[SLOW_CLIENTS];
  for (int i = 0; i < SLOW_CLIENTS; i++) {
    fds[i] = connect_from("127.0.2.1", c.port);
    send_all(fds[i], "GET /healthz HTTP/1.1\r\n"); /* refused ones may be closed already */
  }
  /* Every refused connection is closed by the collector: wait for 268. */
  double deadline = now_s() + 30;
  int closed = 0;
  static bool gone[SLOW_CLIENTS];
  while (closed < SLOW_CLIENTS - 32 && now_s() < deadline) {
    for (int i = 0; i < SLOW_CLIENTS; i++)
      if (!gone[i] && peer_closed(fds[i])) gone[i] = true, closed++;
    if (closed < SLOW_CLIENTS - 32) poll(NULL, 0, 20);
  }
  CHECK_EQ_INT(closed, SLOW_CLIENTS - 32);
  CHECK(fds_at_least(&c, base + 32, 30));
  char out[4096];
  double latency;
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < SLOW_CLIENTS; i++)
      if (!gone[i]) CHECK(send_all(fds[i], "X-Slow: 1\r\n"));
    CHECK_EQ_INT(raw_get(&c, "127.0.0.1", "/healthz", &latency, out, sizeof out), 200);
    fprintf(stderr, "one address: /healthz 200 in %.1f ms, 32 held, 268 refused\n", latency * 1000);
  }
  for (int i = 0; i < SLOW_CLIENTS; i++) {
    if (!gone[i]) CHECK(!peer_closed(fds[i]));
    close(fds[i]);
  }
  collector_stop_healthy(&c);
}

/* --request-timeout 2 (the idle timeout 30 s): a client sending a header
   line every 0.5 s is closed at the absolute deadline, unanswered or with
   no more than a status line; a normal request on a new connection is
   served. */
static void case_request_deadline(void) {
  collector_t c;
  collector_start(&c,
                  (const char *[]){"--request-timeout", "2", "--connection-timeout", "30", NULL});
  double t0 = now_s();
  int fd = connect_from("127.0.0.1", c.port);
  CHECK(send_all(fd, "GET /healthz HTTP/1.1\r\n"));
  bool closed = false;
  int lines = 0;
  while (!closed && now_s() - t0 < 25) {
    char line[32];
    snprintf(line, sizeof line, "X-Line-%d: 1\r\n", lines++);
    closed = !send_all(fd, line) || peer_closed(fd);
    struct pollfd p = {fd, POLLIN, 0};
    if (!closed && poll(&p, 1, 500) == 1) closed = peer_closed(fd);
  }
  double took = now_s() - t0;
  close(fd);
  fprintf(stderr,
          "a header line every 0.5 s: closed after %.2f s, %d lines (--request-timeout 2)\n", took,
          lines);
  CHECKF(closed, "still open after %.1f s and %d header lines", took, lines);
  CHECKF(took >= 2.0, "closed after %.2f s, before the deadline", took);
  char out[8192];
  CHECK_EQ_INT(raw_get(&c, "127.0.0.1", "/healthz", NULL, out, sizeof out), 200);
  CHECK_EQ_INT(raw_get(&c, "127.0.0.1", "/metrics", NULL, out, sizeof out), 200);
  CHECKF(strstr(out, "\nperf_collector_requests_expired_total 1\n") != NULL, "%s", out);
  collector_stop_healthy(&c);
}

/* --max-connections-per-ip 4: four held connections from 127.0.0.3; a
   fifth from there is closed unanswered, another address is served, and
   once the four are gone 127.0.0.3 is served again. */
static void case_per_ip_cap(void) {
  collector_t c;
  collector_start(&c, (const char *[]){"--max-connections-per-ip", "4", NULL});
  int base = settled_fds(&c);
  int held[4];
  for (size_t i = 0; i < ARRAY_LEN(held); i++) {
    held[i] = connect_from("127.0.0.3", c.port);
    CHECK(send_all(held[i], "GET /healthz HTTP/1.1\r\n"));
  }
  CHECK(fds_at_least(&c, base + 4, 30));
  char out[4096];
  CHECK_EQ_INT(raw_get(&c, "127.0.0.3", "/healthz", NULL, out, sizeof out), 0);
  CHECK_EQ_INT(raw_get(&c, "127.0.0.4", "/healthz", NULL, out, sizeof out), 200);
  for (size_t i = 0; i < ARRAY_LEN(held); i++) {
    CHECK(!peer_closed(held[i]));
    close(held[i]);
  }
  /* The collector sees the four close asynchronously: wait for its
     descriptors to go, then the address has its slots back. */
  double deadline = now_s() + 30;
  while (collector_fds(&c) > base && now_s() < deadline)
    poll(NULL, 0, 20);
  CHECK_EQ_INT(raw_get(&c, "127.0.0.3", "/healthz", NULL, out, sizeof out), 200);
  collector_stop_healthy(&c);
}

/* A client that sends a request with a body and then shuts its side (FIN)
   gets the answer and the connection closed at once, not after the idle
   timeout (30 s: libmicrohttpd's epoll mode kept it; the collector polls). */
static void case_half_close(void) {
  collector_t c;
  collector_start(&c, NULL);
  char text[512], out[4096];
  snprintf(
      text, sizeof text,
      "POST /v1/symbols/0a1b2c3d HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nAuthorization: Bearer " GOOD_KEY
      "\r\nContent-Type: application/octet-stream\r\nContent-Length: 8\r\n\r\n\x7f"
      "ELF\x02\x01\x01\x01",
      (unsigned)c.port);
  double t0 = now_s();
  int fd = connect_from("127.0.0.1", c.port);
  CHECK(send_all(fd, text));
  CHECK(shutdown(fd, SHUT_WR) == 0);
  ssize_t n = read_until_closed(fd, out, sizeof out, t0 + ANSWER_DEADLINE_S);
  close(fd);
  fprintf(stderr, "half-closed POST: answered and closed in %.1f ms\n", (now_s() - t0) * 1000);
  CHECKF(n > 0, "the connection was not closed within %.0f s", ANSWER_DEADLINE_S);
  CHECKF(strncmp(out, "HTTP/1.1 400", 12) == 0, "%s", out);
  CHECKF(strstr(out, "not an ELF file") != NULL, "%s", out);
  collector_stop_healthy(&c);
}

/* ---- the request target ---------------------------------------------------- */

typedef struct target_case_s {
  const char *target;
  long status;
  const char *says; /* in the body; NULL: not checked */
} target_case_t;

/* Every numeric parameter in 64 bits, %00 and bad escapes refused with
   400 naming them, 1,000 query arguments refused at once. */
static void case_request_targets(void) {
  collector_t c;
  collector_start(&c, NULL);
  static const target_case_t CASES[] = {
      {"/api/v1/top-stacks?kind=hang&to=9223372036854", 200, NULL},
      {"/api/v1/top-stacks?kind=hang&from=9223372036854&to=9223372036854", 200, NULL},
      {"/api/v1/flame?kind=cpu&from=0&to=9223372036854", 200, NULL},
      {"/api/v1/events?to=9223372036854", 200, NULL},
      {"/api/v1/top-stacks?kind=hang&to=9223372036855", 400, "must be unix milliseconds"},
      {"/api/v1/top-stacks?kind=hang&to=9223372036854775807", 400, "must be unix milliseconds"},
      {"/api/v1/top-stacks?kind=hang&from=18446744073709551617", 400, "must be unix milliseconds"},
      {"/api/v1/top-stacks?kind=hang&to=-1", 400, "must be unix milliseconds"},
      {"/api/v1/events?limit=18446744073709551617", 400, "must be 1..1000"},
      {"/api/v1/events?limit=9223372036854775808", 400, "must be 1..1000"},
      {"/api/v1/events/9223372036854775807", 404, NULL},
      {"/api/v1/events/99999999999999999999", 404, "no event"},
      {"/v1/symbols/ab%00cd", 400, "%00"},
      {"/api/v1/events?app=a%00b", 400, "%00"},
      {"/healthz?x=%00", 400, "%00"},
      {"/api/v1/flame?kind=%zz", 400, "invalid percent-encoding"},
      {"/api/v1/flame?kind=hang%2", 400, "invalid percent-encoding"},
      {"/healthz%", 400, "invalid percent-encoding"},
      {"/api/v1/events?app=%41pp", 200, NULL},
  };
  char out[8192];
  for (size_t i = 0; i < ARRAY_LEN(CASES); i++) {
    long st = raw_get(&c, "127.0.0.1", CASES[i].target, NULL, out, sizeof out);
    CHECKF(st == CASES[i].status, "%s -> %ld (expected %ld): %s", CASES[i].target, st,
           CASES[i].status, out);
    CHECKF(!CASES[i].says || strstr(out, CASES[i].says), "%s: %s", CASES[i].target, out);
  }
  /* 1,000 query arguments: 400 at once, naming the count. */
  size_t len = 32 + 1000 * 4;
  char *target = malloc(len);
  CHECK(target != NULL);
  strcpy(target, "/api/v1/events?a=1");
  for (int i = 1; i < 1000; i++)
    strcat(target, "&a=1");
  double took;
  long st = raw_get(&c, "127.0.0.1", target, &took, out, sizeof out);
  fprintf(stderr, "1,000 query arguments: %ld in %.1f ms\n", st, took * 1000);
  CHECKF(st == 400, "1,000 arguments -> %ld: %s", st, out);
  CHECKF(strstr(out, "too many query arguments: 1000 (at most 32)") != NULL, "%s", out);
  strcpy(target, "/api/v1/events?a=1");
  for (int i = 1; i < 32; i++)
    strcat(target, "&a=1");
  CHECK_EQ_INT(raw_get(&c, "127.0.0.1", target, NULL, out, sizeof out), 200); /* 32: fine */
  strcat(target, "&a=1");
  CHECK_EQ_INT(raw_get(&c, "127.0.0.1", target, NULL, out, sizeof out), 400); /* 33 */
  free(target);
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE_SERIAL(slow_clients, "the /healthz latency beside 300 slow clients is reported"),
      TEST_CASE(slow_clients_one_address),
      TEST_CASE(request_deadline),
      TEST_CASE(per_ip_cap),
      TEST_CASE(half_close),
      TEST_CASE(request_targets),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
