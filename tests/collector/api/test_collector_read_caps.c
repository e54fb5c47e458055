/*
 * test_collector_read_caps.c - the reads over a flood of distinct stacks
 * (one ingest key anyone can take sending stacks never seen before) do
 * bounded work and say so, in the real perf-collector over real HTTP:
 *  - flood: 6000 distinct stacks of one sample each, one more than
 *    STORE_STACK_ROWS_MAX (5000) by 1000: the flame graph has 5000 stacks
 *    plus one <truncated> child holding the other 1000 samples, its root
 *    says "truncated": true and "stacks_omitted": 1000, and its totals stay
 *    exact (6000 samples); the folded export has 5001 lines; pprof 5001
 *    samples summing to 6000; top-stacks lists `limit` groups and says
 *    "groups_total": 6000, "truncated": true;
 *  - honest: a few stacks: nothing omitted, "truncated": false.
 *  - rows: --max-read-rows 500 (store.h STORE_READ_ROWS_MAX's option): 120
 *    honest stacks read whole (exact counts, no "truncated", no
 *    "rows_read"); then 2000 more distinct stacks, four times the limit:
 *    flame, top-stacks, folded and pprof each sum exactly the 500 rows the
 *    store read (one sample each), say "truncated": true with "rows_read"
 *    500 and "rows_limit" 500 (folded: a first "# truncated" line; pprof: a
 *    comment), and the collector reads no more rows than that.
 *  - sums: --max-read-rows 100 (its least): 40 batches of loop stats and
 *    a hang each read whole by timeseries, drops and loops (exact counts,
 *    no "truncated"); then 110 more: each sums the newest 100 rows exactly
 *    and says "truncated": true, "rows_read": 100, "rows_limit": 100.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "pprof_check.h"

#define FLOOD 6000
#define KEPT 5000 /* STORE_STACK_ROWS_MAX */
#define PER_BATCH 3000

static void post_stacks_from(const collector_t *c, const char *prefix, size_t n, unsigned seed) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  for (size_t done = 0; done < n; done += PER_BATCH) {
    distinct_batch_t spec = {.app = "flood",
                             .version = "1.0",
                             .prefix = prefix,
                             .first = done,
                             .n = n - done < PER_BATCH ? n - done : PER_BATCH};
    payload_t p;
    batch_distinct_payload(&p, &spec, seed + (unsigned)(done / PER_BATCH));
    long status = payload_post(c, GOOD_KEY, &p, r);
    free(p.data);
    CHECKF(status == 200, "batch -> %ld %.300s", status, r->body);
  }
  free(r);
}

static void post_stacks(const collector_t *c, const char *prefix, size_t n) {
  post_stacks_from(c, prefix, n, 1);
}

typedef struct body_s {
  char *p;
  size_t len;
} body_t;

static size_t on_body(char *data, size_t size, size_t n, void *arg) {
  body_t *b = arg;
  char *grown = realloc(b->p, b->len + size * n + 1);
  CHECK(grown != NULL);
  memcpy(grown + b->len, data, size * n);
  b->p = grown;
  b->len += size * n;
  b->p[b->len] = '\0';
  return size * n;
}

/* GET path with GOOD_KEY: 200 and the whole body as JSON (the rig's
   replies keep 256 KiB; a flame graph of 5000 stacks is more). */
static json_t *get_whole_json(const collector_t *c, const char *path) {
  char url[256], auth[64];
  snprintf(url, sizeof url, "%s%s", c->url, path);
  snprintf(auth, sizeof auth, "Authorization: Bearer %s", GOOD_KEY);
  CURL *h = curl_easy_init();
  CHECK(h != NULL);
  struct curl_slist *headers = curl_slist_append(NULL, auth);
  body_t b = {NULL, 0};
  long status = 0;
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
  if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(h);
  CHECKF(status == 200 && b.p, "GET %s -> %ld", path, status);
  json_t *o = json_loads(b.p, 0, NULL);
  free(b.p);
  CHECK(json_is_object(o));
  return o;
}

static const json_t *child_named(const json_t *node, const char *name) {
  size_t i;
  const json_t *kid;
  json_array_foreach(json_object_get(node, "children"), i, kid) {
    if (strcmp(json_string_value(json_object_get(kid, "name")), name) == 0) return kid;
  }
  return NULL;
}

/* The flame graph's root: its stacks (children of the module's root frame
   are the leaves here: one frame per stack), samples and truncation. */
