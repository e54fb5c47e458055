/*
 * alerts.h - GET /api/v1/alerts/deliveries: the alerts the rules raised
 * (store.h alert_rows), newest first, each with its rule, key, state, the
 * webhook's last status, attempts, time, summary and the dashboard's
 * link. rule=ID: one rule's; limit as every list (default 20, at most
 * 1000). Then every rule without its webhook URL (it may hold a secret:
 * the whole rules are the admin routes of collector/alerts/alert_api.h).
 */
#ifndef PERF_COLLECTOR_API_ALERTS_H
#define PERF_COLLECTOR_API_ALERTS_H

#include <jansson.h>

#include "collector/api/params.h"

unsigned query_alert_deliveries(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                                char **body);

/* One alert as the answer lists it (NULL when out of memory). */
json_t *alert_row_json(const store_alert_t *a);

#endif
