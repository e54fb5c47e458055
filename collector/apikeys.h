/*
 * apikeys.h - the accepted API keys (--api-keys-file: one key per line;
 * blank lines and lines starting with '#' are skipped, surrounding spaces
 * trimmed). Loaded once at start, read-only afterwards (any thread).
 */
#ifndef PERF_COLLECTOR_APIKEYS_H
#define PERF_COLLECTOR_APIKEYS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct apikeys_s {
  char **keys;
  size_t n;
} apikeys_t;

/* 0, or -1 with the reason on stderr (unreadable file, no key in it). */
int apikeys_load(const char *path, apikeys_t *out);
void apikeys_free(apikeys_t *k);

/* Whether key is one of them (comparison time independent of where a
   candidate differs). */
bool apikeys_match(const apikeys_t *k, const char *key);

#endif
