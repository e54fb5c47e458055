/*
 * loop_json.h - a watched loop's totals as the API shows them (the SDKs'
 * loop stats summed, docs/protocol.md "Loop stats"): GET /api/v1/loops
 * and each version of GET /api/v1/versions/compare.
 */
#ifndef PERF_COLLECTOR_API_LOOP_JSON_H
#define PERF_COLLECTOR_API_LOOP_JSON_H

#include <jansson.h>

#include "collector/api/params.h"
#include "collector/model/records.h"

/* {"watched_hours","hangs","hangs_per_hour" (null when nothing was
   watched),"hangs_per_hour_low","hangs_per_hour_high" (its exact 95%
   Poisson interval, rate_interval.h; null likewise),"enough_data" (at
   least RATE_MIN_COUNT hangs over RATE_MIN_WATCHED_HOURS),"busy_fraction"
   (null when nothing was watched),"stats_batches","histogram":
   [{"lower_ms","upper_ms" (null for the last),"units"}] x 9}: a new
   object; NULL when out of memory. */
json_t *loop_totals_json(const store_loop_totals_t *t);

#endif
