/*
 * test_wire.c - the SDK's wire path end to end: perf_sdk_init with
 * sink = http against a real HTTP server on 127.0.0.1 (tests/http_server.c);
 * events become zstd protobuf batches, go through the disk spool and the
 * uploader, and are decoded back from what the server received. Also: a
 * collector that is down at shutdown (the batch waits on disk and the next
 * run sends it), and the batch records the file sink writes beside its
 * report; and perf_sdk_capture_now leaving the SDK's own threads (the
 * uploader's too) out of the event. Each case runs in its own process:
 * `test_wire <case>`.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "http_server.h"
#include "perf_sdk.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/spool.h"
#include "tempdir.h"
#include "test_util.h"

#define DECODE_MAX (64u << 20)

static char g_dir[64];

static void make_dir(void) {
  snprintf(g_dir, sizeof g_dir, "%s", tempdir_make("perf-wire"));
}

static void http_config(perf_sdk_config_t *cfg, const char *endpoint, char *data_dir) {
  perf_sdk_config_init(cfg);
  cfg->app_name = "wire-test";
  cfg->app_version = "9.9.9";
  cfg->sink = PERF_SINK_HTTP;
  cfg->endpoint = endpoint;
  cfg->api_key = "k-123";
  snprintf(data_dir, 128, "%s/data", g_dir);
  cfg->data_dir = data_dir;
  cfg->batch_max_delay_ms = 200;
  cfg->backoff_base_ms = 50;
  cfg->backoff_cap_ms = 200;
  cfg->request_timeout_ms = 2000;
}

static CHAIN int wire_capture_inner(const char *reason) {
  return perf_sdk_capture_now(reason) + 1;
}
static CHAIN int wire_capture_outer(const char *reason) {
  return wire_capture_inner(reason) + 1;
}

/* Every event in every batch the server received, by reason. */
static size_t count_events(http_server_t *srv, const char *reason, bool *saw_function) {
  size_t n = 0;
  for (size_t i = 0; i < http_server_request_count(srv); i++) {
    http_request_t q;
    CHECK(http_server_request(srv, i, &q));
    Perf__V1__Batch *b = NULL;
    CHECKF(perf__batch_decode(q.body, q.body_len, DECODE_MAX, &b) == PERF_OK,
           "request %zu does not decode", i);
    CHECK(strcmp(b->resource->app_name, "wire-test") == 0);
    CHECK(strcmp(b->resource->app_version, "9.9.9") == 0);
    for (size_t e = 0; e < b->n_events; e++)
      if (strcmp(b->events[e]->reason, reason) == 0) n++;
    for (size_t f = 0; saw_function && f < b->n_functions; f++)
      if (strcmp(b->strings[b->functions[f]->name], "wire_capture_inner") == 0)
        *saw_function = true;
    perf__v1__batch__free_unpacked(b, NULL);
    http_request_free(&q);
  }
  return n;
}

static void case_http_sink_delivers(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  perf_sdk_config_t cfg;
  char data_dir[128];
  http_config(&cfg, http_server_url(srv), data_dir);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  for (int i = 0; i < 3; i++)
    CHECK_EQ_INT(wire_capture_outer("delivered"), 2);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK(st.batches_written >= 1);
  CHECK_EQ_INT(st.batches_sent, st.batches_written);
  CHECK_EQ_INT(st.spool_files, 0);
  bool named = false;
  CHECK_EQ_INT(count_events(srv, "delivered", &named), 3);
  CHECK(named); /* symbolized on the device: the caller's frames are named */
  http_request_t q;
  CHECK(http_server_request(srv, 0, &q));
  CHECK(strcmp(q.path, "/v1/batches") == 0);
  CHECK(strcmp(http_request_header(&q, "Authorization"), "Bearer k-123") == 0);
  CHECK(strcmp(http_request_header(&q, "Content-Encoding"), "zstd") == 0);
  CHECK(strlen(http_request_header(&q, "X-Perf-Batch-Id")) == 32);
  http_request_free(&q);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  http_server_stop(srv);
}

/* ---- the SDK's own threads are not the app's --------------------------- */

