/*
 * http_server.h - a scriptable HTTP/1.1 test server on 127.0.0.1 for the
 * uploader's tests (tests only, not part of the SDK). Built on
 * libmicrohttpd: one listening thread plus one thread per connection, all
 * owned by the server; keep-alive is on.
 *
 * Script: every request takes the oldest pushed response whose path matches
 * (NULL path: any), or the default response when none does. A response can
 * be delayed (a slow server; http_server_stop cuts the wait short) or can
 * drop the connection without answering.
 *
 * Recording: every request is recorded once its body has arrived (before
 * any delay): method, path, headers in arrival order, body (capped),
 * arrival time, and the TCP connection it came on, so keep-alive reuse can
 * be checked. Indexes are in completion order.
 *
 * "Collector down, then up": http_server_stop, then http_server_start_on_port
 * with the old port (a fresh server: empty script, no records).
 *
 * Note for clients: libcurl resends a request once, silently, when a reused
 * keep-alive connection is dropped before any byte of the answer, so a
 * close_connection answer on a reused connection is not seen as an error;
 * the resend takes the next scripted response (test case
 * close_on_reused_connection).
 *
 * Every function is thread-safe; returned records are deep copies. Nothing
 * is printed except on misuse (a NULL argument, a bad status or header).
 */
#ifndef PERF_TEST_HTTP_SERVER_H
#define PERF_TEST_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_SERVER_MAX_REQUESTS 10000           /* recorded; later ones are only counted */
#define HTTP_SERVER_MAX_BODY (16u * 1024 * 1024) /* bytes of one body kept */
#define HTTP_SERVER_MAX_TOTAL_BODY (256u << 20)  /* bytes of all bodies kept */
#define HTTP_SERVER_MAX_RESPONSE_HEADERS 8
#define HTTP_SERVER_MAX_SCRIPT 10000 /* responses queued at once */

typedef struct http_server_s http_server_t;

typedef struct http_header_s {
  const char *name; /* NULL ends a response's header list */
  const char *value;
} http_header_t;

/* One scripted answer. Zero-initialised fields mean: status 200, no extra
   header, empty body, no delay, answer normally, any path. Pushing copies
   every string. */
typedef struct http_response_s {
  int status;                                              /* 0: 200 */
  http_header_t headers[HTTP_SERVER_MAX_RESPONSE_HEADERS]; /* e.g. {"Retry-After", "2"} */
  const void *body;                                        /* NULL: empty */
  size_t body_len;                                         /* 0 with a body: strlen(body) */
  unsigned delay_ms;                                       /* wait before answering (or dropping) */
  bool close_connection;                                   /* drop the connection, send nothing */
  const char *path; /* only for requests to this path; NULL: any */
} http_response_t;

/* One recorded request (a deep copy; release with http_request_free). */
typedef struct http_request_s {
  char *method; /* "POST" */
  char *path;   /* "/v1/batches": percent-decoded, without the query string */
  size_t header_count;
  http_header_t *headers; /* as received: name case kept, arrival order; strings owned */
  unsigned char *body;    /* body_len bytes (+ a NUL not counted), NULL when empty */
  size_t body_len;        /* bytes kept (at most HTTP_SERVER_MAX_BODY) */
  size_t body_size;       /* bytes received; > body_len when the body was truncated */
  uint64_t arrival_ns;    /* CLOCK_MONOTONIC when the request's headers had arrived */
  uint64_t connection_id; /* 1, 2, ... per TCP connection accepted by this server */
  uint16_t client_port;   /* the client's source port */
  int status;             /* the answer's status; 0 for a close_connection answer */
} http_request_t;

/* Start on 127.0.0.1 with an ephemeral port. NULL on failure (errno set). */
http_server_t *http_server_start(void);

/* Start on 127.0.0.1:port (1..65535) with MHD_OPTION_LISTENING_ADDRESS_REUSE
   (SO_REUSEADDR + SO_REUSEPORT), e.g. to bring a stopped server's port back
   up. NULL on failure, e.g. when another socket took the port meanwhile
   (errno set). */
http_server_t *http_server_start_on_port(uint16_t port);

/* Drop every connection (delayed answers are cut short and dropped), join
   the server's threads, free everything. NULL is a no-op. */
void http_server_stop(http_server_t *s);

uint16_t http_server_port(const http_server_t *s);
const char *http_server_url(const http_server_t *s); /* "http://127.0.0.1:<port>", owned by s */

/* Append a response to the script. False on misuse or when the script holds
   HTTP_SERVER_MAX_SCRIPT responses. */
bool http_server_push(http_server_t *s, const http_response_t *r);

/* The answer when no scripted response matches (initially status 200, empty
   body). r->path is ignored. False on misuse. */
bool http_server_set_default(http_server_t *s, const http_response_t *r);

/* Scripted responses not consumed yet. */
size_t http_server_pending(http_server_t *s);

/* Requests received (recorded or not, see HTTP_SERVER_MAX_REQUESTS). */
size_t http_server_request_count(http_server_t *s);

/* Copy request i (0 = first completed) into *out. False when i was not
   recorded or memory ran out (*out is then zeroed). */
bool http_server_request(http_server_t *s, size_t i, http_request_t *out);
void http_request_free(http_request_t *r);

/* The value of header `name` (case-insensitive) in r, NULL when absent. */
const char *http_request_header(const http_request_t *r, const char *name);

/* Wait until at least n requests have been received; false on timeout. */
bool http_server_wait_requests(http_server_t *s, size_t n, unsigned timeout_ms);

/* Recorded requests carrying header `name` (case-insensitive) with exactly
   `value`; value NULL counts requests carrying the header at all. */
size_t http_server_count_header_value(http_server_t *s, const char *name, const char *value);

#endif
