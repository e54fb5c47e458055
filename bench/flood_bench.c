/*
 * flood_bench.c - the collector's reads over a store flooded with distinct
 * stacks, against the same reads over an honest store in the same run.
 *
 * An ingest key ships inside every app, so anyone may send valid batches
 * of stacks never seen before. The bench starts the real perf-collector
 * (temp SQLite db, or PostgreSQL with --pg-socket; --rate-limit 0 and
 * --new-window 0: no per-key bounds, so the flood gets in as it would
 * over many hours under the bounds), stores an honest profile (--base
 * distinct stacks, default 200) and times each read (median of 3):
 * GET /api/v1/flame, /api/v1/top-stacks and /api/v1/export/pprof, kind=cpu.
 * Then it floods --stacks distinct stacks (default 100000, in batches of
 * 5000 through the real HTTP ingest, one frame each: the cheapest flood to
 * send) and times the same reads again, then /healthz and one small ingest
 * while 4 flame reads run at once. Ratios: flooded / honest.
 * --default-bounds: the collector keeps its per-key bounds (20000 new
 * stacks per hour): the flood is refused past them (429), and the reads
 * are timed over what got in.
 * --during S: instead of a flood of --stacks, a client floods for S
 * seconds (batches of 5000 new stacks, each sent as soon as the last was
 * answered) while each read is timed again and again; then the reads are
 * timed after it (median of 3). Every read's longest time during the
 * flood is what a dashboard waits at worst.
 *
 * Not a test: prints figures, exits 0 (non-zero only when it cannot run).
 *
 *   flood_bench [--stacks N | --during S] [--base N] [--pg-socket DIR] [--default-bounds]
 */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"

#define FLOOD_BATCH 5000
#define RUNS 3
#define READERS 4

static const char *const READS[] = {
    "/api/v1/flame?kind=cpu",
    "/api/v1/top-stacks?kind=cpu",
    "/api/v1/export/pprof?kind=cpu",
    "/api/v1/export/folded?kind=cpu",
};
#define N_READS (sizeof READS / sizeof READS[0])

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* GET path: its seconds; *status and *bytes of the answer. */
static double timed_get(const collector_t *c, const char *path, long *status, size_t *bytes) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  double t0 = now_s();
  *status = get_key(c, GOOD_KEY, path, r);
  double took = now_s() - t0;
  *bytes = r->total_len;
  free(r);
  return took;
}

/* The median of RUNS reads; a read without a 200 (the rig's client gives
   up after 30 s) is said and ends the runs. */
static double median_get(const collector_t *c, const char *path, size_t *bytes) {
  double t[RUNS];
  for (int i = 0; i < RUNS; i++) {
    long status;
    t[i] = timed_get(c, path, &status, bytes);
    if (status != 200) {
      printf("%s -> %ld after %.1f s\n", path, status, t[i]);
      return t[i];
    }
  }
  qsort(t, RUNS, sizeof t[0], cmp_double);
  return t[RUNS / 2];
}

static size_t g_refused; /* batches refused by the key's bounds (--default-bounds) */

/* n distinct stacks from `first` on, in batches of FLOOD_BATCH. */
static void post_stacks(const collector_t *c, const char *prefix, size_t first, size_t n,
                        unsigned *seed) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  for (size_t done = 0; done < n;) {
    size_t k = n - done < FLOOD_BATCH ? n - done : FLOOD_BATCH;
    distinct_batch_t spec = {
        .app = "flood", .version = "1.0", .prefix = prefix, .first = first + done, .n = k};
    payload_t p;
    batch_distinct_payload(&p, &spec, (*seed)++);
    long status = payload_post(c, GOOD_KEY, &p, r);
    free(p.data);
    g_refused += status == 429;
    CHECKF(status == 200 || status == 429, "flood batch -> %ld %.200s", status, r->body);
    done += k;
  }
  free(r);
}

static void time_reads(const collector_t *c, double out[N_READS], size_t bytes[N_READS]) {
  for (size_t i = 0; i < N_READS; i++)
    out[i] = median_get(c, READS[i], &bytes[i]);
}

typedef struct reader_s {
  const collector_t *c;
  double took;
} reader_t;

static void *flame_reader(void *arg) {
  reader_t *rd = arg;
  long status;
  size_t bytes;
  rd->took = timed_get(rd->c, READS[0], &status, &bytes);
  return NULL;
}

/* /healthz and one small batch while READERS flame reads run. */
static void under_readers(const collector_t *c, unsigned *seed) {
  pthread_t t[READERS];
  reader_t rd[READERS];
  for (int i = 0; i < READERS; i++) {
    rd[i] = (reader_t){c, 0};
    CHECK(pthread_create(&t[i], NULL, flame_reader, &rd[i]) == 0);
  }
  usleep(50000); /* the readers are in */
  long status;
  size_t bytes;
  double health = timed_get(c, "/healthz", &status, &bytes);
  double t0 = now_s();
  post_stacks(c, "late", 0, 10, seed);
  double ingest = now_s() - t0;
  double slowest = 0;
  for (int i = 0; i < READERS; i++) {
    pthread_join(t[i], NULL);
    if (rd[i].took > slowest) slowest = rd[i].took;
  }
  printf("under %d concurrent flame reads (slowest %.3f s): /healthz %.3f s, a 10-stack "
         "ingest %.3f s\n",
         READERS, slowest, health, ingest);
}