static const char *const k_sdk_threads[] = {"perf-writer", "perf-uploader", "perf-hang-mon",
                                            "perf-cpu-mon"};

/* An app thread that waits (in the kernel) until released. */
static int g_helper_pipe[2];
static atomic_int g_helper_tid;

static void *helper_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "app-helper");
  atomic_store(&g_helper_tid, (int)syscall(SYS_gettid));
  char c;
  while (read(g_helper_pipe[0], &c, 1) < 0 && errno == EINTR) {
  }
  return NULL;
}

/* The event with `reason` among the server's batches; its threads' tids and
   names into tids/names (n of them). */
static size_t event_threads(http_server_t *srv, const char *reason, pid_t *tids, char (*names)[16],
                            size_t max) {
  size_t n = 0, events = 0;
  for (size_t i = 0; i < http_server_request_count(srv); i++) {
    http_request_t q;
    CHECK(http_server_request(srv, i, &q));
    Perf__V1__Batch *b = NULL;
    CHECK(perf__batch_decode(q.body, q.body_len, DECODE_MAX, &b) == PERF_OK);
    for (size_t e = 0; e < b->n_events; e++) {
      if (strcmp(b->events[e]->reason, reason) != 0) continue;
      events++;
      for (size_t t = 0; t < b->events[e]->n_threads && n < max; t++, n++) {
        tids[n] = (pid_t)b->events[e]->threads[t]->tid;
        snprintf(names[n], sizeof names[n], "%s", b->strings[b->events[e]->threads[t]->name]);
      }
    }
    perf__v1__batch__free_unpacked(b, NULL);
    http_request_free(&q);
  }
  CHECK_EQ_INT(events, 1);
  return n;
}

static void case_capture_now_leaves_out_sdk_threads(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  perf_sdk_config_t cfg;
  char data_dir[128];
  http_config(&cfg, http_server_url(srv), data_dir);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK(pipe(g_helper_pipe) == 0);
  pthread_t helper;
  CHECK(pthread_create(&helper, NULL, helper_main, NULL) == 0);
  /* Every SDK thread is running (the uploader starts on the writer's
     thread, after init returned), and so is the app's helper. */
  pid_t sdk_tids[ARRAY_LEN(k_sdk_threads)];
  int64_t deadline = now_ms() + 10000;
  for (size_t i = 0; i < ARRAY_LEN(k_sdk_threads); i++) {
    while ((sdk_tids[i] = thread_named(k_sdk_threads[i])) == 0) {
      CHECKF(now_ms() < deadline, "no thread named %s", k_sdk_threads[i]);
      usleep(1000);
    }
  }
  while (atomic_load(&g_helper_tid) == 0) {
    CHECKF(now_ms() < deadline, "the helper thread did not start");
    usleep(1000);
  }
  CHECK_EQ_INT(wire_capture_outer("every app thread"), 2);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);

  pid_t tids[64];
  char names[64][16];
  size_t n = event_threads(srv, "every app thread", tids, names, ARRAY_LEN(tids));
  bool saw_main = false, saw_helper = false;
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < ARRAY_LEN(k_sdk_threads); k++) {
      CHECKF(strcmp(names[i], k_sdk_threads[k]) != 0, "SDK thread %s (%d) in the event", names[i],
             (int)tids[i]);
      CHECKF(tids[i] != sdk_tids[k], "SDK thread %d (%s) in the event as %s", (int)tids[i],
             k_sdk_threads[k], names[i]);
    }
    saw_main |= tids[i] == getpid();
    saw_helper |= tids[i] == atomic_load(&g_helper_tid) && strcmp(names[i], "app-helper") == 0;
  }
  CHECKF(saw_main, "the calling (main) thread is missing from %zu threads", n);
  CHECKF(saw_helper, "the app-helper thread is missing from %zu threads", n);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK(write(g_helper_pipe[1], "x", 1) == 1);
  pthread_join(helper, NULL);
  close(g_helper_pipe[0]);
  close(g_helper_pipe[1]);
  http_server_stop(srv);
}

