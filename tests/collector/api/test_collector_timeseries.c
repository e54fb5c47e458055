/*
 * test_collector_timeseries.c - GET /api/v1/timeseries in the real
 * perf-collector, fed hand-made batches (batch_post.c) whose events start
 * at known instants around minute, hour and day boundaries:
 *  - buckets: exact events and event_total_ms per bucket (minute, hour, day),
 *    oldest first, an event in the last nanosecond of a bucket and one at
 *    the first of the next; hang takes fatal hangs, fatal_hang only them,
 *    cpu only cpu events;
 *    app, label, tag, from and to narrow it exactly as for events;
 *  - bad_parameters: bucket absent or unknown, kind absent, group, a
 *    from..to of 1001 buckets -> 400 naming the parameter; 1000 -> 200;
 *  - too_many_buckets: 1001 minutes holding events -> 400 naming bucket
 *    for minute, 200 with exact points for hour.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "perf/v1/perf.pb-c.h"

#define MINUTE_MS 60000LL
#define HOUR_MS 3600000LL
#define DAY_MS 86400000LL
#define DAY0_MS 1699920000000LL /* 2023-11-14T00:00:00Z, a day's first millisecond */

typedef struct ev_s {
  Perf__V1__EventKind kind;
  int64_t start_ns;
  int64_t duration_ms;
  const char *label;
} ev_t;

#define HANG PERF__V1__EVENT_KIND__EVENT_KIND_HANG
#define FATAL PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG
#define CPU PERF__V1__EVENT_KIND__EVENT_KIND_CPU
#define AT_MS(ms) ((DAY0_MS + (ms)) * 1000000LL)

/* The batch of app (tag team:<team>) with events evs[0..n): no stacks
   (a series counts events, not samples). */
static void send_events(const collector_t *c, const char *app, const char *team, const ev_t *evs,
                        size_t n, unsigned seed) {
  Perf__V1__Event *ev = calloc(n, sizeof *ev);
  Perf__V1__Event **evp = calloc(n, sizeof *evp);
  CHECK(ev && evp);
  for (size_t i = 0; i < n; i++) {
    perf__v1__event__init(&ev[i]);
    ev[i].kind = evs[i].kind;
    ev[i].start_unix_nanos = evs[i].start_ns;
    ev[i].duration_nanos = evs[i].duration_ms * 1000000LL;
    ev[i].tid = 7;
    ev[i].label = (char *)(evs[i].label ? evs[i].label : "");
    evp[i] = &ev[i];
  }
  Perf__V1__KeyValue kv = PERF__V1__KEY_VALUE__INIT;
  kv.key = "team";
  kv.value = (char *)team;
  Perf__V1__KeyValue *kvs[] = {&kv};
  Perf__V1__Resource res;
  Perf__V1__Batch b;
  batch_begin(&b, &res, app, "1.0", "prod", "h1");
  res.n_tags = 1, res.tags = kvs;
  char *strings[] = {""};
  b.n_strings = 1, b.strings = strings;
  b.n_events = n, b.events = evp;
  batch_post(c, &b, seed);
  free(evp);
  free(ev);
}

/* The events of case buckets: shop's hangs at day 0 + 0 ms, in the last
   nanosecond of minute 0, at minute 1, in the last millisecond of hour 0,
   at hour 1, a fatal hang at hour 2 and a hang on day 1; a cpu event;
   other's hang (team search) in minute 0. Durations are distinct. */
static void send_fixture(const collector_t *c) {
  const ev_t shop[] = {
      {HANG, AT_MS(0), 10, NULL},
      {HANG, AT_MS(MINUTE_MS) - 1, 20, "GET /x"},
      {HANG, AT_MS(MINUTE_MS), 30, NULL},
      {HANG, AT_MS(HOUR_MS - 1), 40, NULL},
      {HANG, AT_MS(HOUR_MS), 50, NULL},
      {FATAL, AT_MS(2 * HOUR_MS), 80, NULL},
      {HANG, AT_MS(DAY_MS + 5), 60, "GET /x"},
      {CPU, AT_MS(1000), 100, NULL},
  };
  const ev_t other[] = {{HANG, AT_MS(2000), 70, NULL}};
  send_events(c, "shop", "pay", shop, ARRAY_LEN(shop), 1);
  send_events(c, "other", "search", other, ARRAY_LEN(other), 2);
}

