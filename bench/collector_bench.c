/*
 * collector_bench.c - perf-collector's ingest rate and top-stacks query
 * time, against baselines measured in the same run.
 *
 * Batches: made with the SDK's own event builder and batch encoder (zstd,
 * random batch ids) before any timing: per batch 4 hangs of 50 samples (one
 * thread, 100 Hz) each stuck in one of 40 call paths with varying leaves,
 * and 2 CPU bursts of 200 samples over 2 threads; every stack 21-31 frames
 * of real, named functions (this executable's app functions, libc leaves),
 * drawn from 400 distinct stacks. 600 samples per batch.
 *
 * Ingest: the real perf-collector (temp db, default flags but
 * --rate-limit 0) gets every batch over K keep-alive connections (K threads,
 * one curl easy handle each); stored samples/s, checked against the store
 * (sum of stack_counts.samples) at the end. Ceiling: the same bodies over
 * the same K connections into a do-nothing libmicrohttpd handler in this
 * process (internal polling thread + a pool of 4 threads, as the collector)
 * that reads the body and answers 200 (the median of 5 passes).
 *
 * Query: the store filled by the ingest run (>= 1,000,000 samples by
 * default), GET /api/v1/top-stacks?kind=hang and kind=cpu, median of 7.
 *
 * Durability: the first --durability-batches bodies (default 600) into a
 * fresh collector with --durability process and with --durability full
 * (the default), alternating, 5 rounds each; the median batches/s of each
 * and their ratio. The bare commit beneath it: SQLite in WAL mode in this
 * process, one 8 KiB row per transaction, synchronous=NORMAL against FULL
 * (5 alternating rounds of 300 commits; the median per commit). And the
 * cost of the database identity check the collector makes 3 times per
 * batch (stat of the db and its -wal).
 *
 * Not a test: prints figures and PASS/MISS lines, exits 0 (non-zero only
 * when the bench cannot run).
 *
 * PostgreSQL (--pg-socket DIR: a server on that unix socket directory
 * whose user perf may create databases, as tests/support/pg_server.sh
 * starts): the same bodies over the same K connections into one collector
 * on a fresh database, then split over two collectors on another fresh
 * database (K connections each), --pg-rounds times (default 3, the
 * median reported); stored samples/s of each against the SQLite run's,
 * and top-stacks on the first round's database.
 *
 *   collector_bench [--batches N] [--connections K] [--keep] [--durability-batches N]
 *                   [--pg-socket DIR] [--pg-rounds N] [--scale SAMPLES[,SAMPLES...]]
 *   --scale: after each store's query, its rows copied up to each count of
 *   samples and top-stacks / flame timed from the rollups against the raw
 *   rows (query_scale.h).
 *   (default 1700, 4, 600; --durability-batches 0: no durability rounds)
 *   --keep leaves the collector's database in /tmp (its path is printed).
 */
#include <curl/curl.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <libpq-fe.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "perf_sdk.h"
#include "sdk/pipeline/event.h"
#include "sdk/pipeline/event_encode.h"
#include "sdk/sampler/modules.h"
#include "sdk/wire/batch_decode.h"

#define BENCH_RNG_SEED 0x9e3779b97f4a7c15ULL
#include "bench_app.h"
#include "query_scale.h"

#define STACKS 400
#define MAX_DEPTH 32
#define HANGS_PER_BATCH 4
#define HANG_SAMPLES 50
#define CPUS_PER_BATCH 2
#define CPU_SAMPLES 200
#define SAMPLES_PER_BATCH (HANGS_PER_BATCH * HANG_SAMPLES + CPUS_PER_BATCH * CPU_SAMPLES)
#define QUERY_RUNS 7
#define CEILING_RUNS 5         /* the ceiling's time: the median of 5 passes */
#define TARGET_INGEST 100000.0 /* samples/s */
#define TARGET_QUERY_MS 200.0
#define DURABILITY_ROUNDS 5 /* per mode, alternating */
#define COMMITS 300         /* per round of the bare commit cost */
#define IDENTITY_CHECKS 20000
#define CHECKS_PER_BATCH                                                                           \
  3 /* the headers, before and after the commit (collector/store/sqlite/sqlite_store.c)            \
     */

static const char *const g_leaf_names[] = {"read",   "write",     "poll",   "epoll_wait",   "recv",
                                           "send",   "malloc",    "free",   "memcpy",       "qsort",
                                           "fwrite", "nanosleep", "strtod", "clock_gettime"};
#define LEAF_COUNT (sizeof g_leaf_names / sizeof g_leaf_names[0])

typedef struct {
  uintptr_t pcs[MAX_DEPTH]; /* innermost first */
  size_t depth;
} bench_stack_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 400 stacks of 21-31 frames: 40 call paths (app_main_loop, one of 8
   shared 8-frame trunks, 10-20 app frames, then the path's "stuck"
   function), each with 10 different leaves (none, or a libc function).
   Stack s takes path s % 40 and leaf variant s / 40, so a hang sampling
   stacks s, s + 40, s + 80, ... is stuck in one function and its samples
   differ only in their leaves. */
static void make_stacks(bench_stack_t *stacks, const uintptr_t *leaves, size_t nleaves) {
  enum { PATHS = 40 };
  size_t trunks[8][8];
  for (int t = 0; t < 8; t++)
    for (int i = 0; i < 8; i++)
      trunks[t][i] = rnd() % APP_COUNT;
  uintptr_t paths[PATHS][MAX_DEPTH];
  size_t path_len[PATHS];
  for (int p = 0; p < PATHS; p++) {
    size_t n = 0, depth = 20 + (size_t)(p % 11);
    paths[p][n++] = g_app[0].addr + 8;
    for (int i = 0; i < 8; i++)
      paths[p][n++] = g_app[trunks[p % 8][i]].addr + 4 + (size_t)i;
    while (n < depth - 1)
      paths[p][n++] = g_app[rnd() % APP_COUNT].addr + 4 + rnd() % 12;
    paths[p][n++] = g_app[p % APP_COUNT].addr + 6; /* the stuck function */
    path_len[p] = n;
  }
  for (int s = 0; s < STACKS; s++) {
    int p = s % PATHS, variant = s / PATHS;
    size_t n = path_len[p];
    uintptr_t outer[MAX_DEPTH];
    memcpy(outer, paths[p], n * sizeof *outer);
    if (variant && nleaves) outer[n++] = leaves[(size_t)(variant + p) % nleaves] + 2;
    stacks[s].depth = n;
    for (size_t i = 0; i < n; i++)
      stacks[s].pcs[i] = outer[n - 1 - i];
  }
}

