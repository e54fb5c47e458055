/*
 * apikeys.h - the accepted API keys and what each may do (--api-keys-file:
 * one key per line, `KEY` or `KEY SCOPE[,SCOPE...]`; blank lines and lines
 * starting with '#' are skipped, surrounding spaces trimmed). A bare key
 * has every scope, as before scopes existed. Loaded once at start,
 * read-only afterwards (any thread).
 */
#ifndef PERF_COLLECTOR_APIKEYS_H
#define PERF_COLLECTOR_APIKEYS_H

#include <stdbool.h>
#include <stddef.h>

/* What a key may do. The key an app ships can be extracted from it, so it
   should be ingest only; the dashboard's and the API's key read; CI's
   symbols; admin is every scope (an operator's key). */
enum apikey_scope {
  SCOPE_INGEST = 1u << 0,  /* POST /v1/batches */
  SCOPE_READ = 1u << 1,    /* GET /api/v1/..., GET /metrics */
  SCOPE_SYMBOLS = 1u << 2, /* POST /v1/symbols/<build-id> */
  SCOPE_ADMIN = 1u << 3,
  SCOPE_ALL = SCOPE_INGEST | SCOPE_READ | SCOPE_SYMBOLS | SCOPE_ADMIN,
};

typedef struct apikeys_s {
  char **keys;
  unsigned *scopes; /* per key, enum apikey_scope bits */
  size_t n;
} apikeys_t;

/* 0, or -1 with the reason on stderr (unreadable file, no key in it, an
   unknown scope: "line 3: unknown scope 'raed' (ingest, read, symbols,
   admin)"). */
int apikeys_load(const char *path, apikeys_t *out);
void apikeys_free(apikeys_t *k);

/* The scopes of key (comparison time independent of where a candidate
   differs); 0 when it is not one of them. */
unsigned apikeys_scopes(const apikeys_t *k, const char *key);

/* Whether key is one of them. */
bool apikeys_match(const apikeys_t *k, const char *key);

/* "ingest", "read", "symbols" or "admin" for one scope bit. */
const char *apikeys_scope_name(unsigned scope);

#endif
