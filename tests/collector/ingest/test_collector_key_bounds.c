/*
 * test_collector_key_bounds.c - what one ingest key may create per window
 * (collector/ingest/key_bounds.h), in the real perf-collector over real
 * HTTP, with hand-made batches of distinct stacks (batch_post.h):
 *  - stacks: past --max-new-stacks, 429 with Retry-After (the seconds left
 *    in the key's window) and a body naming the bound; nothing of that
 *    batch stored (exact stack and event counts); another key unaffected;
 *    stacks stored before are not new; /metrics counts the refusal; after
 *    the window the same batch is accepted; one batch alone over the
 *    bound is 413 (it can never be stored);
 *  - labels_versions_tags: the same for event labels, app versions and
 *    resource tags, each naming its own bound;
 *  - loop_names: the loop stats' loop names count as labels, apart from a
 *    label of the same text;
 *  - concurrent: 8 threads post 8 batches of 5 new stacks at once under a
 *    bound of 20: exactly 4 are stored, 4 refused;
 *  - sdk_uploader_waits: the SDK's uploader (real spool, real libcurl
 *    transport) sends two batches of 5 new stacks under a bound of 5: the
 *    second gets one 429, stays in the spool, is sent again once the
 *    window is over (not on its 50 ms backoff) and stored: both batches'
 *    stacks and events, exactly.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "perf_sdk.h"
#include "sdk/base/stats.h"
#include "sdk/wire/spool.h"
#include "tempdir.h"
#include "uploader/transport.h"
#include "uploader/uploader.h"

#define SECOND_KEY "second-key"

static long post_distinct(const collector_t *c, const char *key, const distinct_batch_t *spec,
                          unsigned seed, reply_t *r) {
  payload_t p;
  batch_distinct_payload(&p, spec, seed);
  long status = payload_post(c, key, &p, r);
  free(p.data);
  return status;
}

static void post_expect(const collector_t *c, const char *key, const distinct_batch_t *spec,
                        unsigned seed, long want, const char *body_has) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long status = post_distinct(c, key, spec, seed, r);
  CHECKF(status == want, "batch %u -> %ld (want %ld) %.300s", seed, status, want, r->body);
  CHECKF(!body_has || strstr(r->body, body_has), "batch %u: body '%.300s' lacks '%s'", seed,
         r->body, body_has);
  free(r);
}

static long long stacks_stored(const collector_t *c) {
  return db_count(c->db, "SELECT count(*) FROM stacks");
}

static long long events_stored(const collector_t *c) {
  return db_count(c->db, "SELECT count(*) FROM events");
}

static long long refused(const collector_t *c, const char *reason) {
  char name[128];
  snprintf(name, sizeof name, "perf_collector_batches_rejected_total{reason=\"%s\"}", reason);
  return metric(c, name);
}

/* A 429 for spec: its Retry-After, in 1..window seconds. */
static long refused_retry_after(const collector_t *c, const distinct_batch_t *spec, unsigned seed,
                                long window, const char *body_has) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long status = post_distinct(c, GOOD_KEY, spec, seed, r);
  CHECKF(status == 429, "batch %u -> %ld %.300s", seed, status, r->body);
  CHECKF(strstr(r->body, body_has), "429 body '%.300s' lacks '%s'", r->body, body_has);
  char *end;
  long after = strtol(r->retry_after, &end, 10);
  CHECKF(end != r->retry_after && *end == '\0' && after >= 1 && after <= window,
         "Retry-After '%s' not in 1..%ld", r->retry_after, window);
  free(r);
  return after;
}

static void case_stacks(void) {
  collector_t c;
  collector_start(&c, (const char *const[]){"--max-new-stacks", "10", "--new-window", "8",
                                            "--rate-limit", "0", NULL});
  distinct_batch_t a = {.app = "flood", .version = "1.0", .prefix = "a", .n = 6};
  distinct_batch_t b = a, big = a;
  b.prefix = "b";
  big.prefix = "big", big.n = 11;
  post_expect(&c, GOOD_KEY, &a, 1, 200, "stored");
  CHECK_EQ_INT(stacks_stored(&c), 6);
  double refused_at = now_s();
  long after = refused_retry_after(&c, &b, 2, 8,
                                   "new stacks over the bound for this API key: 6 in this batch, "
                                   "6 created in this window (--max-new-stacks 10)");
  CHECK_EQ_INT(stacks_stored(&c), 6);
  CHECK_EQ_INT(events_stored(&c), 1);
  CHECK_EQ_INT(refused(&c, "new_stacks"), 1);
  /* Another key has its own window; stacks stored before are not new. */
  post_expect(&c, SECOND_KEY, &b, 3, 200, "stored");
  CHECK_EQ_INT(stacks_stored(&c), 12);
  distinct_batch_t again = a;
  post_expect(&c, GOOD_KEY, &again, 4, 200, "stored");
  CHECK_EQ_INT(stacks_stored(&c), 12);
  CHECK_EQ_INT(events_stored(&c), 3);
  /* One batch over the bound by itself can never be stored. */
  post_expect(&c, GOOD_KEY, &big, 5, 413,
              "batch creates 11 new stacks, more than "
              "--max-new-stacks 10 allows");
  CHECK_EQ_INT(refused(&c, "new_stacks"), 2);
  /* After Retry-After the window is over: the batch refused is taken. */
  distinct_batch_t c6 = a;
  c6.prefix = "c";
  while (now_s() < refused_at + (double)after)
    usleep(50000);
  post_expect(&c, GOOD_KEY, &c6, 6, 200, "stored");
  CHECK_EQ_INT(stacks_stored(&c), 18);
  CHECK_EQ_INT(events_stored(&c), 4);
  collector_stop_healthy(&c);
}