static perf__event_t *make_event(perf__modules_t *mods, perf__event_kind_t kind, int64_t wall,
                                 const bench_stack_t *stacks, int first, int span, int samples,
                                 int threads) {
  perf__event_t *ev = perf__event_new(kind, mods);
  if (!ev) return NULL;
  ev->tid = 30000;
  ev->start_wall_ns = wall;
  ev->start_mono_ns = 1000000000000LL;
  ev->cpu_percent = kind == PERF__EVENT_CPU ? 160 : -1;
  for (int t = 0; t < threads; t++)
    perf__event_set_thread(ev, 30000 + t, t ? "worker" : "main", kind == PERF__EVENT_CPU ? 80 : -1);
  int64_t t_ns = ev->start_mono_ns;
  for (int i = 0; i < samples; i++) {
    t_ns += 10000000 + rnd() % 300000;
    /* Skewed: the first stacks of the span most often. */
    int pick = (int)(rnd() % (unsigned)span);
    pick = pick * pick / span;
    const bench_stack_t *st = &stacks[(first + pick) % STACKS];
    if (perf__event_add_sample(ev, 30000 + i % threads, t_ns, st->pcs, st->depth,
                               PERF__STACK_END_COMPLETE) != 0) {
      perf__event_free(ev);
      return NULL;
    }
  }
  ev->duration_ns = t_ns - ev->start_mono_ns + 5000000;
  perf__event_finish(ev);
  return ev;
}

typedef struct {
  uint8_t *body;
  size_t len;
  char id_header[64];
} body_t;

static perf__event_encoder_t *g_encoder; /* SDK events into batches, as the writer does */

/* Batch b: 4 hangs (each in the stacks of one stuck function: stacks
   f, f+40, f+80, ... share it) and 2 CPU bursts over 12 stacks, each event
   with tenths samples per ten of the default's (10: 600 samples). */
static int make_batch(perf__batch_builder_t *bld, perf__modules_t *mods,
                      const bench_stack_t *stacks, int b, int tenths, body_t *out) {
  int64_t wall = 1795247520000000000LL + (int64_t)b * 1000000000LL;
  for (int h = 0; h < HANGS_PER_BATCH; h++) {
    /* A hang's samples: 4 leaf variants of one call path (stride 40). */
    int path = (int)(rnd() % 40);
    bench_stack_t own[4];
    for (int k = 0; k < 4; k++)
      own[k] = stacks[path + 40 * (int)(rnd() % 10)];
    perf__event_t *ev = make_event(mods, PERF__EVENT_HANG, wall + h * 100000000LL, own, 0, 4,
                                   HANG_SAMPLES * tenths / 10, 1);
    if (!ev || perf__event_encode(g_encoder, bld, ev) != PERF_OK) return -1;
    perf__event_free(ev);
  }
  for (int c = 0; c < CPUS_PER_BATCH; c++) {
    perf__event_t *ev = make_event(mods, PERF__EVENT_CPU, wall + 500000000LL + c, stacks,
                                   (int)(rnd() % STACKS), 12, CPU_SAMPLES * tenths / 10, 2);
    if (!ev || perf__event_encode(g_encoder, bld, ev) != PERF_OK) return -1;
    perf__event_free(ev);
  }
  uint8_t id[PERF__BATCH_ID_BYTES];
  if (perf__batch_finish(bld, NULL, &out->body, &out->len, id) != PERF_OK) return -1;
  int n = snprintf(out->id_header, sizeof out->id_header, "X-Perf-Batch-Id: ");
  for (int i = 0; i < PERF__BATCH_ID_BYTES; i++)
    n += snprintf(out->id_header + n, sizeof out->id_header - (size_t)n, "%02x", id[i]);
  return 0;
}

/* ---- posting over K keep-alive connections ------------------------------ */

typedef struct {
  const char *url;
  const body_t *bodies;
  size_t first, count; /* this connection's share */
  size_t ok, failed;
} poster_t;

static size_t discard(char *d, size_t s, size_t n, void *u) {
  (void)d, (void)u;
  return s * n;
}

static void *post_all(void *arg) {
  poster_t *p = arg;
  CURL *h = curl_easy_init();
  if (!h) return NULL;
  curl_easy_setopt(h, CURLOPT_URL, p->url);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
  for (size_t i = p->first; i < p->first + p->count; i++) {
    const body_t *b = &p->bodies[i];
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/x-protobuf");
    hd = curl_slist_append(hd, "Content-Encoding: zstd");
    hd = curl_slist_append(hd, "Authorization: Bearer bench-key");
    hd = curl_slist_append(hd, b->id_header);
    hd = curl_slist_append(hd, "Expect:"); /* no 100-continue round trip */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, b->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)b->len);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status == 200)
      p->ok++;
    else
      p->failed++;
    curl_slist_free_all(hd);
  }
  curl_easy_cleanup(h);
  return NULL;
}

/* Post every body over k connections; the wall time, *failed the non-200s. */
static double post_bodies(const char *url, const body_t *bodies, size_t n, int k, size_t *failed) {
  poster_t p[64];
  pthread_t th[64];
  double t0 = now_s();
  for (int i = 0; i < k; i++) {
    size_t lo = n * (size_t)i / (size_t)k, hi = n * (size_t)(i + 1) / (size_t)k;
    p[i] = (poster_t){url, bodies, lo, hi - lo, 0, 0};
    pthread_create(&th[i], NULL, post_all, &p[i]);
  }
  *failed = 0;
  for (int i = 0; i < k; i++) {
    pthread_join(th[i], NULL);
    *failed += p[i].failed;
  }
  return now_s() - t0;
}

/* ---- the ceiling: a do-nothing libmicrohttpd handler -------------------- */

static enum MHD_Result sink_request(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_data_size,
                                    void **con_cls) {
  (void)cls, (void)url, (void)method, (void)version, (void)upload_data;
  if (!*con_cls) {
    *con_cls = conn;
    return MHD_YES;
  }
  if (*upload_data_size) {
    *upload_data_size = 0; /* read and dropped */
    return MHD_YES;
  }
  static const char OK[] = "stored\n";
  struct MHD_Response *r =
      MHD_create_response_from_buffer(sizeof OK - 1, (void *)OK, MHD_RESPMEM_PERSISTENT);
  enum MHD_Result rc = MHD_queue_response(conn, 200, r);
  MHD_destroy_response(r);
  return rc;
}

/* ---- perf-collector as a child process ---------------------------------- */

static uint16_t free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &alen) != 0)
    return 0;
  close(fd);
  return ntohs(a.sin_port);
}

typedef struct {
  char *data;
  size_t len;
} text_t;

static size_t keep(char *d, size_t s, size_t n, void *u) {
  text_t *t = u;
  char *grown = realloc(t->data, t->len + s * n + 1);
  if (!grown) return 0;
  t->data = grown;
  memcpy(t->data + t->len, d, s * n);
  t->len += s * n;
  t->data[t->len] = '\0';
  return s * n;
}

