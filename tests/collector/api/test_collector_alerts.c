/*
 * test_collector_alerts.c - alert rules and their webhooks in the real
 * perf-collector, fed hand-made batches (batch_post.c), the webhooks
 * test servers on 127.0.0.1 (support/http_server.c):
 *  - new_group: a hang group stored before the rule raises nothing; two
 *    batches carrying one new hang group, then three more -> exactly one
 *    POST, its JSON payload (kind, key, frames, the dashboard's link) and
 *    one delivery listed (delivered, 200, 1 attempt); a new CPU group
 *    raises its own;
 *  - regression: 3.1 watched 2 h with 6 hangs, 3.2 watched 0.1 h with 8
 *    (80 per hour, intervals apart) -> exactly one POST naming both
 *    versions' rates and the compare link, in Slack's shape; more 3.2
 *    batches raise nothing more; 3.1 against 3.0 without enough data
 *    raises nothing;
 *  - share: a group at 1 of 8 hangs in 3.1 and 8 of 8 in 3.2 -> one
 *    share_regression for it, none for the group that shrank;
 *  - rate_limit: --alert-rate 2 and five new groups at once -> two POSTs,
 *    three alerts stored as suppressed, and counted so in /metrics;
 *  - retries: a webhook answering 500 -> 1 + --alert-retries POSTs, the
 *    alert recorded failed with status 500 and its attempts, counted;
 *  - slow_webhook: a webhook holding its answer 60 s: ten more batches
 *    each answered within 5 s meanwhile, every alert failed once it is
 *    gone;
 *  - bad_rules: 400 naming the field (kind, url and its host, format,
 *    filters.kind, an unknown field, not JSON), 415 for a body not typed
 *    JSON, 403 for a read key, the rules listed and deleted (204, then
 *    404).
 * "Nothing more" is proven without waiting on a clock: each case ends
 * with a barrier, a new group of an app only a second rule watches, sent
 * to a second webhook; the alert thread takes batches in order, so once
 * the barrier's POST arrived every batch before it was evaluated.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "http_server.h"

#define HOUR_NS 3600000000000ULL
#define WAIT_MS 30000

static const char *const JSON_HEADERS[] = {"Authorization: Bearer " GOOD_KEY,
                                           "Content-Type: application/json", NULL};

/* A collector whose webhooks may go to 127.0.0.1, with its links' base
   and extra flags (NULL-ended, may be NULL). */
static void start(collector_t *c, const char *const *extra) {
  const char *args[24] = {"--alert-allow",      "127.0.0.1",
                          "--public-url",       "http://dash.example:4318/",
                          "--alert-backoff-ms", "50"};
  size_t n = 6;
  for (size_t i = 0; extra && extra[i] && n < ARRAY_LEN(args) - 1; i++)
    args[n++] = extra[i];
  args[n] = NULL;
  collector_start(c, args);
}

/* POST a rule (JSON text): the status, the answer parsed (the caller frees). */
static json_t *post_rule(const collector_t *c, const char *key, const char *rule, long *status) {
  reply_t *r = calloc(1, sizeof *r);
  CHECK(r);
  char auth[64];
  snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
  const char *headers[] = {auth, JSON_HEADERS[1], NULL};
  *status = request(c, "POST", "/api/v1/alerts/rules", headers, rule, strlen(rule), false, r);
  json_t *o = json_loadb(r->body, r->body_len, 0, NULL);
  CHECKF(o, "POST rule %s -> %ld, not JSON: %.*s", rule, *status, (int)r->body_len, r->body);
  free(r);
  return o;
}

/* A rule that must be made (201): its id. */
static long long add_rule(const collector_t *c, const char *kind, const char *url,
                          const char *extra) {
  char rule[1024];
  snprintf(rule, sizeof rule, "{\"kind\":\"%s\",\"url\":\"%s/hook\"%s%s}", kind, url,
           extra ? "," : "", extra ? extra : "");
  long status;
  json_t *o = post_rule(c, GOOD_KEY, rule, &status);
  char *text = json_dumps(o, JSON_COMPACT);
  CHECKF(status == 201, "POST %s -> %ld %s", rule, status, text);
  free(text);
  long long id = json_integer_value(json_object_get(o, "id"));
  CHECK(id > 0);
  json_decref(o);
  return id;
}

static void send_loop(const collector_t *c, const loop_batch_t *spec, unsigned seed) {
  reply_t *r = calloc(1, sizeof *r);
  CHECK(r);
  long status = batch_post_loop(c, spec, seed, r);
  CHECKF(status == 200, "batch %u -> %ld %.*s", seed, status, (int)r->body_len, r->body);
  free(r);
}