static void case_down_at_shutdown_sent_next_run(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  uint16_t port = http_server_port(srv);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)port);
  http_server_stop(srv); /* the collector is down for the whole first run */
  perf_sdk_config_t cfg;
  char data_dir[128];
  http_config(&cfg, url, data_dir);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(wire_capture_outer("first run"), 2);
  CHECK_EQ_INT(perf_sdk_flush(800), PERF_E_DEADLINE); /* written, not sent */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_OK);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  CHECKF(ms < 1500, "shutdown(1000) took %ld ms", ms);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.batches_sent, 0);
  CHECK_EQ_INT(st.spool_files, 1); /* waiting on disk */

  /* Next run, collector up: the batch left on disk is sent, once. */
  CHECK((srv = http_server_start_on_port(port)) != NULL);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  CHECK_EQ_INT(count_events(srv, "first run", NULL), 1);
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.spool_files, 0);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(count_events(srv, "first run", NULL), 1); /* nothing twice */
  http_server_stop(srv);
}

static void case_file_sink_batches(void) {
  make_dir();
  char report[128], spool_dir[160];
  snprintf(report, sizeof report, "%s/report.txt", g_dir);
  snprintf(spool_dir, sizeof spool_dir, "%s.batches", report);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = report;
  char data_dir[128];
  snprintf(data_dir, sizeof data_dir, "%s/data", g_dir);
  cfg.data_dir = data_dir;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(wire_capture_outer("to a file"), 2);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  /* The same event as a batch record beside the text report. */
  perf__spool_options_t so = {spool_dir, 1u << 24, 100, 0, NULL, NULL};
  perf__spool_t *sp = NULL;
  CHECK_EQ_INT(perf__spool_open(&so, &sp), PERF_OK);
  perf__spool_entry_t e;
  CHECK_EQ_INT(perf__spool_peek_oldest(sp, &e), PERF_OK);
  uint8_t *payload = NULL;
  size_t len = 0;
  CHECK_EQ_INT(perf__spool_read(sp, &e, &payload, &len), PERF_OK);
  /* Kept uncompressed (docs/protocol.md, "Batches at rest"): the
     serialized batch itself. */
  Perf__V1__Batch *b = NULL;
  CHECK_EQ_INT(perf__batch_decode_uncompressed(payload, len, &b), PERF_OK);
  CHECK_EQ_INT(b->n_events, 1);
  CHECK(strcmp(b->events[0]->reason, "to a file") == 0);
  perf__v1__batch__free_unpacked(b, NULL);
  free(payload);
  perf__spool_close(sp);
}

/* ---- kill -9 while writing batches -------------------------------------- */

/* Child: the SDK with the collector down; every event is its own batch
   (flush); once its batch is in the spool its reason goes to stdout. */
static void child_writer(const char *dir, const char *url) {
  snprintf(g_dir, sizeof g_dir, "%s", dir);
  perf_sdk_config_t cfg;
  char data_dir[128];
  http_config(&cfg, url, data_dir);
  cfg.backoff_base_ms = 5000; /* the collector is down: no point trying often */
  cfg.backoff_cap_ms = 5000;
  cfg.spool_max_files = 65536;      /* 50 rounds write over a thousand batches: keep them all */
  cfg.max_events_per_hour = 100000; /* a round writes up to a hundred: never rate limited */
  if (perf_sdk_init(&cfg) != PERF_OK) exit(3);
  char reason[64];
  for (unsigned n = 0;; n++) {
    snprintf(reason, sizeof reason, "pid %d event %u", (int)getpid(), n);
    perf_sdk_stats_t before, after;
    perf_sdk_get_stats(&before);
    int got = wire_capture_outer(reason);
    if (got != 2) {
      fprintf(stderr, "child_writer: perf_sdk_capture_now: %s\n", perf_strerror(got - 2));
      exit(4);
    }
    perf_sdk_flush(1); /* puts the batch in the spool; sending would time out */
    /* events_written: its batch is in the spool (batches_written would
       also count the batch replayed from the journal the previous child
       left, put by this one's writer at its start). */
    do
      perf_sdk_get_stats(&after);
    while (after.events_written == before.events_written);
    printf("%s\n", reason);
    fflush(stdout);
    usleep(1000); /* about a thousand batches over the 50 rounds */
  }
}

