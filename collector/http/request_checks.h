/*
 * request_checks.h - what is checked of a request before anything trusts
 * it, independent of libmicrohttpd: the raw request target (MHD decodes
 * percent-escapes and splits the query before the handler sees them, so a
 * %00 would silently end a build-id and a malformed escape pass as text),
 * and, in open mode (no keys file), where a request comes from: its Host
 * (DNS rebinding) and, for writes, its Origin and Content-Type (a
 * cross-site form or fetch can send text/plain, never
 * application/octet-stream without a preflight we never answer).
 * Stateless; any thread (MHD's workers call it).
 */
#ifndef PERF_COLLECTOR_REQUEST_CHECKS_H
#define PERF_COLLECTOR_REQUEST_CHECKS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

/* At most this many query arguments (the API's routes take 13 at most:
   9 filters and 4 tags). */
#define REQUEST_MAX_ARGS 32

/* The raw target (path and query, as sent): NULL when it is fine, else the
   reason for a 400 ("invalid percent-encoding in the URL", "%00 in the
   URL", "too many query arguments: 1000 (at most 32)"). *args_count is
   the number of query arguments. */
const char *request_target_problem(const char *target, size_t *args_count);

/* Open mode: a Host header names the listen address itself: its IPv4
   address, or for a loopback listen also "localhost" and "[::1]", with
   no port or the listen port. host NULL (HTTP/1.0 without Host) passes. */
bool request_host_ok(const char *host, const struct sockaddr_in *listen);

/* Open mode: an Origin (or Referer-less Sec-Fetch-Site) of another site
   refuses the request: origin must be absent, "null" refused, or
   http://<a Host request_host_ok accepts>. sec_fetch_site "cross-site" is
   refused too. NULL when fine, else the reason for a 403. */
const char *request_origin_problem(const char *origin, const char *sec_fetch_site,
                                   const struct sockaddr_in *listen);

/* Open mode, POST /v1/symbols: the Content-Type a cross-site page cannot
   send without a preflight: application/octet-stream or
   application/x-protobuf (parameters allowed). */
bool request_write_type_ok(const char *content_type);

#endif