/* A batch of app with n new CPU stacks named prefix_0.. (distinct_batch_t). */
static void send_cpu_groups(const collector_t *c, const char *app, const char *prefix, size_t n,
                            unsigned seed) {
  payload_t p = {0};
  batch_distinct_payload(&p, &(distinct_batch_t){app, "1.0", NULL, NULL, NULL, prefix, 0, n}, seed);
  reply_t *r = calloc(1, sizeof *r);
  CHECK(r);
  long status = payload_post(c, GOOD_KEY, &p, r);
  CHECKF(status == 200, "cpu batch %u -> %ld %.*s", seed, status, (int)r->body_len, r->body);
  free(r);
  free(p.data);
}

/* The second webhook: a rule of new groups of app "barrier" only. */
typedef struct barrier_s {
  http_server_t *hook;
  unsigned sent;
} barrier_t;

static void barrier_init(barrier_t *b, const collector_t *c) {
  b->hook = http_server_start();
  CHECK(b->hook);
  b->sent = 0;
  add_rule(c, "new_group", http_server_url(b->hook), "\"filters\":{\"app\":\"barrier\"}");
}

/* Every batch sent before is evaluated once this returns. */
static void barrier_pass(barrier_t *b, const collector_t *c) {
  char prefix[32];
  snprintf(prefix, sizeof prefix, "barrier%u", ++b->sent);
  send_cpu_groups(c, "barrier", prefix, 1, 9000 + b->sent);
  CHECKF(http_server_wait_requests(b->hook, b->sent, WAIT_MS), "barrier %u never arrived", b->sent);
}

/* Request i of hook: a POST to /hook whose body is JSON (the caller frees). */
static json_t *hook_json(http_server_t *hook, size_t i) {
  http_request_t rq;
  CHECK(http_server_request(hook, i, &rq));
  CHECKF(strcmp(rq.method, "POST") == 0 && strcmp(rq.path, "/hook") == 0, "%s %s", rq.method,
         rq.path);
  const char *type = http_request_header(&rq, "Content-Type");
  CHECK(type && strcmp(type, "application/json") == 0);
  json_t *o = json_loadb((const char *)rq.body, rq.body_len, 0, NULL);
  CHECKF(o, "webhook body not JSON: %.*s", (int)rq.body_len, (const char *)rq.body);
  http_request_free(&rq);
  return o;
}

static const char *str_of(const json_t *o, const char *key) {
  const char *v = json_string_value(json_object_get(o, key));
  CHECKF(v, "no string %s", key);
  return v;
}

/* GET /api/v1/alerts/deliveries?query: its list (the caller frees the answer). */
static json_t *deliveries(const collector_t *c, const char *query, json_t **answer) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/alerts/deliveries%s%s", *query ? "?" : "", query);
  *answer = get_ok(c, path);
  json_t *list = json_object_get(*answer, "deliveries");
  CHECK(json_is_array(list));
  return list;
}

/* The deliveries in state, of every rule. */
static size_t count_state(const collector_t *c, const char *state) {
  json_t *answer, *list = deliveries(c, "limit=1000", &answer);
  size_t n = 0;
  for (size_t i = 0; i < json_array_size(list); i++)
    n += strcmp(str_of(json_array_get(list, i), "state"), state) == 0;
  json_decref(answer);
  return n;
}

/* The deliveries in state reach n (a delivery's row follows its POST's
   answer: the webhook may see the POST first); then exactly n. */
static void wait_state(const collector_t *c, const char *state, size_t n) {
  double end = now_s() + WAIT_MS / 1000.0;
  while (count_state(c, state) < n && now_s() < end)
    usleep(20000);
  CHECK_EQ_INT(count_state(c, state), n);
}