/* The reasons of every event the server received (malloc'd strings). */
static char **received_reasons(http_server_t *srv, size_t *n) {
  size_t cap = 1024;
  char **out = malloc(cap * sizeof *out);
  CHECK(out != NULL);
  *n = 0;
  for (size_t i = 0; i < http_server_request_count(srv); i++) {
    http_request_t q;
    CHECK(http_server_request(srv, i, &q));
    Perf__V1__Batch *b = NULL;
    CHECKF(perf__batch_decode(q.body, q.body_len, DECODE_MAX, &b) == PERF_OK,
           "request %zu does not decode", i);
    for (size_t e = 0; e < b->n_events; e++) {
      if (*n == cap) CHECK((out = realloc(out, (cap *= 2) * sizeof *out)) != NULL);
      CHECK((out[(*n)++] = strdup(b->events[e]->reason)) != NULL);
    }
    perf__v1__batch__free_unpacked(b, NULL);
    http_request_free(&q);
  }
  return out;
}

static void case_kill9_rounds(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  uint16_t port = http_server_port(srv);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)port);
  http_server_stop(srv); /* down while the children write */
  unsigned seed = (unsigned)time(NULL);
  if (getenv("WIRE_TEST_SEED")) seed = (unsigned)atoi(getenv("WIRE_TEST_SEED"));
  srand(seed);
  static char reported[4096][64];
  size_t n_reported = 0;
  for (int round = 0; round < 50; round++) {
    int out[2];
    CHECK(pipe(out) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      dup2(out[1], 1);
      close(out[0]);
      execl("/proc/self/exe", "test_wire", "child_writer", g_dir, url, (char *)NULL);
      _exit(5);
    }
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    CHECK(f != NULL);
    /* Let it get going (its first batch is on disk), then kill it at a
       random point of its work. */
    char line[64];
    bool first = fgets(line, sizeof line, f) != NULL;
    usleep((useconds_t)(rand() % 50) * 1000);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    CHECKF(first, "round %d: the child reported nothing (status %d); seed %u", round, status, seed);
    CHECKF(WIFSIGNALED(status), "round %d: child ended by itself (%d); seed %u", round, status,
           seed);
    do {
      line[strcspn(line, "\n")] = '\0';
      if (n_reported < ARRAY_LEN(reported))
        snprintf(reported[n_reported++], sizeof reported[0], "%s", line);
    } while (fgets(line, sizeof line, f));
    fclose(f);
  }
  CHECKF(n_reported >= 50, "only %zu batches reported in 50 rounds; seed %u", n_reported, seed);
  /* The collector is up; the next run adopts the spool and sends it all. */
  CHECK((srv = http_server_start_on_port(port)) != NULL);
  perf_sdk_config_t cfg;
  char data_dir[128];
  http_config(&cfg, url, data_dir);
  cfg.spool_max_files = 65536;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECKF(perf_sdk_flush(60000) == PERF_OK, "spool not emptied; seed %u", seed);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.batches_evicted, 0);
  /* Every reported batch delivered exactly once: all events received,
     decoded once, sorted, then each reported reason counted. */
  size_t n_received = 0;
  char **received = received_reasons(srv, &n_received);
  for (size_t i = 0; i < n_reported; i++) {
    size_t times = 0;
    for (size_t j = 0; j < n_received; j++)
      times += strcmp(received[j], reported[i]) == 0;
    CHECKF(times == 1, "'%s' delivered %zu times; seed %u", reported[i], times, seed);
  }
  for (size_t j = 0; j < n_received; j++)
    free(received[j]);
  free(received);
  http_server_stop(srv);
}

static const test_case_t g_cases[] = {
    TEST_CASE(http_sink_delivers),
    TEST_CASE(down_at_shutdown_sent_next_run),
    TEST_CASE(file_sink_batches),
    TEST_CASE(kill9_rounds),
    TEST_CASE(capture_now_leaves_out_sdk_threads),
};

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "child_writer") == 0) child_writer(argv[2], argv[3]);
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
