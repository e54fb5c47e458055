/*
 * registry.c - the backends this build has, one row per backend: the
 * schemes of its --db locations and its ops. A new backend is a folder
 * beside store/sqlite/ and store/pg/, a CMake option and one row here.
 */
#include "collector/store/store.h"

#include <stdbool.h>
#include <string.h>

#if PERF_STORE_PG
static const char *const PG_SCHEMES[] = {"postgresql://", "postgres://", NULL};
#endif

static const store_backend_t BACKENDS[] = {
#if PERF_STORE_PG
    {PG_SCHEMES, &store_pg_ops},
#endif
#if PERF_STORE_SQLITE
    {NULL, &store_sqlite_ops},
#endif
    {NULL, NULL}, /* keeps the table non-empty; not a backend */
};

/* The schemes known even when their backend was left out, so such a
   location is refused by name rather than opened as a SQLite file. */
static const struct {
  const char *scheme, *why;
} KNOWN[] = {
    {"postgresql://", "this collector was built without PostgreSQL (PERF_STORE_PG=OFF)"},
    {"postgres://", "this collector was built without PostgreSQL (PERF_STORE_PG=OFF)"},
};

const store_backend_t *store_backends(size_t *n_out) {
  *n_out = sizeof BACKENDS / sizeof BACKENDS[0] - 1;
  return BACKENDS;
}

static bool starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

const store_backend_t *store_backend_for(const char *location, const char **why) {
  size_t n;
  const store_backend_t *rows = store_backends(&n);
  for (size_t i = 0; i < n; i++)
    for (const char *const *s = rows[i].schemes; s && *s; s++)
      if (starts_with(location, *s)) return &rows[i];
  for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
    if (starts_with(location, KNOWN[i].scheme)) return *why = KNOWN[i].why, NULL;
  for (size_t i = 0; i < n; i++)
    if (!rows[i].schemes) return &rows[i];
  *why = "this collector was built without SQLite (PERF_STORE_SQLITE=OFF): --db takes only URIs";
  return NULL;
}