static void case_new_group(void) {
  collector_t c;
  start(&c, NULL);
  http_server_t *hook = http_server_start();
  CHECK(hook);
  /* render <- draw_frame: stored before the rule, never new to it */
  send_loop(&c, &(loop_batch_t){"shop", "1.0", "prod", 0, 0, NULL, 0, 2, 0, 400}, 1);
  long long rule =
      add_rule(&c, "new_group", http_server_url(hook), "\"filters\":{\"app\":\"shop\"}");
  barrier_t b;
  barrier_init(&b, &c);
  /* slow_query <- handle_db, new: twice, then three more times */
  send_loop(&c, &(loop_batch_t){"shop", "1.0", "prod", 0, 0, NULL, 0, 3, 3, 400}, 2);
  send_loop(&c, &(loop_batch_t){"shop", "1.0", "prod", 0, 0, NULL, 0, 3, 3, 400}, 3);
  CHECKF(http_server_wait_requests(hook, 1, WAIT_MS), "no alert for the new group");
  for (unsigned i = 0; i < 3; i++)
    send_loop(&c, &(loop_batch_t){"shop", "1.0", "prod", 0, 0, NULL, 0, 4, 2, 400}, 10 + i);
  barrier_pass(&b, &c);
  CHECK_EQ_INT(http_server_request_count(hook), 1);

  json_t *o = hook_json(hook, 0);
  CHECK(strcmp(str_of(o, "alert"), "new_group") == 0);
  CHECK_EQ_INT(json_integer_value(json_object_get(o, "rule")), rule);
  CHECK(strcmp(str_of(o, "app"), "shop") == 0);
  json_t *details = json_object_get(o, "details");
  const char *group = str_of(details, "group");
  char want[128];
  snprintf(want, sizeof want, "new_group:hang:%s", group);
  CHECKF(strcmp(str_of(o, "key"), want) == 0, "key %s, want %s", str_of(o, "key"), want);
  CHECK(strcmp(str_of(details, "kind"), "hang") == 0);
  CHECK(strcmp(json_string_value(json_array_get(json_object_get(details, "frames"), 0)),
               "slow_query") == 0);
  snprintf(want, sizeof want, "http://dash.example:4318/?app=shop&kind=hang&range=all&group=%s",
           group);
  CHECKF(strcmp(str_of(o, "link"), want) == 0, "link %s, want %s", str_of(o, "link"), want);
  CHECKF(strstr(str_of(o, "summary"), "slow_query <- handle_db"), "summary %s",
         str_of(o, "summary"));

  /* The delivery the API lists: that alert, delivered at the first POST. */
  char query[64];
  snprintf(query, sizeof query, "rule=%lld", rule);
  json_t *answer, *list = deliveries(&c, query, &answer);
  CHECK_EQ_INT(json_array_size(list), 1);
  json_t *d = json_array_get(list, 0);
  CHECK(strcmp(str_of(d, "alert_key"), str_of(o, "key")) == 0);
  CHECK(strcmp(str_of(d, "state"), "delivered") == 0);
  CHECK_EQ_INT(json_integer_value(json_object_get(d, "status")), 200);
  CHECK_EQ_INT(json_integer_value(json_object_get(d, "attempts")), 1);
  CHECK(strcmp(str_of(d, "link"), want) == 0);
  json_decref(answer);
  json_decref(o);

  /* A new CPU group of shop: an alert of its own. */
  send_cpu_groups(&c, "shop", "spin", 1, 20);
  barrier_pass(&b, &c);
  CHECK_EQ_INT(http_server_request_count(hook), 2);
  o = hook_json(hook, 1);
  CHECK(strcmp(str_of(json_object_get(o, "details"), "kind"), "cpu") == 0);
  json_decref(o);
  http_server_stop(hook);
  http_server_stop(b.hook);
  collector_stop_healthy(&c);
}