/* GET url; the status, the body in *body (freed by the caller) when asked. */
static long http_get(const char *url, char **body) {
  CURL *h = curl_easy_init();
  text_t t = {NULL, 0};
  long status = 0;
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
  if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(h);
  if (body)
    *body = t.data;
  else
    free(t.data);
  return status;
}

/* perf-collector on db with --rate-limit 0 and --durability durability
   (NULL: the default). */
static pid_t start_collector(const char *db, uint16_t port, const char *durability, char *base,
                             size_t base_len) {
  char listen[32];
  snprintf(listen, sizeof listen, "127.0.0.1:%u", (unsigned)port);
  snprintf(base, base_len, "http://%s", listen);
  pid_t pid = fork();
  if (pid == 0) {
    char *argv[] = {PERF_COLLECTOR_PATH, "--listen", listen, "--db", (char *)db,
                    "--rate-limit",      "0",        NULL,   NULL,   NULL};
    if (durability) argv[7] = "--durability", argv[8] = (char *)durability;
    execv(PERF_COLLECTOR_PATH, argv);
    _exit(127);
  }
  char url[128];
  snprintf(url, sizeof url, "%s/healthz", base);
  for (double end = now_s() + 20; pid > 0 && now_s() < end; usleep(50000))
    if (http_get(url, NULL) == 200) return pid;
  if (pid > 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
  return -1;
}

/* query_scale's collector: default flags, a free port. */
static pid_t scale_start(const char *db, char *base, size_t base_len) {
  return start_collector(db, free_port(), NULL, base, base_len);
}

#define MAX_SCALES 4
static uint64_t g_scales[MAX_SCALES];
static size_t g_n_scales;

/* Sum of stack_counts.samples and the number of stacks in the db. */
static int count_stored(const char *db, uint64_t *samples, uint64_t *stacks, uint64_t *events) {
  sqlite3 *s = NULL;
  sqlite3_stmt *st = NULL;
  int rc = -1;
  if (sqlite3_open_v2(db, &s, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(s,
                         "SELECT (SELECT coalesce(sum(samples),0) FROM stack_counts),"
                         " (SELECT count(*) FROM stacks), (SELECT count(*) FROM events)",
                         -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    *samples = (uint64_t)sqlite3_column_int64(st, 0);
    *stacks = (uint64_t)sqlite3_column_int64(st, 1);
    *events = (uint64_t)sqlite3_column_int64(st, 2);
    rc = 0;
  }
  sqlite3_finalize(st);
  sqlite3_close(s);
  return rc;
}

/* CPU seconds (user + system) a process has used, from /proc/PID/stat. */
static double process_cpu_s(pid_t pid) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = '\0';
  const char *p = strrchr(line, ')'); /* the command name may hold spaces */
  unsigned long long utime = 0, stime = 0;
  if (!p ||
      sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
    return -1;
  return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds of the processes pid reaped (cutime + cstime). */
static double reaped_cpu_s(pid_t pid) {
  char path[64], line[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = '\0';
  const char *p = strrchr(line, ')');
  unsigned long long cutime = 0, cstime = 0;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %llu %llu", &cutime,
                   &cstime) != 2)
    return -1;
  return (double)(cutime + cstime) / (double)sysconf(_SC_CLK_TCK);
}

/* The db, its WAL and shared-memory files, the symbols directory the
   collector made beside it (empty: the bench uploads no debug files), and
   their directory. */
static void remove_db(const char *dir, const char *db) {
  static const char *const suffixes[] = {"", "-wal", "-shm"};
  char path[160];
  for (size_t i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s%s", db, suffixes[i]);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s.symbols", db);
  rmdir(path);
  if (rmdir(dir) != 0) fprintf(stderr, "collector_bench: cannot remove %s\n", dir);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of v[0..n), v left as it is (n <= 9). */
static double median_ms(const double *v, int n) {
  double c[9];
  memcpy(c, v, (size_t)n * sizeof *c);
  qsort(c, (size_t)n, sizeof c[0], cmp_double);
  return n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
}

/* Median ms of QUERY_RUNS GETs of path (after one warm-up). */
static double time_query(const char *base, const char *path, size_t *groups) {
  char url[256];
  snprintf(url, sizeof url, "%s%s", base, path);
  double ms[QUERY_RUNS];
  char *body = NULL;
  if (http_get(url, &body) != 200) {
    free(body);
    return -1;
  }
  *groups = 0;
  for (const char *p = body; p && (p = strstr(p, "\"signature\"")); p++)
    (*groups)++;
  free(body);
  for (int i = 0; i < QUERY_RUNS; i++) {
    double t0 = now_s();
    if (http_get(url, NULL) != 200) return -1;
    ms[i] = (now_s() - t0) * 1e3;
  }
  qsort(ms, QUERY_RUNS, sizeof ms[0], cmp_double);
  return ms[QUERY_RUNS / 2];
}

/* ---- durability: full against process ------------------------------------ */

/* n bodies into a fresh collector with --durability mode: batches/s (wall),
   -1 when it could not run; *failed the non-200s. */
static double durability_round(const body_t *bodies, size_t n, int k, const char *mode,
                               size_t *failed) {
  char dir[] = "/tmp/collector-bench.XXXXXX", db[128], base[64], url[128];
  if (!mkdtemp(dir)) return -1;
  snprintf(db, sizeof db, "%s/bench.db", dir);
  pid_t pid = start_collector(db, free_port(), mode, base, sizeof base);
  if (pid < 0) return -1;
  snprintf(url, sizeof url, "%s/v1/batches", base);
  double s = post_bodies(url, bodies, n, k, failed);
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
  remove_db(dir, db);
  return (double)n / s;
}

static void print_rounds(const char *label, double *rates, int n) {
  printf("  %-34s", label);
  for (int i = 0; i < n; i++)
    printf(" %7.0f", rates[i]);
  qsort(rates, (size_t)n, sizeof rates[0], cmp_double);
  printf("   median %7.0f batches/s\n", rates[n / 2]);
}

/* Rounds of process and full, alternating which goes first. */
static void compare_durability(const body_t *bodies, size_t n, int k) {
  double rate[2][DURABILITY_ROUNDS];
  static const char *const mode[2] = {"process", "full"};
  size_t failed = 0, f = 0;
  for (int r = 0; r < DURABILITY_ROUNDS; r++)
    for (int i = 0; i < 2; i++) {
      int m = r % 2 ? 1 - i : i;
      rate[m][r] = durability_round(bodies, n, k, mode[m], &f);
      failed += f;
    }
  printf("durability: %zu batches into a fresh collector per round, %d connections, %d rounds "
         "each, alternating (%zu failed):\n",
         n, k, DURABILITY_ROUNDS, failed);
  print_rounds("--durability process (sync NORMAL)", rate[0], DURABILITY_ROUNDS);
  print_rounds("--durability full (sync FULL)", rate[1], DURABILITY_ROUNDS);
  double p = rate[0][DURABILITY_ROUNDS / 2], fu = rate[1][DURABILITY_ROUNDS / 2];
  printf("  ratio full / process: %.3f\n", fu / p);
}

/* Microseconds per commit of one 8 KiB row, WAL, PRAGMA synchronous=sync,
   in a fresh database in dir; -1 on failure. */
static double commit_us(const char *dir, const char *sync) {
  char db[160], sql[64];
  snprintf(db, sizeof db, "%s/commit-%s.db", dir, sync);
  snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", sync);
  sqlite3 *h = NULL;
  sqlite3_stmt *ins = NULL;
  static uint8_t row[8192];
  double us = -1;
  if (sqlite3_open(db, &h) == SQLITE_OK &&
      sqlite3_exec(h, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) == SQLITE_OK &&
      sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK &&
      sqlite3_exec(h, "CREATE TABLE t(x BLOB)", NULL, NULL, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(h, "INSERT INTO t VALUES(?1)", -1, &ins, NULL) == SQLITE_OK) {
    double t0 = now_s();
    int ok = 1;
    for (int i = 0; ok && i < COMMITS; i++) {
      row[0] = (uint8_t)i;
      sqlite3_bind_blob(ins, 1, row, sizeof row, SQLITE_STATIC);
      ok = sqlite3_step(ins) == SQLITE_DONE;
      sqlite3_reset(ins);
    }
    if (ok) us = (now_s() - t0) / COMMITS * 1e6;
  }
  sqlite3_finalize(ins);
  sqlite3_close(h);
  static const char *const suffixes[] = {"", "-wal", "-shm"};
  for (size_t i = 0; i < 3; i++) {
    char path[176];
    snprintf(path, sizeof path, "%s%s", db, suffixes[i]);
    unlink(path);
  }
  return us;
}

/* The bare commit, NORMAL against FULL, alternating rounds. */
static void compare_commits(void) {
  char dir[] = "/tmp/collector-bench.XXXXXX";
  if (!mkdtemp(dir)) return;
  double us[2][DURABILITY_ROUNDS];
  static const char *const sync[2] = {"NORMAL", "FULL"};
  for (int r = 0; r < DURABILITY_ROUNDS; r++)
    for (int i = 0; i < 2; i++) {
      int m = r % 2 ? 1 - i : i;
      us[m][r] = commit_us(dir, sync[m]);
    }
  rmdir(dir);
  for (int m = 0; m < 2; m++)
    qsort(us[m], DURABILITY_ROUNDS, sizeof us[m][0], cmp_double);
  double normal = us[0][DURABILITY_ROUNDS / 2], full = us[1][DURABILITY_ROUNDS / 2];
  printf("  bare commit (WAL, one 8 KiB row, %d commits x %d rounds, median): NORMAL %.1f us, FULL "
         "%.1f us: %.2fx, +%.1f us per commit\n\n",
         COMMITS, DURABILITY_ROUNDS, normal, full, full / normal, full - normal);
}

/* The bare commit with synchronous=FULL, the collector's default: the
   median of DURABILITY_ROUNDS rounds, microseconds per commit. */
static double bare_commit_full_us(void) {
  char dir[] = "/tmp/collector-bench.XXXXXX";
  if (!mkdtemp(dir)) return -1;
  double us[DURABILITY_ROUNDS];
  for (int r = 0; r < DURABILITY_ROUNDS; r++)
    us[r] = commit_us(dir, "FULL");
  rmdir(dir);
  return median_ms(us, DURABILITY_ROUNDS);
}

/* The collector's database identity check (collector/store/sqlite/db_identity.c): stat
   of db and db-wal, microseconds per check (median of 5 runs). */
static double identity_check_us(const char *db) {
  char wal[160];
  snprintf(wal, sizeof wal, "%s-wal", db);
  double runs[5];
  struct stat sb;
  for (int r = 0; r < 5; r++) {
    double t0 = now_s();
    for (int i = 0; i < IDENTITY_CHECKS; i++)
      if (stat(db, &sb) != 0 || stat(wal, &sb) != 0) return -1;
    runs[r] = (now_s() - t0) / IDENTITY_CHECKS * 1e6;
  }
  qsort(runs, 5, sizeof runs[0], cmp_double);
  return runs[2];
}

/* ---- the collector's CPU per batch by batch size -------------------------- */

#define SIZE_COUNT 3
#define TARGET_CPU_MS 1.0        /* collector CPU per default batch */
#define TARGET_COMMITS 3.0       /* collector CPU per batch / bare commit of the same durability */
#define TARGET_CPU_RATE 500000.0 /* samples per collector CPU second, default batch */
#define TARGET_CPU_RATE_BIG 2e6  /* the same at 6,000 samples a batch */
static int g_size_rounds = 3;    /* --size-rounds */

typedef struct size_run_s {
  int tenths;     /* samples per event: tenths / 10 of the default's */
  size_t batches; /* per round */
  body_t *bodies;
  double cpu_ms[9], wall_s[9]; /* per round: collector CPU per batch, wall time */
  uint64_t stored, expected;   /* the last round's */
  size_t failed;
} size_run_t;

/* The sizes: 60, 600 (the default batch) and 6,000 samples. */
static size_run_t g_sizes[SIZE_COUNT] = {{.tenths = 1, .batches = 1000},
                                         {.tenths = 10, .batches = 600},
                                         {.tenths = 100, .batches = 100}};

static int samples_of(int tenths) {
  return (HANGS_PER_BATCH * HANG_SAMPLES + CPUS_PER_BATCH * CPU_SAMPLES) * tenths / 10;
}

/* One round of run r: its bodies into a fresh collector (default flags:
   --durability full) over k connections; the collector's CPU from the
   first body to the last answer. */
static void size_round(size_run_t *r, int round, int k) {
  char dir[] = "/tmp/collector-bench.XXXXXX", db[128], base[64], url[128];
  r->cpu_ms[round] = r->wall_s[round] = -1;
  if (!mkdtemp(dir)) return;
  snprintf(db, sizeof db, "%s/bench.db", dir);
  pid_t pid = start_collector(db, free_port(), NULL, base, sizeof base);
  if (pid < 0) return;
  snprintf(url, sizeof url, "%s/v1/batches", base);
  double cpu0 = process_cpu_s(pid);
  size_t failed = 0;
  r->wall_s[round] = post_bodies(url, r->bodies, r->batches, k, &failed);
  r->cpu_ms[round] = (process_cpu_s(pid) - cpu0) / (double)r->batches * 1e3;
  r->failed += failed;
  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
  uint64_t stacks = 0, events = 0;
  r->stored = 0;
  count_stored(db, &r->stored, &stacks, &events);
  r->expected = (uint64_t)r->batches * (uint64_t)samples_of(r->tenths);
  remove_db(dir, db);
}

static double bare_commit_full_us(void);

/* The rounds of every size, interleaved (one round of each size in turn),
   then the bare commit; the table and the goals. */
static void compare_sizes(int k) {
  for (int round = 0; round < g_size_rounds; round++)
    for (int i = 0; i < SIZE_COUNT; i++)
      size_round(&g_sizes[i], round, k);
  double commit = bare_commit_full_us();
  printf("collector CPU per batch by batch size (a fresh collector and database each round, "
         "default flags: --durability full; %d connections; %d rounds, sizes interleaved):\n",
         k, g_size_rounds);
  printf("  %8s %8s  %-26s %9s %15s %15s %10s\n", "samples", "batches",
         "CPU per batch, rounds (ms)", "median", "samples/CPU-s", "samples/wall-s", "CPU/commit");
  double cpu_ms[SIZE_COUNT], rate[SIZE_COUNT];
  for (int i = 0; i < SIZE_COUNT; i++) {
    size_run_t *r = &g_sizes[i];
    char rounds[64] = "";
    for (int j = 0, n = 0; j < g_size_rounds && n < (int)sizeof rounds; j++)
      n += snprintf(rounds + n, sizeof rounds - (size_t)n, "%s%.2f", j ? " " : "", r->cpu_ms[j]);
    cpu_ms[i] = median_ms(r->cpu_ms, g_size_rounds);
    double wall = median_ms(r->wall_s, g_size_rounds);
    int n = samples_of(r->tenths);
    rate[i] = n / (cpu_ms[i] / 1e3);
    printf("  %8d %8zu  %-26s %6.2f ms %15.0f %15.0f %9.1fx%s\n", n, r->batches, rounds, cpu_ms[i],
           rate[i], (double)r->expected / wall, cpu_ms[i] * 1e3 / commit,
           r->stored == r->expected && !r->failed ? "" : "  (MISSING SAMPLES OR FAILED POSTS)");
  }
  printf("  bare commit (WAL, one 8 KiB row, synchronous=FULL, %d commits x %d rounds, median): "
         "%.1f us\n\n",
         COMMITS, DURABILITY_ROUNDS, commit);
  printf("target: collector CPU per default batch (600 samples) <= %.1f ms: %.2f ms %s\n",
         TARGET_CPU_MS, cpu_ms[1], cpu_ms[1] <= TARGET_CPU_MS ? "PASS" : "MISS");
  printf("target: collector CPU per default batch <= %.0fx a bare commit of the same durability: "
         "%.1fx %s\n",
         TARGET_COMMITS, cpu_ms[1] * 1e3 / commit,
         cpu_ms[1] * 1e3 <= TARGET_COMMITS * commit ? "PASS" : "MISS");
  printf("target: >= %.0f samples per collector CPU second at 600 samples a batch: %.0f %s\n",
         TARGET_CPU_RATE, rate[1], rate[1] >= TARGET_CPU_RATE ? "PASS" : "MISS");
  printf("target: >= %.0f samples per collector CPU second at 6000 samples a batch: %.0f %s\n\n",
         TARGET_CPU_RATE_BIG, rate[2], rate[2] >= TARGET_CPU_RATE_BIG ? "PASS" : "MISS");
}

/* ---- PostgreSQL ------------------------------------------------------------ */

#define MAX_PG_ROUNDS 9
static int g_pg_rounds = 3; /* --pg-rounds */

/* A statement on the server at socket directory dir, database db. */
static PGresult *pg_exec(const char *dir, const char *db, const char *sql) {
  char uri[256];
  snprintf(uri, sizeof uri, "postgresql:///%s?host=%s&user=perf", db, dir);
  PGconn *c = PQconnectdb(uri);
  PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
  if (!r || (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)) {
    fprintf(stderr, "collector_bench: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    r = NULL;
  }
  PQfinish(c);
  return r;
}

/* CPU seconds of the PostgreSQL server at socket directory dir (as
   tests/support/pg_server.sh lays it out: DIR/data/postmaster.pid): the
   postmaster, every process it runs (backends, WAL writer,
   checkpointer...) and those it reaped; -1 when it cannot be read. */
static double pg_server_cpu_s(const char *dir) {
  char path[256];
  snprintf(path, sizeof path, "%s/data/postmaster.pid", dir);
  FILE *f = fopen(path, "r");
  int master = 0;
  if (!f || fscanf(f, "%d", &master) != 1) {
    if (f) fclose(f);
    return -1;
  }
  fclose(f);
  double cpu = process_cpu_s(master) + reaped_cpu_s(master);
  DIR *d = opendir("/proc");
  for (struct dirent *e; d && (e = readdir(d));) {
    int pid = atoi(e->d_name), ppid = 0;
    char stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *sf = pid > 0 ? fopen(path, "r") : NULL;
    size_t n = sf ? fread(stat, 1, sizeof stat - 1, sf) : 0;
    if (sf) fclose(sf);
    stat[n] = '\0';
    const char *p = strrchr(stat, ')');
    if (p && sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == master) cpu += process_cpu_s(pid);
  }
  if (d) closedir(d);
  return cpu;
}

typedef struct half_s {
  const char *url;
  const body_t *bodies;
  size_t n, failed;
  int k;
} half_t;

static void *post_half(void *arg) {
  half_t *h = arg;
  post_bodies(h->url, h->bodies, h->n, h->k, &h->failed);
  return NULL;
}

/* The first column of sql's one row on database db, -1 when it failed. */
static long long pg_number(const char *dir, const char *db, const char *sql) {
  PGresult *r = pg_exec(dir, db, sql);
  long long n = r && PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
  PQclear(r);
  return n;
}

/* After the last batch: how long until the collectors' folds left no
   rollup row to fold (store_pg_fold.c, one a second), and whether the
   rollups then hold every stored sample and its CPU time. */
static void pg_folded(const char *dir, const char *db) {
  double t0 = now_s();
  long long left = -1;
  while ((left = pg_number(dir, db,
                           "SELECT (SELECT count(*) FROM rollup_groups_delta)"
                           " + (SELECT count(*) FROM rollup_stacks_delta)")) != 0 &&
         now_s() - t0 < 30)
    usleep(20000);
  double s = now_s() - t0;
  long long same = pg_number(dir, db,
                             "SELECT ((SELECT sum(samples) FROM rollup_stacks) ="
                             " (SELECT sum(samples) FROM stack_counts) AND"
                             " (SELECT sum(cpu_us) FROM rollup_stacks) ="
                             " (SELECT coalesce(sum(cpu_us), 0) FROM stack_counts))::int");
  printf("  rollups folded %.0f ms after the last batch (%lld rows left), every stored sample in"
         " them: %s\n",
         s * 1000, left, same == 1 ? "yes" : "NO");
}

/* The bodies into n_collectors (1 or 2) collectors on a fresh database
   name: stored samples/s (0: failed); the first collector's base URL
   stays up in base (its pid in *kept) when kept is not NULL. */
static double pg_ingest(const char *dir, const char *name, int n_collectors, const body_t *bodies,
                        size_t nbatches, int k, char *base, pid_t *kept) {
  char sql[128], uri[256], bases[2][64], urls[2][128];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
  PGresult *r = pg_exec(dir, "postgres", sql);
  if (!r) return 0;
  PQclear(r);
  snprintf(uri, sizeof uri, "postgresql:///%s?host=%s&user=perf", name, dir);
  pid_t pids[2] = {-1, -1};
  for (int i = 0; i < n_collectors; i++) {
    pids[i] = start_collector(uri, free_port(), NULL, bases[i], sizeof bases[i]);
    if (pids[i] < 0) return 0;
    snprintf(urls[i], sizeof urls[i], "%s/v1/batches", bases[i]);
  }
  half_t h[2];
  pthread_t th[2];
  double server0 = pg_server_cpu_s(dir), cpu0[2] = {0, 0};
  for (int i = 0; i < n_collectors; i++)
    cpu0[i] = process_cpu_s(pids[i]);
  double t0 = now_s();
  for (int i = 0; i < n_collectors; i++) {
    size_t lo = nbatches * (size_t)i / (size_t)n_collectors;
    size_t hi = nbatches * (size_t)(i + 1) / (size_t)n_collectors;
    h[i] = (half_t){urls[i], bodies + lo, hi - lo, 0, k};
    pthread_create(&th[i], NULL, post_half, &h[i]);
  }
  size_t failed = 0;
  for (int i = 0; i < n_collectors; i++)
    pthread_join(th[i], NULL), failed += h[i].failed;
  double s = now_s() - t0;
  double server = pg_server_cpu_s(dir) - server0, collectors = 0;
  for (int i = 0; i < n_collectors; i++)
    collectors += process_cpu_s(pids[i]) - cpu0[i];
  r = pg_exec(dir, name, "SELECT coalesce(sum(samples), 0) FROM stack_counts");
  uint64_t stored = r ? strtoull(PQgetvalue(r, 0, 0), NULL, 10) : 0;
  PQclear(r);
  printf("perf-collector x%d on PostgreSQL (full)     %8.3f s  %10.0f samples/s  %8.0f "
         "batches/s  (%zu failed, %llu samples stored)\n",
         n_collectors, s, (double)stored / s, (double)nbatches / s, failed,
         (unsigned long long)stored);
  printf("  CPU per batch while posting: PostgreSQL server %.2f ms, collector%s %.2f ms (%.0f "
         "samples per CPU second of both)\n",
         server / (double)nbatches * 1e3, n_collectors > 1 ? "s" : "",
         collectors / (double)nbatches * 1e3, (double)stored / (server + collectors));
  pg_folded(dir, name);
  for (int i = 0; i < n_collectors; i++) {
    if (kept && i == 0) {
      snprintf(base, 64, "%s", bases[0]);
      *kept = pids[0];
      continue;
    }
    kill(pids[i], SIGTERM);
    waitpid(pids[i], NULL, 0);
  }
  return (double)stored / s;
}

/* Top-stacks with every rollup row of database db back in the delta
   tables (as if no fold had run since the first batch), the fold lock
   held on a connection of the bench's so the collector's fold thread
   leaves them (store_pg_fold.c): what a read costs when folds lag; the
   rows go back to the rollup tables with the lock released (the
   collector folds them). */
static void pg_unfolded_queries(const char *dir, const char *db, const char *base) {
  char uri[256];
  snprintf(uri, sizeof uri, "postgresql:///%s?host=%s&user=perf", db, dir);
  PGconn *c = PQconnectdb(uri);
  PGresult *r = PQstatus(c) == CONNECTION_OK
                    ? PQexec(c, "SELECT pg_advisory_lock(x'70657266005'::bigint);"
                                "INSERT INTO rollup_groups_delta SELECT bucket_ns, app, version,"
                                " environment, kind, group_sig, label, dbin, events, samples,"
                                " total_ns, first_ns, last_ns, max_ns FROM rollup_groups;"
                                "INSERT INTO rollup_stacks_delta SELECT bucket_ns, app, version,"
                                " environment, kind, group_sig, stack_sig, label, samples, wall_ns,"
                                " first_ns, last_end_ns FROM rollup_stacks;"
                                "DELETE FROM rollup_groups; DELETE FROM rollup_stacks;"
                                "DELETE FROM rollup_groups_day; DELETE FROM rollup_stacks_day;"
                                "SELECT (SELECT count(*) FROM rollup_groups_delta)"
                                " + (SELECT count(*) FROM rollup_stacks_delta)")
                    : NULL;
  if (PQresultStatus(r) == PGRES_TUPLES_OK) {
    size_t groups = 0;
    double hang_ms = time_query(base, "/api/v1/top-stacks?kind=hang", &groups);
    double cpu_ms = time_query(base, "/api/v1/top-stacks?kind=cpu", &groups);
    printf("top-stacks on PostgreSQL with nothing folded (%s delta rows), median of %d:"
           " kind=hang %.1f ms, kind=cpu %.1f ms\n",
           PQgetvalue(r, 0, 0), QUERY_RUNS, hang_ms, cpu_ms);
  } else {
    printf("top-stacks with nothing folded: not measured (%s)\n", PQerrorMessage(c));
  }
  PQclear(r);
  PQfinish(c); /* the lock goes with the session */
  pg_folded(dir, db);
}

static void pg_drop(const char *dir, const char *name) {
  char sql[128];
  snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", name);
  PQclear(pg_exec(dir, "postgres", sql));
}

static double median_of(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The PostgreSQL rounds (x1 then x2, g_pg_rounds times, each on a fresh
   database: the x2 figure varies most from run to run) against the
   SQLite run's rate; the first round's databases kept for the queries. */
static void compare_pg(const char *dir, const body_t *bodies, size_t nbatches, int k,
                       double sqlite_rate) {
  char one[32], two[32], base[64];
  snprintf(one, sizeof one, "bench_%d_1", (int)getpid());
  snprintf(two, sizeof two, "bench_%d_2", (int)getpid());
  pid_t pid = -1;
  double rates[2][MAX_PG_ROUNDS];
  for (int i = 0; i < g_pg_rounds; i++) {
    char n1[48], n2[48];
    snprintf(n1, sizeof n1, i ? "%s_r%d" : "%s", one, i);
    snprintf(n2, sizeof n2, i ? "%s_r%d" : "%s", two, i);
    rates[0][i] = pg_ingest(dir, n1, 1, bodies, nbatches, k, base, i ? NULL : &pid);
    rates[1][i] = pg_ingest(dir, n2, 2, bodies, nbatches, k, NULL, NULL);
    if (i) pg_drop(dir, n1), pg_drop(dir, n2);
  }
  double r1 = median_of(rates[0], g_pg_rounds), r2 = median_of(rates[1], g_pg_rounds);
  printf("PostgreSQL, median of %d rounds: x1 %.0f samples/s, x2 %.0f samples/s\n", g_pg_rounds, r1,
         r2);
  printf("ratio: PostgreSQL x1 / SQLite %.3f, PostgreSQL x2 / SQLite %.3f, x2 / x1 %.3f\n",
         r1 / sqlite_rate, r2 / sqlite_rate, r1 > 0 ? r2 / r1 : 0);
  printf("target: ingest with two collectors on PostgreSQL >= 300000 samples/s: %.0f %s\n", r2,
         r2 >= 300000 ? "PASS" : "MISS");
  if (pid > 0) {
    size_t groups = 0;
    double hang_ms = time_query(base, "/api/v1/top-stacks?kind=hang", &groups);
    double cpu_ms = time_query(base, "/api/v1/top-stacks?kind=cpu", &groups);
    printf("top-stacks on PostgreSQL, median of %d: kind=hang %.1f ms, kind=cpu %.1f ms\n",
           QUERY_RUNS, hang_ms, cpu_ms);
    pg_unfolded_queries(dir, one, base);
    printf("\n");
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    if (g_n_scales) {
      scale_env_t env = {scale_start, http_get, NULL, dir, one};
      query_scale(&env, g_scales, g_n_scales);
    }
  }
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT pg_database_size('%s') - pg_database_size('template1'),"
           " (SELECT coalesce(sum(samples), 0) FROM stack_counts)",
           one);
  PGresult *r = pg_exec(dir, one, sql);
  if (r)
    printf("PostgreSQL database: %.1f MB over template1's for %s samples (%.0f bytes each)\n\n",
           strtod(PQgetvalue(r, 0, 0), NULL) / 1e6, PQgetvalue(r, 0, 1),
           strtod(PQgetvalue(r, 0, 0), NULL) / strtod(PQgetvalue(r, 0, 1), NULL));
  PQclear(r);
  pg_drop(dir, one);
  pg_drop(dir, two);
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv) {
  size_t nbatches = 1700, durability_batches = 600;
  int k = 4;
  bool keep_db = false, usage = false;
  const char *pg_socket = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--keep") == 0)
      keep_db = true;
    else if (i + 1 < argc && strcmp(argv[i], "--pg-rounds") == 0)
      g_pg_rounds = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--pg-socket") == 0)
      pg_socket = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--scale") == 0) {
      for (char *t = strtok(argv[++i], ","); t && g_n_scales < MAX_SCALES; t = strtok(NULL, ","))
        g_scales[g_n_scales++] = strtoull(t, NULL, 10);
    } else if (i + 1 < argc && strcmp(argv[i], "--batches") == 0)
      nbatches = strtoul(argv[++i], NULL, 10);
    else if (i + 1 < argc && strcmp(argv[i], "--connections") == 0)
      k = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--durability-batches") == 0)
      durability_batches = strtoul(argv[++i], NULL, 10);
    else if (i + 1 < argc && strcmp(argv[i], "--size-rounds") == 0)
      g_size_rounds = atoi(argv[++i]);
    else
      usage = true;
  }
  if (usage || nbatches < 1 || k < 1 || k > 64 || g_pg_rounds < 1 || g_pg_rounds > MAX_PG_ROUNDS ||
      g_size_rounds < 0 || g_size_rounds > 9) {
    fprintf(stderr,
            "usage: %s [--batches N] [--connections K (1..64)] [--keep] [--durability-batches "
            "N] [--size-rounds N (0..9)] [--pg-socket DIR] [--pg-rounds N (1..9)] [--scale "
            "SAMPLES[,SAMPLES...]]\n",
            argv[0]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);

  /* The batches, made before any timing. */
  uintptr_t leaves[LEAF_COUNT];
  size_t nleaves = 0;
  for (size_t i = 0; i < LEAF_COUNT; i++) {
    void *p = dlsym(RTLD_DEFAULT, g_leaf_names[i]);
    if (p) leaves[nleaves++] = (uintptr_t)p;
  }
  static bench_stack_t stacks[STACKS];
  make_stacks(stacks, leaves, nleaves);
  perf__modules_t *mods = perf__modules_acquire();
  perf__batch_resource_t res = {
      .app_name = "bench-app", .app_version = "2.3.1", .environment = "production"};
  perf__batch_builder_t *bld = NULL;
  body_t *bodies = calloc(nbatches, sizeof *bodies);
  if (!mods || !bodies || perf__batch_builder_new(&res, NULL, &bld) != PERF_OK ||
      !(g_encoder = perf__event_encoder_new()))
    return 1;
  double t0 = now_s();
  size_t bytes = 0;
  for (size_t b = 0; b < nbatches; b++) {
    if (make_batch(bld, mods, stacks, (int)b, 10, &bodies[b]) != 0) {
      fprintf(stderr, "collector_bench: cannot make batch %zu\n", b);
      return 1;
    }
    bytes += bodies[b].len;
  }
  for (int i = 0; i < SIZE_COUNT && g_size_rounds; i++) {
    size_run_t *r = &g_sizes[i];
    if (!(r->bodies = calloc(r->batches, sizeof *r->bodies))) return 1;
    for (size_t b = 0; b < r->batches; b++)
      if (make_batch(bld, mods, stacks, (int)(nbatches + b), r->tenths, &r->bodies[b]) != 0) {
        fprintf(stderr, "collector_bench: cannot make a batch of %d samples\n",
                samples_of(r->tenths));
        return 1;
      }
  }
  perf__batch_free(bld);
  perf__event_encoder_free(g_encoder);
  perf__modules_release(mods);
  uint64_t expected = (uint64_t)nbatches * SAMPLES_PER_BATCH;
  printf("collector_bench: %zu batches of %d samples (%d hangs x %d, %d cpu x %d; 21-31 frame "
         "stacks from %d distinct), %.0f bytes per body (zstd), %llu samples; made in %.2f s\n",
         nbatches, SAMPLES_PER_BATCH, HANGS_PER_BATCH, HANG_SAMPLES, CPUS_PER_BATCH, CPU_SAMPLES,
         STACKS, (double)bytes / (double)nbatches, (unsigned long long)expected, now_s() - t0);
  printf("%d keep-alive connections, one thread and curl handle each; machine: %ld online CPUs\n\n",
         k, sysconf(_SC_NPROCESSORS_ONLN));

  /* The ceiling: the same bodies into a do-nothing handler. */
  uint16_t sink_port = free_port();
  struct MHD_Daemon *sink =
      MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO, sink_port, NULL, NULL,
                       sink_request, NULL, MHD_OPTION_THREAD_POOL_SIZE, 4u, MHD_OPTION_END);
  if (!sink) return 1;
  char sink_url[64];
  snprintf(sink_url, sizeof sink_url, "http://127.0.0.1:%u/v1/batches", (unsigned)sink_port);
  size_t failed = 0, sink_failed = 0;
  double runs[CEILING_RUNS];
  for (int i = 0; i < CEILING_RUNS; i++) {
    runs[i] = post_bodies(sink_url, bodies, nbatches, k, &failed);
    sink_failed += failed;
  }
  qsort(runs, CEILING_RUNS, sizeof runs[0], cmp_double);
  double sink_s = runs[CEILING_RUNS / 2];
  failed = sink_failed;
  MHD_stop_daemon(sink);
  double sink_rate = (double)expected / sink_s;
  printf("ceiling: do-nothing libmicrohttpd handler   %8.3f s  %10.0f samples/s  %8.0f "
         "batches/s  (%zu failed)\n",
         sink_s, sink_rate, (double)nbatches / sink_s, failed);

  /* The real collector. */
  char dir[] = "/tmp/collector-bench.XXXXXX", db[128], base[64], url[128];
  if (!mkdtemp(dir)) return 1;
  snprintf(db, sizeof db, "%s/bench.db", dir);
  pid_t pid = start_collector(db, free_port(), NULL, base, sizeof base);
  if (pid < 0) {
    fprintf(stderr, "collector_bench: perf-collector did not start\n");
    return 1;
  }
  snprintf(url, sizeof url, "%s/v1/batches", base);
  double cpu0 = process_cpu_s(pid);
  double ingest_s = post_bodies(url, bodies, nbatches, k, &failed);
  double collector_cpu = process_cpu_s(pid) - cpu0;
  uint64_t stored = 0, nstacks = 0, nevents = 0;
  count_stored(db, &stored, &nstacks, &nevents);
  double ingest_rate = (double)stored / ingest_s;
  printf("perf-collector (default flags, full)       %8.3f s  %10.0f samples/s  %8.0f "
         "batches/s  (%zu failed)\n",
         ingest_s, ingest_rate, (double)nbatches / ingest_s, failed);
  printf("stored: %llu samples of %llu sent, %llu events, %llu distinct stacks %s\n",
         (unsigned long long)stored, (unsigned long long)expected, (unsigned long long)nevents,
         (unsigned long long)nstacks, stored == expected ? "(all)" : "(MISSING SOME)");
  printf("collector CPU during the run: %.2f s (%.2f cores busy), %.0f samples per CPU second, "
         "%.2f ms per batch\n",
         collector_cpu, collector_cpu / ingest_s, (double)stored / collector_cpu,
         collector_cpu / (double)nbatches * 1e3);
  printf("ratio: collector / ceiling %.4f\n", ingest_rate / sink_rate);
  double check_us = identity_check_us(db);
  printf("database identity check (stat of the db and its -wal): %.2f us, x%d per batch = %.3f%% "
         "of the collector's CPU per batch (%.0f us)\n\n",
         check_us, CHECKS_PER_BATCH,
         CHECKS_PER_BATCH * check_us / (collector_cpu / nbatches * 1e6) * 100,
         collector_cpu / nbatches * 1e6);

  /* The query over what was stored. */
  size_t hang_groups = 0, cpu_groups = 0;
  double hang_ms = time_query(base, "/api/v1/top-stacks?kind=hang", &hang_groups);
  double cpu_ms = time_query(base, "/api/v1/top-stacks?kind=cpu", &cpu_groups);
  printf("top-stacks over %llu stored samples, median of %d:\n", (unsigned long long)stored,
         QUERY_RUNS);
  printf("  kind=hang  %8.1f ms  (%zu groups returned)  %.2fx the %.0f ms target\n", hang_ms,
         hang_groups, hang_ms / TARGET_QUERY_MS, TARGET_QUERY_MS);
  printf("  kind=cpu   %8.1f ms  (%zu groups returned)  %.2fx the %.0f ms target\n\n", cpu_ms,
         cpu_groups, cpu_ms / TARGET_QUERY_MS, TARGET_QUERY_MS);

  kill(pid, SIGTERM);
  waitpid(pid, NULL, 0);
  if (g_size_rounds) compare_sizes(k);
  if (g_n_scales) {
    scale_env_t env = {scale_start, http_get, db, NULL, NULL};
    query_scale(&env, g_scales, g_n_scales);
  }
  if (pg_socket) compare_pg(pg_socket, bodies, nbatches, k, ingest_rate);
  if (durability_batches) {
    compare_durability(bodies, durability_batches < nbatches ? durability_batches : nbatches, k);
    compare_commits();
  }
  if (keep_db)
    printf("database kept: %s\n\n", db);
  else
    remove_db(dir, db);
  for (size_t b = 0; b < nbatches; b++)
    free(bodies[b].body);
  free(bodies);
  for (int i = 0; i < SIZE_COUNT; i++) {
    for (size_t b = 0; g_sizes[i].bodies && b < g_sizes[i].batches; b++)
      free(g_sizes[i].bodies[b].body);
    free(g_sizes[i].bodies);
  }
  curl_global_cleanup();

  printf("target: ingest >= %.0f samples/s: %.0f %s\n", TARGET_INGEST, ingest_rate,
         ingest_rate >= TARGET_INGEST && stored == expected ? "PASS" : "MISS");
  bool big = stored >= 1000000;
  printf("target: top-stacks <= %.0f ms over >= 1M samples: hang %.1f, cpu %.1f %s\n",
         TARGET_QUERY_MS, hang_ms, cpu_ms,
         !big ? "(fewer samples stored: not judged)"
         : hang_ms >= 0 && cpu_ms >= 0 && hang_ms <= TARGET_QUERY_MS && cpu_ms <= TARGET_QUERY_MS
             ? "PASS"
             : "MISS");
  return 0;
}
