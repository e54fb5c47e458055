/*
 * dashboard.c - serves the dashboard's files from the arrays compiled into
 * perf-collector (collector/http/dashboard/, embedded by embed_assets.cmake).
 * They change only with the binary, so the browser revalidates each time
 * (Cache-Control: no-cache) and gets a 304 while the ETag matches: an
 * upgraded collector is never shown with a stale script.
 */
#include "collector/http/dashboard.h"

#include <string.h>

#include "collector/http/dashboard_assets.h"

#define DASHBOARD_DIR "/dashboard/"

/* Everything the page loads comes from this collector: no CDN, no inline
   script, nothing sent elsewhere. */
#define CONTENT_SECURITY_POLICY                                                                    \
  "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "                 \
  "frame-ancestors 'none'"

static const struct {
  const char *suffix;
  const char *type;
} CONTENT_TYPES[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".svg", "image/svg+xml"},
};

static const char *content_type(const char *name);
static const dashboard_asset_t *find_asset(const char *name);
static enum MHD_Result redirect(struct MHD_Connection *conn, const char *location);
static enum MHD_Result send_static(struct MHD_Connection *conn, unsigned status, const void *data,
                                   size_t size, const char *type, const char *etag);

bool dashboard_owns(const char *url) {
  return strcmp(url, "/") == 0 || strcmp(url, "/dashboard") == 0 ||
         strncmp(url, DASHBOARD_DIR, strlen(DASHBOARD_DIR)) == 0;
}

enum MHD_Result dashboard_serve(struct MHD_Connection *conn, const char *url) {
  if (strcmp(url, "/") == 0 || strcmp(url, "/dashboard") == 0) return redirect(conn, DASHBOARD_DIR);
  const char *name = url + strlen(DASHBOARD_DIR);
  const dashboard_asset_t *asset = find_asset(*name ? name : "index.html");
  if (!asset) {
    static const char NOT_FOUND[] = "not found\n";
    return send_static(conn, 404, NOT_FOUND, strlen(NOT_FOUND), "text/plain; charset=utf-8", NULL);
  }
  const char *match = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-None-Match");
  if (match && strstr(match, asset->etag)) return send_static(conn, 304, "", 0, NULL, asset->etag);
  return send_static(conn, 200, asset->data, asset->size, content_type(asset->name), asset->etag);
}

/* ---- helpers -------------------------------------------------------------- */

static const char *content_type(const char *name) {
  size_t len = strlen(name);
  for (size_t i = 0; i < sizeof CONTENT_TYPES / sizeof CONTENT_TYPES[0]; i++) {
    size_t n = strlen(CONTENT_TYPES[i].suffix);
    if (len > n && strcmp(name + len - n, CONTENT_TYPES[i].suffix) == 0)
      return CONTENT_TYPES[i].type;
  }
  return "application/octet-stream";
}

/* Only the embedded names: a path with '/' or ".." never matches one. */
static const dashboard_asset_t *find_asset(const char *name) {
  for (size_t i = 0; i < dashboard_asset_count; i++)
    if (strcmp(dashboard_assets[i].name, name) == 0) return &dashboard_assets[i];
  return NULL;
}

static enum MHD_Result redirect(struct MHD_Connection *conn, const char *location) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
  if (!resp) return MHD_NO;
  enum MHD_Result ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, location);
  if (ok == MHD_YES) ok = MHD_queue_response(conn, MHD_HTTP_FOUND, resp);
  MHD_destroy_response(resp);
  return ok;
}

/* data is static (the embedded arrays or a literal): not copied. */
static enum MHD_Result send_static(struct MHD_Connection *conn, unsigned status, const void *data,
                                   size_t size, const char *type, const char *etag) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(size, (void *)data, MHD_RESPMEM_PERSISTENT);
  if (!resp) return MHD_NO;
  enum MHD_Result ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  if (ok == MHD_YES && type) ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (ok == MHD_YES && etag) ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
  if (ok == MHD_YES) ok = MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  if (ok == MHD_YES)
    ok = MHD_add_response_header(resp, "Content-Security-Policy", CONTENT_SECURITY_POLICY);
  if (ok == MHD_YES) ok = MHD_queue_response(conn, status, resp);
  MHD_destroy_response(resp);
  return ok;
}