static void case_regression(void) {
  collector_t c;
  start(&c, NULL);
  http_server_t *hook = http_server_start();
  CHECK(hook);
  add_rule(&c, "hang_rate_regression", http_server_url(hook),
           "\"format\":\"slack\",\"filters\":{\"app\":\"shop\"}");
  barrier_t b;
  barrier_init(&b, &c);
  static const uint64_t U[] = {100, 10};
  /* 3.0: 2 hangs (not enough data), then 3.1: 6 hangs in 2 h, 3.2: 8 in 0.1 h */
  send_loop(&c, &(loop_batch_t){"shop", "3.0", "prod", HOUR_NS, HOUR_NS / 4, U, 2, 2, 1, 700}, 1);
  send_loop(&c, &(loop_batch_t){"shop", "3.1", "prod", HOUR_NS, HOUR_NS / 4, U, 2, 3, 1, 700}, 2);
  send_loop(&c, &(loop_batch_t){"shop", "3.1", "prod", HOUR_NS, HOUR_NS / 4, U, 2, 3, 1, 700}, 3);
  barrier_pass(&b, &c);
  CHECK_EQ_INT(http_server_request_count(hook), 0); /* 3.1 against 3.0: not enough data */
  send_loop(&c, &(loop_batch_t){"shop", "3.2", "prod", HOUR_NS / 10, HOUR_NS / 20, U, 2, 8, 4, 700},
            4);
  CHECKF(http_server_wait_requests(hook, 1, WAIT_MS), "no regression alert");
  for (unsigned i = 0; i < 3; i++)
    send_loop(&c,
              &(loop_batch_t){"shop", "3.2", "prod", HOUR_NS / 10, HOUR_NS / 20, U, 2, 8, 4, 700},
              5 + i);
  barrier_pass(&b, &c);
  CHECK_EQ_INT(http_server_request_count(hook), 1);

  /* Slack's shape: text and one mrkdwn section, the rates and the link */
  json_t *o = hook_json(hook, 0);
  const char *text = str_of(o, "text");
  CHECKF(strstr(text, "Hang rate regression in shop 3.2: 80.00 hangs per hour") &&
             strstr(text, "against 3.1's 3.00") &&
             strstr(text, "<http://dash.example:4318/?app=shop&a=3.1&b=3.2&range=all|Open in the "
                          "dashboard>"),
         "text: %s", text);
  json_t *block = json_array_get(json_object_get(o, "blocks"), 0);
  CHECK(strcmp(str_of(block, "type"), "section") == 0);
  CHECK(strcmp(str_of(json_object_get(block, "text"), "type"), "mrkdwn") == 0);
  CHECK(strcmp(str_of(json_object_get(block, "text"), "text"), text) == 0);
  json_decref(o);
  json_t *answer, *list = deliveries(&c, "", &answer);
  size_t regressions = 0;
  for (size_t i = 0; i < json_array_size(list); i++)
    regressions +=
        strcmp(str_of(json_array_get(list, i), "alert_key"), "hang_rate_regression:3.1:3.2") == 0;
  CHECK_EQ_INT(regressions, 1);
  json_decref(answer);
  http_server_stop(hook);
  http_server_stop(b.hook);
  collector_stop_healthy(&c);
}

static void case_share(void) {
  collector_t c;
  start(&c, NULL);
  http_server_t *hook = http_server_start();
  CHECK(hook);
  add_rule(&c, "share_regression", http_server_url(hook),
           "\"filters\":{\"app\":\"shop\",\"kind\":\"hang\"}");
  barrier_t b;
  barrier_init(&b, &c);
  /* slow_query: 1 of 8 hangs in 3.1 (0.3%..53%), 8 of 8 in 3.2 (63%..100%) */
  send_loop(&c, &(loop_batch_t){"shop", "3.1", "prod", 0, 0, NULL, 0, 8, 1, 700}, 1);
  send_loop(&c, &(loop_batch_t){"shop", "3.2", "prod", 0, 0, NULL, 0, 8, 8, 700}, 2);
  barrier_pass(&b, &c);
  CHECK_EQ_INT(http_server_request_count(hook), 1);
  json_t *o = hook_json(hook, 0);
  json_t *details = json_object_get(o, "details");
  CHECK(strcmp(str_of(o, "alert"), "share_regression") == 0);
  CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(details, "a"), "count")), 1);
  CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(details, "a"), "total")), 8);
  CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(details, "b"), "count")), 8);
  CHECKF(strstr(str_of(o, "summary"), "slow_query <- handle_db went from 12.5% of hangs (1 of 8)"
                                      " in 3.1 to 100.0% (8 of 8)"),
         "summary %s", str_of(o, "summary"));
  json_decref(o);
  http_server_stop(hook);
  http_server_stop(b.hook);
  collector_stop_healthy(&c);
}

static void case_rate_limit(void) {
  collector_t c;
  start(&c, (const char *[]){"--alert-rate", "2", NULL});
  http_server_t *hook = http_server_start();
  CHECK(hook);
  add_rule(&c, "new_group", http_server_url(hook), "\"filters\":{\"app\":\"shop\"}");
  barrier_t b;
  barrier_init(&b, &c);
  send_cpu_groups(&c, "shop", "burst", 5, 1);
  barrier_pass(&b, &c);
  CHECK_EQ_INT(http_server_request_count(hook), 2);
  CHECK_EQ_INT(count_state(&c, "suppressed"), 3);
  wait_state(&c, "delivered", 2 + 1); /* and the barrier's */
  CHECK_EQ_INT(metric(&c, "perf_collector_alerts_total{state=\"suppressed\"}"), 3);
  CHECK_EQ_INT(metric(&c, "perf_collector_alerts_total{state=\"delivered\"}"), 3);
  CHECK_EQ_INT(metric(&c, "perf_collector_alert_evaluations_dropped_total"), 0);
  /* suppressed alerts are raised once too: the same groups again, nothing */
  send_cpu_groups(&c, "shop", "burst", 5, 2);
  barrier_pass(&b, &c);
  CHECK_EQ_INT(http_server_request_count(hook), 2);
  CHECK_EQ_INT(count_state(&c, "suppressed"), 3);
  http_server_stop(hook);
  http_server_stop(b.hook);
  collector_stop_healthy(&c);
}

