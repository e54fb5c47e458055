/*
 * routes.c - the read-only API's route table (see routes.h).
 */
#include "collector/api/routes.h"

#include <string.h>

#include "collector/api/alerts.h"
#include "collector/api/drops.h"
#include "collector/api/events.h"
#include "collector/api/export_pprof.h"
#include "collector/api/loops.h"
#include "collector/api/query_states.h"
#include "collector/api/stacks.h"
#include "collector/api/top_stacks.h"
#include "collector/api/versions_api.h"

#define JSON "application/json"

static const api_route_t ROUTES[] = {
    {"/api/v1/top-stacks", query_top_stacks, NULL, NULL, JSON, NULL},
    {"/api/v1/export/folded", query_export_folded, NULL, NULL, "text/plain; charset=utf-8", NULL},
    {"/api/v1/export/pprof", NULL, export_pprof, NULL, "application/octet-stream",
     "attachment; filename=\"profile.pb.gz\""},
    {"/api/v1/flame", query_flame, NULL, NULL, JSON, NULL},
    {"/api/v1/flame/diff", query_flame_diff, NULL, NULL, JSON, NULL},
    {"/api/v1/events", query_events, NULL, NULL, JSON, NULL},
    {"/api/v1/events/", NULL, NULL, query_event, JSON, NULL},
    {"/api/v1/drops", query_drops, NULL, NULL, JSON, NULL},
    {"/api/v1/timeseries", query_timeseries, NULL, NULL, JSON, NULL},
    {"/api/v1/loops", query_loops, NULL, NULL, JSON, NULL},
    {"/api/v1/states", query_states, NULL, NULL, JSON, NULL},
    {"/api/v1/versions/compare", versions_compare, NULL, NULL, JSON, NULL},
    {"/api/v1/alerts/deliveries", query_alert_deliveries, NULL, NULL, JSON, NULL},
};

const api_route_t *api_route_find(const char *path, const char **item) {
  for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++) {
    const api_route_t *r = &ROUTES[i];
    if (!r->item && strcmp(path, r->path) == 0) return r;
    size_t n = strlen(r->path);
    if (r->item && strncmp(path, r->path, n) == 0 && path[n]) return *item = path + n, r;
  }
  return NULL;
}
