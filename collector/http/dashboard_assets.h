/*
 * dashboard_assets.h - the dashboard's files (collector/http/dashboard/) as byte
 * arrays compiled into perf-collector. The definitions are generated at
 * build time by collector/http/embed_assets.cmake; read-only, any thread.
 */
#ifndef PERF_COLLECTOR_DASHBOARD_ASSETS_H
#define PERF_COLLECTOR_DASHBOARD_ASSETS_H

#include <stddef.h>

typedef struct dashboard_asset_s {
  const char *name;          /* the file's basename: "index.html", "app.js", ... */
  const unsigned char *data; /* its bytes (followed by a NUL not counted in size) */
  size_t size;
  const char *etag; /* a strong ETag with its quotes: "\"<hex>\"" */
} dashboard_asset_t;

extern const dashboard_asset_t dashboard_assets[];
extern const size_t dashboard_asset_count;

#endif