static void case_retries(void) {
  collector_t c;
  start(&c, (const char *[]){"--alert-retries", "2", NULL});
  http_server_t *hook = http_server_start();
  CHECK(hook);
  CHECK(http_server_set_default(hook, &(http_response_t){.status = 500}));
  long long rule = add_rule(&c, "new_group", http_server_url(hook), NULL);
  send_cpu_groups(&c, "shop", "fail", 1, 1);
  CHECKF(http_server_wait_requests(hook, 3, WAIT_MS), "3 POSTs, got %zu",
         http_server_request_count(hook));
  char query[64];
  snprintf(query, sizeof query, "rule=%lld", rule);
  json_t *answer = NULL, *d = NULL;
  double end = now_s() + WAIT_MS / 1000.0;
  do {
    json_decref(answer);
    json_t *list = deliveries(&c, query, &answer);
    d = json_array_get(list, 0);
    if (d && strcmp(str_of(d, "state"), "failed") == 0) break;
    usleep(20000);
  } while (now_s() < end);
  CHECKF(d && strcmp(str_of(d, "state"), "failed") == 0, "never failed");
  CHECK_EQ_INT(json_integer_value(json_object_get(d, "status")), 500);
  CHECK_EQ_INT(json_integer_value(json_object_get(d, "attempts")), 3);
  json_decref(answer);
  CHECK_EQ_INT(metric(&c, "perf_collector_alerts_total{state=\"failed\"}"), 1);
  CHECK_EQ_INT(http_server_request_count(hook), 3);
  http_server_stop(hook);
  collector_stop_healthy(&c);
}

/* Ingest never waits for a webhook: while the alert thread is held in a
   POST the webhook answers only after 60 s, ten more batches are each
   answered within 5 s (on a loaded machine: a stored batch takes
   milliseconds) and their evaluations wait in the queue; once the
   webhook is gone every alert ends failed. */
static void case_slow_webhook(void) {
  collector_t c;
  start(&c, (const char *[]){"--alert-timeout", "120", "--alert-retries", "0", "--alert-rate",
                             "100", NULL});
  http_server_t *hook = http_server_start();
  CHECK(hook);
  CHECK(http_server_set_default(hook, &(http_response_t){.delay_ms = 60000}));
  add_rule(&c, "new_group", http_server_url(hook), NULL);
  send_cpu_groups(&c, "shop", "held", 1, 1);
  CHECKF(http_server_wait_requests(hook, 1, WAIT_MS), "the first alert was never posted");
  for (unsigned i = 0; i < 10; i++) {
    char prefix[16];
    snprintf(prefix, sizeof prefix, "more%u", i);
    double t0 = now_s();
    send_cpu_groups(&c, "shop", prefix, 1, 10 + i);
    double took = now_s() - t0;
    CHECKF(took < 5.0, "batch %u waited %.3f s for the webhook", i, took);
  }
  CHECK_EQ_INT(http_server_request_count(hook), 1);
  CHECK_EQ_INT(count_state(&c, "pending"), 1);
  http_server_stop(hook); /* the held POST cut: no answer; the rest refused */
  wait_state(&c, "failed", 11);
  collector_stop_healthy(&c);
}

/* A rule refused: 400 whose error begins "field <name>:" (and holds why). */
static void check_refused(const collector_t *c, const char *rule, const char *field,
                          const char *why) {
  long status;
  json_t *o = post_rule(c, GOOD_KEY, rule, &status);
  const char *error = json_string_value(json_object_get(o, "error"));
  char want[64];
  snprintf(want, sizeof want, "field %s:", field);
  CHECKF(status == 400 && error && strncmp(error, want, strlen(want)) == 0 && strstr(error, why),
         "%s -> %ld %s, want 400 %s ...%s", rule, status, error ? error : "", want, why);
  json_decref(o);
}