/* The flood of --during: batches of FLOOD_BATCH new stacks, back to back,
   until stop. */
typedef struct flooder_s {
  const collector_t *c;
  volatile int stop;
  size_t sent;
  unsigned seed;
} flooder_t;

static void *flood_thread(void *arg) {
  flooder_t *f = arg;
  while (!f->stop) {
    post_stacks(f->c, "live", f->sent, FLOOD_BATCH, &f->seed);
    f->sent += FLOOD_BATCH;
  }
  return NULL;
}

/* Each read again and again while a client floods for `seconds`, then the
   same reads after it; honest: the reads' times before. */
static void during_flood(const collector_t *c, double seconds, const double honest[N_READS]) {
  flooder_t f = {c, 0, 0, 100000};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, flood_thread, &f) == 0);
  double worst[N_READS] = {0}, sum[N_READS] = {0};
  size_t runs[N_READS] = {0}, bytes;
  long status;
  double t0 = now_s();
  while (now_s() - t0 < seconds)
    for (size_t i = 0; i < N_READS; i++) {
      double took = timed_get(c, READS[i], &status, &bytes);
      if (status != 200)
        printf("%s -> %ld after %.1f s during the flood\n", READS[i], status, took);
      if (took > worst[i]) worst[i] = took;
      sum[i] += took, runs[i]++;
    }
  f.stop = 1;
  pthread_join(t, NULL);
  double flood_s = now_s() - t0;
  printf("flooded %zu distinct stacks in %.1f s (%.0f stacks/s); %lld stacks stored\n", f.sent,
         flood_s, (double)f.sent / flood_s, db_count(c->db, "SELECT count(*) FROM stacks"));
  double after[N_READS];
  size_t after_bytes[N_READS];
  time_reads(c, after, after_bytes);
  printf("%-32s %10s %8s %12s %12s %10s %12s\n", "read", "honest s", "reads", "during mean",
         "during max", "after s", "after bytes");
  for (size_t i = 0; i < N_READS; i++)
    printf("%-32s %10.4f %8zu %12.4f %12.4f %10.4f %12zu\n", READS[i], honest[i], runs[i],
           sum[i] / (double)runs[i], worst[i], after[i], after_bytes[i]);
}

int main(int argc, char **argv) {
  size_t stacks = 100000, base = 200;
  const char *pg = NULL;
  bool bounds = false;
  double during = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--stacks") == 0 && i + 1 < argc)
      stacks = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--base") == 0 && i + 1 < argc)
      base = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--pg-socket") == 0 && i + 1 < argc)
      pg = argv[++i];
    else if (strcmp(argv[i], "--during") == 0 && i + 1 < argc)
      during = strtod(argv[++i], NULL);
    else if (strcmp(argv[i], "--default-bounds") == 0)
      bounds = true;
    else
      return fprintf(stderr,
                     "usage: flood_bench [--stacks N | --during S] [--base N] [--pg-socket DIR] "
                     "[--default-bounds]\n"),
             2;
  }
  if (pg) setenv("PERF_TEST_DB", "pg", 1), setenv("PERF_TEST_PG_DIR", pg, 1);
  signal(SIGPIPE, SIG_IGN);
  atexit(kill_running);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  collector_t c;
  collector_start(&c, bounds
                          ? (const char *const[]){"--rate-limit", "0", NULL}
                          : (const char *const[]){"--rate-limit", "0", "--new-window", "0", NULL});
  unsigned seed = 1;
  post_stacks(&c, "honest", 0, base, &seed);
  double honest[N_READS], flooded[N_READS];
  size_t honest_bytes[N_READS], flooded_bytes[N_READS];
  time_reads(&c, honest, honest_bytes);
  if (during > 0) {
    printf("%s: %zu honest stacks, then a flood for %.0f s\n", pg ? "PostgreSQL" : "SQLite", base,
           during);
    during_flood(&c, during, honest);
    collector_stop_healthy(&c);
    return 0;
  }
  double t0 = now_s();
  post_stacks(&c, "flood", 0, stacks, &seed);
  double flood_s = now_s() - t0;
  printf("%s: %zu honest stacks, then %zu distinct stacks flooded in %.1f s (%.0f stacks/s)\n",
         pg ? "PostgreSQL" : "SQLite", base, stacks, flood_s, (double)stacks / flood_s);
  printf("per-key bounds %s: %lld stacks stored, %zu flood batches of %d refused (429)\n",
         bounds ? "at their defaults" : "off (--new-window 0)",
         db_count(c.db, "SELECT count(*) FROM stacks"), g_refused, FLOOD_BATCH);
  time_reads(&c, flooded, flooded_bytes);
  printf("%-32s %12s %12s %10s %12s\n", "read (median of 3)", "honest s", "flooded s", "ratio",
         "flooded bytes");
  for (size_t i = 0; i < N_READS; i++)
    printf("%-32s %12.4f %12.4f %9.1fx %12zu\n", READS[i], honest[i], flooded[i],
           flooded[i] / honest[i], flooded_bytes[i]);
  under_readers(&c, &seed);
  collector_stop_healthy(&c);
  return 0;
}
