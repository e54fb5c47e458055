/*
 * conn_guard.h - an absolute deadline per request. libmicrohttpd's
 * connection timeout is an idle timeout: a client that sends one header
 * line every few seconds keeps its connection (and its slot) forever. The
 * guard keeps a fixed table of the open connections, each with the
 * monotonic time by which its current request must have arrived whole
 * (headers and body) and been answered; a thread (`perf-conn-guard`, a
 * perf__worker) shuts down the socket of every connection past it, twice
 * a second, and MHD then closes that connection as if the client had.
 *
 * The deadline starts when the connection is accepted and again when a
 * request's answer has been sent (keep-alive): the idle time before the
 * next request counts towards it, so an idle keep-alive connection is
 * ended by whichever comes first, this or MHD's idle timeout.
 *
 * Threads: conn_guard_opened / _closed / _answered from MHD's threads
 * (its NOTIFY_CONNECTION and NOTIFY_COMPLETED callbacks); the table has a
 * mutex. MHD calls NOTIFY_CONNECTION's "closed" before it closes the
 * socket, so a socket the guard shuts down is always the connection's own.
 */
#ifndef PERF_COLLECTOR_CONN_GUARD_H
#define PERF_COLLECTOR_CONN_GUARD_H

#include <stddef.h>

typedef struct conn_guard_s conn_guard_t;

/* A table of max_connections slots and its thread; timeout_s per request.
   NULL on failure (out of memory, no thread). */
conn_guard_t *conn_guard_start(size_t max_connections, unsigned timeout_s);

/* Stop the thread and free the table (after MHD has stopped). NULL: no-op. */
void conn_guard_stop(conn_guard_t *g);

/* A connection was accepted: its socket and a slot (*slot, MHD's socket
   context, is set to it; NULL when the table is full: the connection is
   then only subject to MHD's own limits). */
void conn_guard_opened(conn_guard_t *g, int fd, void **slot);

/* A request's answer was sent: the next request's deadline starts now. */
void conn_guard_answered(conn_guard_t *g, void *slot);

/* The connection is closing: its slot is free again. */
void conn_guard_closed(conn_guard_t *g, void *slot);

/* Connections shut down at their deadline so far (for /metrics). */
unsigned long long conn_guard_expired(const conn_guard_t *g);

#endif
