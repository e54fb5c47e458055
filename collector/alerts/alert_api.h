/*
 * alert_api.h - the alert rules' routes, for admin keys (a rule's webhook
 * URL may hold a secret): POST /api/v1/alerts/rules (a rule as JSON: 201
 * and the rule stored; 400 naming the field that is wrong), GET
 * /api/v1/alerts/rules (every rule, oldest first), DELETE
 * /api/v1/alerts/rules/<id> (204; 404 no such rule). Independent of HTTP
 * as collector/api/ is: a handler gets the body or the path's item and
 * returns a status and a JSON body.
 */
#ifndef PERF_COLLECTOR_ALERT_API_H
#define PERF_COLLECTOR_ALERT_API_H

#include <stddef.h>

#include "collector/alerts/alert_config.h"
#include "collector/store/store.h"

#define ALERT_RULES_PATH "/api/v1/alerts/rules"
#define ALERT_RULE_MAX_BYTES 16384 /* a rule's JSON body, at most (413 past it) */
#define ALERT_URL_MAX_BYTES 2048
#define ALERT_APP_MAX_BYTES 256

/* Each returns the status and *body (malloc'ed JSON, the caller frees;
   NULL only when out of memory, or for a 204). */
unsigned alert_rules_post(const store_ops_t *ops, store_t *store, const alert_config_t *cfg,
                          const char *json, size_t len, char **body);
unsigned alert_rules_get(const store_ops_t *ops, store_t *store, char **body);
unsigned alert_rules_delete(const store_ops_t *ops, store_t *store, const char *item, char **body);

#endif