static void case_labels_versions_tags(void) {
  collector_t c;
  collector_start(&c, (const char *const[]){"--max-new-labels", "2", "--max-new-versions", "2",
                                            "--max-new-tags", "2", "--new-window", "600",
                                            "--rate-limit", "0", NULL});
  distinct_batch_t s = {.app = "shop", .version = "1.0", .prefix = "f", .n = 1};
  s.label = "checkout";
  post_expect(&c, GOOD_KEY, &s, 1, 200, "stored");
  s.label = "search";
  post_expect(&c, GOOD_KEY, &s, 2, 200, "stored");
  s.label = "login";
  refused_retry_after(&c, &s, 3, 600,
                      "new labels or loop names over the bound for this API key: 1 in this "
                      "batch, 2 created in this window (--max-new-labels 2)");
  s.label = "checkout"; /* known: not new */
  s.version = "1.1";
  post_expect(&c, GOOD_KEY, &s, 4, 200, "stored");
  s.version = "1.2";
  refused_retry_after(&c, &s, 5, 600,
                      "new versions over the bound for this API key: 1 in this "
                      "batch, 2 created in this window (--max-new-versions 2)");
  s.version = "1.0";
  s.tag_key = "region", s.tag_value = "eu";
  post_expect(&c, GOOD_KEY, &s, 6, 200, "stored");
  s.tag_value = "us";
  post_expect(&c, GOOD_KEY, &s, 7, 200, "stored");
  s.tag_value = "ap";
  refused_retry_after(&c, &s, 8, 600,
                      "new tags over the bound for this API key: 1 in this "
                      "batch, 2 created in this window (--max-new-tags 2)");
  CHECK_EQ_INT(events_stored(&c), 5);
  CHECK_EQ_INT(refused(&c, "new_labels"), 1);
  CHECK_EQ_INT(refused(&c, "new_versions"), 1);
  CHECK_EQ_INT(refused(&c, "new_tags"), 1);
  s.tag_value = "ap"; /* another key */
  post_expect(&c, SECOND_KEY, &s, 9, 200, "stored");
  CHECK_EQ_INT(events_stored(&c), 6);
  collector_stop_healthy(&c);
}

/* Loop names are labels too (each a rollup dimension): the loop stats'
   names of a batch count against --max-new-labels, apart from a label of
   the same text, and a loop name stored before is not new. */
static void case_loop_names(void) {
  collector_t c;
  collector_start(&c, (const char *const[]){"--max-new-labels", "3", "--new-window", "600",
                                            "--rate-limit", "0", NULL});
  distinct_batch_t s = {.app = "shop", .version = "1.0", .prefix = "f", .n = 1, .label = "main"};
  post_expect(&c, GOOD_KEY, &s, 1, 200, "stored"); /* the label "main" */
  Perf__V1__LoopStats named[2] = {PERF__V1__LOOP_STATS__INIT, PERF__V1__LOOP_STATS__INIT};
  Perf__V1__LoopStats *loops[] = {&named[0], &named[1]};
  named[0].loop = "main", named[0].watched_nanos = 1000000000;
  named[1].loop = "worker-1", named[1].watched_nanos = 1000000000;
  loop_batch_t lb = {"shop", "1.0", "prod", 2000000000, 0, NULL, 0, 0, 0, 0};
  reply_t *r = calloc(1, sizeof *r);
  CHECK(r != NULL);
  long status = batch_post_loops(&c, &lb, loops, 2, 2, r); /* loops main and worker-1: new */
  CHECKF(status == 200, "-> %ld %.*s", status, (int)r->body_len, r->body);
  named[1].loop = "worker-2";
  status = batch_post_loops(&c, &lb, loops, 2, 3, r);
  CHECKF(status == 429 && strstr(r->body, "new labels or loop names over the bound for this API "
                                          "key: 1 in this batch, 3 created in this window "
                                          "(--max-new-labels 3)"),
         "-> %ld %.*s", status, (int)r->body_len, r->body);
  named[1].loop = "worker-1"; /* both stored before */
  status = batch_post_loops(&c, &lb, loops, 2, 4, r);
  CHECKF(status == 200, "-> %ld %.*s", status, (int)r->body_len, r->body);
  free(r);
  CHECK_EQ_INT(refused(&c, "new_labels"), 1);
  CHECK_EQ_INT(db_count(c.db, "SELECT count(*) FROM batches"), 3);
  collector_stop_healthy(&c);
}