static void check_flame(const collector_t *c, long long children, long long omitted,
                        long long samples) {
  json_t *root = get_whole_json(c, "/api/v1/flame?kind=cpu");
  CHECK_EQ_INT(json_integer_value(json_object_get(root, "samples")), samples);
  CHECK(json_is_boolean(json_object_get(root, "truncated")));
  CHECK_EQ_INT(json_is_true(json_object_get(root, "truncated")), omitted > 0);
  CHECK_EQ_INT(json_integer_value(json_object_get(root, "stacks_omitted")), omitted);
  CHECK_EQ_INT((long long)json_array_size(json_object_get(root, "children")), children);
  const json_t *rest = child_named(root, "<truncated>");
  CHECK_EQ_INT(rest != NULL, omitted > 0);
  if (rest) CHECK_EQ_INT(json_integer_value(json_object_get(rest, "samples")), omitted);
  json_decref(root);
}

static long long folded_lines(const collector_t *c) {
  char *text = get_text(c, "/api/v1/export/folded?kind=cpu");
  long long n = 0;
  for (const char *p = text; *p; p++)
    n += *p == '\n';
  free(text);
  return n;
}

static void check_pprof(const collector_t *c, size_t samples, long long total) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get_key(c, GOOD_KEY, "/api/v1/export/pprof?kind=cpu", r), 200);
  CHECKF(r->total_len == r->body_len, "pprof of %zu bytes", r->total_len);
  pprof_profile_t *p = pprof_decode_checked(r->body, r->body_len);
  CHECK_EQ_INT((long long)p->n_sample, (long long)samples);
  CHECK_EQ_INT(pprof_value_total(p, 0), total);
  perftools__profiles__profile__free_unpacked(p, NULL);
  free(r);
}

static void check_top(const collector_t *c, long long listed, long long groups, bool truncated) {
  json_t *o = get_ok(c, "/api/v1/top-stacks?kind=cpu&limit=50");
  CHECK_EQ_INT((long long)json_array_size(json_object_get(o, "stacks")), listed);
  CHECK_EQ_INT(json_integer_value(json_object_get(o, "groups_total")), groups);
  CHECK_EQ_INT(json_is_true(json_object_get(o, "truncated")), truncated);
  json_decref(o);
}

static void case_flood(void) {
  collector_t c;
  collector_start(&c, (const char *const[]){"--rate-limit", "0", NULL});
  post_stacks(&c, "flood", FLOOD);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stacks"), FLOOD);
  check_flame(&c, KEPT + 1, FLOOD - KEPT, FLOOD);
  CHECK_EQ_INT(folded_lines(&c), KEPT + 1);
  check_pprof(&c, KEPT + 1, FLOOD);
  check_top(&c, 50, FLOOD, true);
  collector_stop_healthy(&c);
}

static void case_honest(void) {
  collector_t c;
  collector_start(&c, (const char *const[]){"--rate-limit", "0", NULL});
  post_stacks(&c, "honest", 12);
  check_flame(&c, 12, 0, 12);
  CHECK_EQ_INT(folded_lines(&c), 12);
  check_pprof(&c, 12, 12);
  check_top(&c, 12, 12, false);
  collector_stop_healthy(&c);
}

#define ROWS_LIMIT 500 /* --max-read-rows below */
#define ROWS_HONEST 120
#define ROWS_FLOOD 2000

/* A JSON answer's row fields: absent when the read was whole, else
   rows_read and rows_limit as given. */
static void check_rows(const json_t *o, long long read, long long limit) {
  const json_t *r = json_object_get(o, "rows_read"), *l = json_object_get(o, "rows_limit");
  if (!read) {
    CHECKF(!r && !l, "rows_read %lld in a whole read", (long long)json_integer_value(r));
    return;
  }
  CHECK(json_is_integer(r) && json_is_integer(l));
  CHECK_EQ_INT(json_integer_value(l), limit);
  CHECKF(json_integer_value(r) <= limit, "rows_read %lld over the limit %lld",
         (long long)json_integer_value(r), limit);
  CHECK_EQ_INT(json_integer_value(r), read);
}

/* Every stack read, one sample each: `samples` stacks and samples; read:
   the rows the answers must say were read (0: a whole read). */
