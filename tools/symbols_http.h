/*
 * symbols_http.h - perf-symbols' side of the collector's symbols API
 * (docs/protocol.md, "Symbols"): GET /v1/symbols/<build-id> (is it stored?)
 * and POST /v1/symbols/<build-id> (upload a debug file), with libcurl and a
 * bearer key. One client per thread (it holds one curl handle).
 */
#ifndef PERF_TOOLS_SYMBOLS_HTTP_H
#define PERF_TOOLS_SYMBOLS_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define SYMBOLS_REPLY_MAX 400

typedef struct symbols_client_s symbols_client_t;

/* A client of the collector at base_url ("http://host:port", a trailing
   slash allowed) sending key (NULL: none). NULL when out of memory or
   when libcurl cannot start. Free with symbols_client_free. */
symbols_client_t *symbols_client_new(const char *base_url, const char *key);
void symbols_client_free(symbols_client_t *c);

/* GET /v1/symbols/<id>: the HTTP status (200 stored, 404 not), or 0 when
   no answer came; reply gets the answer's text (or curl's error). */
long symbols_client_lookup(symbols_client_t *c, const char *id, char reply[SYMBOLS_REPLY_MAX]);

/* POST /v1/symbols/<id> with the file at path as the body (replace:
   ?replace=1, a different file stored for id is replaced): the status
   (201 stored, 200 the same file was there or it replaced one), 0 when no
   answer came or the file could not be read; reply as above. */
long symbols_client_upload(symbols_client_t *c, const char *id, const char *path, bool replace,
                           char reply[SYMBOLS_REPLY_MAX]);

#endif