/* GET /api/v1/timeseries?query -> 200 with bucket_ms and exactly the points
   want ("start_ms_offset_from_day0:events:event_total_ms,...", "" none). */
static void check_series(const collector_t *c, const char *query, long long bucket_ms,
                         const char *want) {
  char path[512];
  snprintf(path, sizeof path, "/api/v1/timeseries?%s", query);
  long status = 0;
  json_t *o = get_json(c, path, &status);
  char *text = json_dumps(o, JSON_COMPACT);
  CHECKF(status == 200, "GET %s -> %ld %s", path, status, text);
  CHECKF(json_integer_value(json_object_get(o, "bucket_ms")) == bucket_ms, "%s: %s", path, text);
  json_t *points = json_object_get(o, "points");
  CHECKF(json_is_array(points), "%s: %s", path, text);
  char got[1024] = "";
  size_t i, len = 0;
  json_t *p;
  json_array_foreach(points, i, p) {
    CHECKF(json_object_size(p) == 3, "%s: %s", path, text);
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%lld:%lld:%g", i ? "," : "",
                            (long long)json_integer_value(json_object_get(p, "start_ms")) - DAY0_MS,
                            (long long)json_integer_value(json_object_get(p, "events")),
                            json_real_value(json_object_get(p, "event_total_ms")));
    CHECK(len < sizeof got);
  }
  CHECKF(strcmp(got, want) == 0, "%s: points %s, want %s (%s)", path, got, want, text);
  free(text);
  json_decref(o);
}

/* GET /api/v1/timeseries?query -> 400 whose error names param. */
static void check_bad(const collector_t *c, const char *query, const char *param) {
  check_bad_parameter(c, "/api/v1/timeseries", query, param);
}

static void case_buckets(void) {
  collector_t c;
  collector_start(&c, NULL);
  check_series(&c, "kind=hang&bucket=hour", HOUR_MS, "");
  send_fixture(&c);
  /* minute 0: 0 ms and the last nanosecond of the minute (and other's) */
  check_series(&c, "kind=hang&bucket=minute&app=shop", MINUTE_MS,
               "0:2:30,60000:1:30,3540000:1:40,3600000:1:50,7200000:1:80,86400000:1:60");
  check_series(&c, "kind=hang&bucket=minute", MINUTE_MS,
               "0:3:100,60000:1:30,3540000:1:40,3600000:1:50,7200000:1:80,86400000:1:60");
  check_series(&c, "kind=hang&bucket=hour&app=shop", HOUR_MS,
               "0:4:100,3600000:1:50,7200000:1:80,86400000:1:60");
  check_series(&c, "kind=hang&bucket=day&app=shop", DAY_MS, "0:6:230,86400000:1:60");
  check_series(&c, "kind=hang&bucket=day", DAY_MS, "0:7:300,86400000:1:60");
  check_series(&c, "kind=cpu&bucket=day", DAY_MS, "0:1:100");
  check_series(&c, "kind=fatal_hang&bucket=hour&app=shop", HOUR_MS, "7200000:1:80");
  check_series(&c, "kind=manual&bucket=day", DAY_MS, "");
  check_series(&c, "kind=cpu&bucket=minute&app=other", MINUTE_MS, "");
  check_series(&c, "kind=hang&bucket=hour&tag=team:search", HOUR_MS, "0:1:70");
  check_series(&c, "kind=hang&bucket=day&label=GET%20/x", DAY_MS, "0:1:20,86400000:1:60");
  check_series(&c, "kind=hang&bucket=day&version=1.0&environment=prod&host=h1", DAY_MS,
               "0:7:300,86400000:1:60");
  check_series(&c, "kind=hang&bucket=day&host=h2", DAY_MS, "");
  /* from and to, inclusive whole milliseconds: to = 59999 takes the
     event in the minute's last nanosecond, from = 60000 leaves it out */
  char q[256];
  snprintf(q, sizeof q, "kind=hang&bucket=minute&app=shop&from=%lld&to=%lld", DAY0_MS,
           DAY0_MS + MINUTE_MS - 1);
  check_series(&c, q, MINUTE_MS, "0:2:30");
  snprintf(q, sizeof q, "kind=hang&bucket=minute&app=shop&from=%lld&to=%lld", DAY0_MS + MINUTE_MS,
           DAY0_MS + HOUR_MS - 1);
  check_series(&c, q, MINUTE_MS, "60000:1:30,3540000:1:40");
  snprintf(q, sizeof q, "kind=hang&bucket=hour&from=%lld", DAY0_MS + HOUR_MS);
  check_series(&c, q, HOUR_MS, "3600000:1:50,7200000:1:80,86400000:1:60");
  collector_stop_healthy(&c);
}