static void check_bounded_reads(const collector_t *c, long long samples, long long read) {
  json_t *root = get_whole_json(c, "/api/v1/flame?kind=cpu");
  CHECK_EQ_INT(json_integer_value(json_object_get(root, "samples")), samples);
  CHECK_EQ_INT(json_is_true(json_object_get(root, "truncated")), read > 0);
  CHECK_EQ_INT(json_integer_value(json_object_get(root, "stacks_omitted")), 0);
  CHECK_EQ_INT((long long)json_array_size(json_object_get(root, "children")), samples);
  check_rows(root, read, ROWS_LIMIT);
  json_decref(root);

  json_t *top = get_ok(c, "/api/v1/top-stacks?kind=cpu&limit=1000");
  CHECK_EQ_INT((long long)json_array_size(json_object_get(top, "stacks")), samples);
  CHECK_EQ_INT(json_integer_value(json_object_get(top, "groups_total")), samples);
  CHECK_EQ_INT(json_is_true(json_object_get(top, "truncated")), read > 0);
  check_rows(top, read, ROWS_LIMIT);
  json_decref(top);

  char *text = get_text(c, "/api/v1/export/folded?kind=cpu");
  char first[128];
  snprintf(first, sizeof first, "# truncated: rows_read=%lld rows_limit=%d\n", read, ROWS_LIMIT);
  CHECKF(read ? strncmp(text, first, strlen(first)) == 0 : text[0] != '#', "folded starts %.80s",
         text);
  long long lines = 0;
  for (const char *p = text; *p; p++)
    lines += *p == '\n';
  CHECK_EQ_INT(lines, samples + (read > 0));
  free(text);

  check_pprof(c, (size_t)samples, samples);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get_key(c, GOOD_KEY, "/api/v1/export/pprof?kind=cpu", r), 200);
  pprof_profile_t *p = pprof_decode_checked(r->body, r->body_len);
  snprintf(first, sizeof first, "truncated: rows_read=%lld rows_limit=%d", read, ROWS_LIMIT);
  CHECK_EQ_INT((long long)p->n_comment, read ? 2 : 1);
  if (read) CHECK(strcmp(pprof_string(p, p->comment[1]), first) == 0);
  perftools__profiles__profile__free_unpacked(p, NULL);
  free(r);
}

static void case_rows(void) {
  collector_t c;
  collector_start(&c, (const char *const[]){"--rate-limit", "0", "--max-read-rows", "500", NULL});
  post_stacks_from(&c, "honest", ROWS_HONEST, 1);
  check_bounded_reads(&c, ROWS_HONEST, 0);
  post_stacks_from(&c, "flood", ROWS_FLOOD, 100);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM stacks"), ROWS_HONEST + ROWS_FLOOD);
  check_bounded_reads(&c, ROWS_LIMIT, ROWS_LIMIT);
  collector_stop_healthy(&c);
}

#define SUMS_LIMIT 100 /* --max-read-rows below */

/* n batches of loop stats (an hour watched) and one 100 ms hang each. */
static void post_loop_batches(const collector_t *c, int n, unsigned seed) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  loop_batch_t sp = {.app = "sums",
                     .version = "1.0",
                     .watched_ns = 3600000000000ull,
                     .busy_ns = 60000000000ull,
                     .hangs = 1,
                     .hang_ms = 100};
  for (int i = 0; i < n; i++) {
    long status = batch_post_loop(c, &sp, seed + (unsigned)i, r);
    CHECKF(status == 200 && strstr(r->body, "stored"), "batch -> %ld %.300s", status, r->body);
  }
  free(r);
}

/* A sum's answer: `rows` rows counted in field, cut (said) or whole. */
static void check_sum(const collector_t *c, const char *path, const char *field, long long rows,
                      bool cut) {
  json_t *o = get_ok(c, path);
  const json_t *in = strcmp(path, "/api/v1/loops") == 0 ? json_object_get(o, "loops") : o;
  CHECKF(json_integer_value(json_object_get(in, field)) == rows, "%s: %s %lld, not %lld", path,
         field, (long long)json_integer_value(json_object_get(in, field)), rows);
  CHECK_EQ_INT(json_is_true(json_object_get(in, "truncated")), cut);
  check_rows(in, cut ? rows : 0, SUMS_LIMIT);
  json_decref(o);
}

static long long series_events(const collector_t *c, bool cut) {
  json_t *o = get_ok(c, "/api/v1/timeseries?kind=hang&bucket=day");
  long long n = 0;
  size_t i;
  const json_t *p;
  json_array_foreach(json_object_get(o, "points"), i, p) {
    n += json_integer_value(json_object_get(p, "events"));
  }
  CHECK_EQ_INT(json_is_true(json_object_get(o, "truncated")), cut);
  check_rows(o, cut ? n : 0, SUMS_LIMIT);
  json_decref(o);
  return n;
}

static void case_sums(void) {
  collector_t c;
  collector_start(&c, (const char *const[]){"--rate-limit", "0", "--max-read-rows", "100", NULL});
  post_loop_batches(&c, 40, 1);
  check_sum(&c, "/api/v1/drops", "batches", 40, false);
  check_sum(&c, "/api/v1/loops", "stats_batches", 40, false);
  check_sum(&c, "/api/v1/loops", "hangs", 40, false);
  CHECK_EQ_INT(series_events(&c, false), 40);
  post_loop_batches(&c, 110, 41); /* ids by seed mod 256: 1..150 all differ */
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 150);
  check_sum(&c, "/api/v1/drops", "batches", SUMS_LIMIT, true);
  check_sum(&c, "/api/v1/loops", "stats_batches", SUMS_LIMIT, true);
  check_sum(&c, "/api/v1/loops", "hangs", SUMS_LIMIT, true);
  CHECK_EQ_INT(series_events(&c, true), SUMS_LIMIT);
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(flood),
      TEST_CASE(honest),
      TEST_CASE(rows),
      TEST_CASE(sums),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
