/*
 * loop_json.c - a watched loop's totals as JSON (see loop_json.h).
 */
#include "collector/api/loop_json.h"

#include "collector/model/rate_interval.h"

#define NS_PER_HOUR 3.6e12

/* The buckets' upper bounds, ms (docs/protocol.md "Loop stats"); the last
   has none. */
static const int UPPER_MS[STORE_LOOP_BUCKETS - 1] = {50, 100, 250, 500, 1000, 2000, 5000, 10000};

static json_t *ratio_or_null(double num, double den) {
  return den > 0 ? json_real(num / den) : json_null();
}

static json_t *histogram_json(const store_loop_stats_t *s) {
  json_t *h = json_array();
  for (int i = 0; h && i < STORE_LOOP_BUCKETS; i++) {
    json_t *upper = i < STORE_LOOP_BUCKETS - 1 ? json_integer(UPPER_MS[i]) : json_null();
    json_t *o = json_pack("{s:i,s:o,s:I}", "lower_ms", i ? UPPER_MS[i - 1] : 0, "upper_ms", upper,
                          "units", (json_int_t)s->units[i]);
    if (!o || json_array_append_new(h, o) != 0) json_decref(h), h = NULL;
  }
  return h;
}

json_t *loop_totals_json(const store_loop_totals_t *t) {
  double hours = (double)t->sum.watched_ns / NS_PER_HOUR, low, high;
  rate_poisson_interval(t->hangs, &low, &high);
  json_t *o =
      json_pack("{s:f,s:I,s:o,s:o,s:o,s:b,s:o,s:I,s:o}", "watched_hours", hours, "hangs",
                (json_int_t)t->hangs, "hangs_per_hour", ratio_or_null((double)t->hangs, hours),
                "hangs_per_hour_low", ratio_or_null(low, hours), "hangs_per_hour_high",
                ratio_or_null(high, hours), "enough_data", rate_enough_data(t->hangs, hours),
                "busy_fraction", ratio_or_null((double)t->sum.busy_ns, (double)t->sum.watched_ns),
                "stats_batches", (json_int_t)t->batches, "histogram", histogram_json(&t->sum));
  /* Each of the two scans (loop stats, hangs) reads the newest rows_limit
     rows at most: a cut one is said, with the larger count read. */
  query_rows_t rows = {t->batches > t->hangs ? t->batches : t->hangs, t->rows_limit};
  if (o && query_rows_cut(&rows) &&
      (json_object_set_new(o, "truncated", json_true()) != 0 || query_rows_json(o, &rows) != 0))
    json_decref(o), o = NULL;
  return o;
}