static void case_bad_parameters(void) {
  collector_t c;
  collector_start(&c, NULL);
  send_fixture(&c);
  check_bad(&c, "kind=hang", "bucket");
  check_bad(&c, "kind=hang&bucket=", "bucket");
  check_bad(&c, "kind=hang&bucket=week", "bucket");
  check_bad(&c, "kind=hang&bucket=Hour", "bucket");
  check_bad(&c, "bucket=hour", "kind");
  check_bad(&c, "kind=unspecified&bucket=hour", "kind");
  check_bad(&c, "kind=Hang&bucket=hour", "kind");
  check_bad(&c, "kind=hang&bucket=hour&group=abc", "group");
  check_bad(&c, "kind=hang&bucket=hour&from=x", "from");
  check_bad(&c, "kind=hang&bucket=hour&from=10&to=9", "to");
  check_bad(&c, "kind=hang&bucket=hour&tag=team", "tag");
  /* from..to: 1000 buckets are fine, 1001 are not, wherever they start */
  check_series(&c, "kind=hang&bucket=minute&from=0&to=59999999", MINUTE_MS, "");
  check_bad(&c, "kind=hang&bucket=minute&from=0&to=60000000", "bucket");
  check_series(&c, "kind=hang&bucket=hour&from=1800000&to=3599999999", HOUR_MS, "");
  check_bad(&c, "kind=hang&bucket=hour&from=1800000&to=3600000000", "bucket");
  char q[256];
  snprintf(q, sizeof q, "kind=hang&bucket=day&from=%lld&to=%lld", DAY0_MS,
           DAY0_MS + 1000 * DAY_MS - 1);
  check_series(&c, q, DAY_MS, "0:7:300,86400000:1:60");
  snprintf(q, sizeof q, "kind=hang&bucket=day&from=%lld&to=%lld", DAY0_MS, DAY0_MS + 1000 * DAY_MS);
  check_bad(&c, q, "bucket");
  collector_stop_healthy(&c);
}

/* 1001 minutes holding one hang each (in batches of 250 events): too many
   points by the minute without a range, 17 by the hour. */
static void case_too_many_buckets(void) {
  collector_t c;
  collector_start(&c, NULL);
  enum { N = 1001, PER_BATCH = 250 };
  ev_t *evs = calloc(N, sizeof *evs);
  CHECK(evs != NULL);
  for (size_t i = 0; i < N; i++)
    evs[i] = (ev_t){HANG, AT_MS((int64_t)i * MINUTE_MS + 30000), 1, NULL};
  for (size_t i = 0; i < N; i += PER_BATCH)
    send_events(&c, "shop", "pay", evs + i, N - i < PER_BATCH ? N - i : PER_BATCH,
                (unsigned)(i / PER_BATCH) + 1);
  free(evs);
  check_bad(&c, "kind=hang&bucket=minute", "bucket");
  /* 1001 minutes: hours 0..15 hold 60 each, hour 16 the last 41 */
  char want[512] = "";
  size_t len = 0;
  for (int h = 0; h <= 16; h++)
    len += (size_t)snprintf(want + len, sizeof want - len, "%s%lld:%d:%d", h ? "," : "",
                            h * HOUR_MS, h < 16 ? 60 : 41, h < 16 ? 60 : 41);
  check_series(&c, "kind=hang&bucket=hour", HOUR_MS, want);
  char q[256]; /* the last 1000 minutes: no more than 1000 points */
  snprintf(q, sizeof q, "kind=hang&bucket=minute&from=%lld", DAY0_MS + MINUTE_MS);
  long status = 0;
  snprintf(want, sizeof want, "/api/v1/timeseries?%s", q);
  json_t *o = get_json(&c, want, &status);
  CHECK_EQ_INT(status, 200);
  CHECK_EQ_INT(json_array_size(json_object_get(o, "points")), 1000);
  json_decref(o);
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(buckets),
      TEST_CASE(bad_parameters),
      TEST_CASE(too_many_buckets),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