#define THREADS 8

typedef struct poster_s {
  const collector_t *c;
  unsigned seed;
  long status;
} poster_t;

static void *post_thread(void *arg) {
  poster_t *p = arg;
  char prefix[16];
  snprintf(prefix, sizeof prefix, "t%u", p->seed);
  distinct_batch_t spec = {.app = "flood", .version = "1.0", .prefix = prefix, .n = 5};
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  p->status = post_distinct(p->c, GOOD_KEY, &spec, p->seed, r);
  free(r);
  return NULL;
}

static void case_concurrent(void) {
  collector_t c;
  collector_start(&c, (const char *const[]){"--max-new-stacks", "20", "--new-window", "600",
                                            "--rate-limit", "0", "--threads", "4", NULL});
  poster_t p[THREADS];
  pthread_t t[THREADS];
  for (unsigned i = 0; i < THREADS; i++) {
    p[i] = (poster_t){&c, 100 + i, 0};
    CHECK(pthread_create(&t[i], NULL, post_thread, &p[i]) == 0);
  }
  int ok = 0, limited = 0;
  for (unsigned i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    ok += p[i].status == 200;
    limited += p[i].status == 429;
  }
  CHECK_EQ_INT(ok, 4);
  CHECK_EQ_INT(limited, 4);
  CHECK_EQ_INT(stacks_stored(&c), 20);
  CHECK_EQ_INT(events_stored(&c), 4);
  CHECK_EQ_INT(refused(&c, "new_stacks"), 4);
  collector_stop_healthy(&c);
}

/* spec's batch into the spool as the SDK's writer leaves it. */
static void spool_distinct(perf__spool_t *sp, const distinct_batch_t *spec, unsigned seed) {
  payload_t p;
  batch_distinct_payload(&p, spec, seed);
  uint8_t id[16];
  for (int i = 0; i < 16; i++)
    CHECK(sscanf(p.id_hex + 2 * i, "%2hhx", &id[i]) == 1);
  CHECK_EQ_INT(perf__spool_put(sp, id, p.data, p.len, NULL), PERF_OK);
  free(p.data);
}

static void case_sdk_uploader_waits(void) {
  collector_t c;
  collector_start(&c, (const char *const[]){"--max-new-stacks", "5", "--new-window", "6",
                                            "--rate-limit", "0", NULL});
  char dir[64];
  snprintf(dir, sizeof dir, "%s", tempdir_make("perf-key-bounds"));
  perf__spool_options_t so = {dir, 64u << 20, 1000, 0, NULL, NULL};
  perf__spool_t *sp = NULL;
  CHECK_EQ_INT(perf__spool_open(&so, &sp), PERF_OK);
  distinct_batch_t a = {.app = "flood", .version = "1.0", .prefix = "a", .n = 5};
  distinct_batch_t b = a;
  b.prefix = "b";
  spool_distinct(sp, &a, 1);
  spool_distinct(sp, &b, 2);
  perf__curl_options_t co = {2000, 5000, true, NULL};
  perf__transport_t *t = NULL;
  CHECK_EQ_INT(perf__curl_transport_new(&co, &t), PERF_OK);
  perf__stats_t stats;
  memset(&stats, 0, sizeof stats);
  perf__uploader_options_t uo = {c.url, GOOD_KEY, sp, t, 50, 400, 3, &stats, 0};
  perf__uploader_t *up = NULL;
  double t0 = now_s();
  CHECK_EQ_INT(perf__uploader_start(&uo, &up), PERF_OK);
  perf__spool_stats_t st = {0};
  for (double end = t0 + 30; now_s() < end; usleep(20000)) {
    perf__spool_stats(sp, &st);
    if (st.files == 0) break;
  }
  double took = now_s() - t0;
  CHECKF(st.files == 0, "%llu batches still in the spool", (unsigned long long)st.files);
  /* The window began at batch a (after t0) and lasts 6 s: b waited it out. */
  CHECKF(took >= 6.0, "the spool emptied %.2f s after the start, before the window's end", took);
  CHECK_EQ_INT(atomic_load(&stats.batches_sent), 2);
  CHECK_EQ_INT(atomic_load(&stats.batches_rejected), 0);
  CHECK_EQ_INT(refused(&c, "new_stacks"), 1); /* one 429, then Retry-After waited */
  CHECK_EQ_INT(stacks_stored(&c), 10);
  CHECK_EQ_INT(events_stored(&c), 2);
  perf__uploader_stop(up);
  perf__spool_close(sp);
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(stacks),     TEST_CASE(labels_versions_tags), TEST_CASE(loop_names),
      TEST_CASE(concurrent), TEST_CASE(sdk_uploader_waits),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
