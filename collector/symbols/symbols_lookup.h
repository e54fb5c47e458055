/*
 * symbols_lookup.h - GET /v1/symbols/<build-id>: is a debug file stored
 * for this build-id? Lets a symbols uploader (tools/perf-symbols) skip what
 * the collector has without sending it. Only the symbols directory is
 * looked at (debuginfod is not asked). Stateless; any thread.
 */
#ifndef PERF_COLLECTOR_SYMBOLS_LOOKUP_H
#define PERF_COLLECTOR_SYMBOLS_LOOKUP_H

#include <stddef.h>

/* 200 ("stored <id> (<n> bytes)"), 404 ("no debug file for <id>") or 400
   (the id is not 2..80 hex digits, even); the answer's text into text. */
unsigned symbols_lookup(const char *dir, const char *id_text, char *text, size_t size);

#endif