static void case_bad_rules(void) {
  collector_t c;
  start(&c, NULL);
  check_refused(&c, "{\"url\":\"http://127.0.0.1:1/x\"}", "kind", "required");
  check_refused(&c, "{\"kind\":\"new_stack\",\"url\":\"http://127.0.0.1:1/x\"}", "kind",
                "not new_group");
  check_refused(&c, "{\"kind\":\"new_group\"}", "url", "required");
  check_refused(&c, "{\"kind\":\"new_group\",\"url\":\"http://example.com/x\"}", "url",
                "host 'example.com' is not one --alert-allow names");
  check_refused(&c, "{\"kind\":\"new_group\",\"url\":\"ftp://127.0.0.1/x\"}", "url",
                "not http:// or https://");
  check_refused(&c, "{\"kind\":\"new_group\",\"url\":\"http://127.0.0.1:1/x\",\"format\":\"xml\"}",
                "format", "not json or slack");
  check_refused(&c,
                "{\"kind\":\"hang_rate_regression\",\"url\":\"http://127.0.0.1:1/x\","
                "\"filters\":{\"kind\":\"cpu\"}}",
                "filters.kind", "hangs only");
  check_refused(&c, "{\"kind\":\"new_group\",\"url\":\"http://127.0.0.1:1/x\",\"to\":1}", "to",
                "unknown");
  check_refused(&c,
                "{\"kind\":\"new_group\",\"url\":\"http://127.0.0.1:1/x\",\"filters\":{\"app\":1}}",
                "filters.app", "not a string");
  check_refused(&c, "{\"kind\":", "body", "not JSON");
  long status;
  json_t *o =
      post_rule(&c, READ_KEY, "{\"kind\":\"new_group\",\"url\":\"http://127.0.0.1:1/x\"}", &status);
  CHECK_EQ_INT(status, 403);
  json_decref(o);
  reply_t *r = calloc(1, sizeof *r);
  CHECK(r);
  static const char RULE[] = "{\"kind\":\"new_group\",\"url\":\"http://127.0.0.1:1/x\"}";
  const char *form[] = {JSON_HEADERS[0], "Content-Type: text/plain", NULL};
  CHECK_EQ_INT(request(&c, "POST", "/api/v1/alerts/rules", form, RULE, strlen(RULE), false, r),
               415);
  o = get_ok(&c, "/api/v1/alerts/rules");
  CHECK_EQ_INT(json_array_size(json_object_get(o, "rules")), 0);
  json_decref(o);

  long long id = add_rule(&c, "new_group", "http://127.0.0.1:1", "\"filters\":{\"kind\":\"cpu\"}");
  o = get_ok(&c, "/api/v1/alerts/rules");
  json_t *rule = json_array_get(json_object_get(o, "rules"), 0);
  CHECK_EQ_INT(json_array_size(json_object_get(o, "rules")), 1);
  CHECK(strcmp(str_of(rule, "url"), "http://127.0.0.1:1/hook") == 0);
  CHECK(strcmp(str_of(rule, "format"), "json") == 0);
  CHECK(strcmp(str_of(json_object_get(rule, "filters"), "kind"), "cpu") == 0);
  CHECK(json_is_null(json_object_get(json_object_get(rule, "filters"), "app")));
  json_decref(o);
  CHECK_EQ_INT(get_key(&c, READ_KEY, "/api/v1/alerts/rules", r), 403);
  char path[64];
  snprintf(path, sizeof path, "/api/v1/alerts/rules/%lld", id);
  CHECK_EQ_INT(request(&c, "DELETE", path, JSON_HEADERS, NULL, 0, false, r), 204);
  CHECK_EQ_INT(request(&c, "DELETE", path, JSON_HEADERS, NULL, 0, false, r), 404);
  CHECK_EQ_INT(request(&c, "DELETE", "/api/v1/alerts/rules/x", JSON_HEADERS, NULL, 0, false, r),
               400);
  free(r);
  o = get_ok(&c, "/api/v1/alerts/rules");
  CHECK_EQ_INT(json_array_size(json_object_get(o, "rules")), 0);
  json_decref(o);
  check_bad_parameter(&c, "/api/v1/alerts/deliveries", "rule=x", "rule");
  check_bad_parameter(&c, "/api/v1/alerts/deliveries", "limit=0", "limit");
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(new_group), TEST_CASE(regression),   TEST_CASE(share),     TEST_CASE(rate_limit),
      TEST_CASE(retries),   TEST_CASE(slow_webhook), TEST_CASE(bad_rules),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
