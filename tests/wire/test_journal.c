/*
 * test_journal.c - nothing recorded is lost: the journal of the open batch
 * (sdk/wire/journal.h) against real kill -9s of real child processes, with
 * the next run in the same directory delivering every journaled event
 * exactly once (http sink against tests/support's HTTP server, and the
 * file sink's batch records); a torn last record dropped and counted; a
 * journal whose batch made it into the spool not replayed twice; a dead
 * process's subdirectory journal adopted and replayed. And every
 * failure visible: an unusable data_dir at init, a data_dir deleted at run
 * time, a spool write that fails (flush's error, exact counters, the drop
 * count carried by the next batch), drop counts kept across a restart.
 * Each case runs in its own process: `test_journal <case>`.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
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
#define ROUNDS_HTTP 50
#define ROUNDS_FILE 15
#define MAX_SEQ 20000
#define WAIT_MS 30000

static char g_dir[64];
static char g_log[8192];

static void make_dir(void) {
  snprintf(g_dir, sizeof g_dir, "%s", tempdir_make("perf-journal"));
}

static void collect_log(perf_log_level_t level, const char *message, void *user) {
  (void)level, (void)user;
  size_t have = strlen(g_log);
  snprintf(g_log + have, sizeof g_log - have, "%s\n", message);
}

/* sink http (endpoint) or, with endpoint NULL, the file sink <dir>/report.txt. */
static void journal_config(perf_sdk_config_t *cfg, const char *endpoint, char *data_dir,
                           char *report) {
  perf_sdk_config_init(cfg);
  cfg->app_name = "journal-test";
  snprintf(data_dir, 128, "%s/data", g_dir);
  cfg->data_dir = data_dir;
  if (endpoint) {
    cfg->sink = PERF_SINK_HTTP;
    cfg->endpoint = endpoint;
    cfg->api_key = "k";
  } else {
    snprintf(report, 128, "%s/report.txt", g_dir);
    cfg->sink = PERF_SINK_FILE;
    cfg->sink_path = report;
  }
  cfg->batch_max_delay_ms = 100;
  cfg->max_events_per_hour = 100000;
  cfg->queue_capacity = 4096;
  cfg->spool_max_files = 65536;
  cfg->backoff_base_ms = 50;
  cfg->backoff_cap_ms = 200;
  cfg->request_timeout_ms = 2000;
  cfg->cpu_threshold_percent = 25600;
  cfg->log_fn = collect_log;
}

static perf_sdk_stats_t stats(void) {
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  return st;
}

/* ---- what was delivered ---------------------------------------------------- */

/* Events of the test by sequence number ("seq <n>"), counted over batches
   deduplicated by batch id (a batch sent twice is one batch: the
   collector's rule); *drops_sink sums the batches' sink_failed counts. */
typedef struct delivered_s {
  unsigned times[MAX_SEQ];
  size_t events, batches;
  uint64_t sink_failed, rate_limited;
  uint8_t ids[4096][16];
} delivered_t;

static void count_batch(delivered_t *d, const uint8_t *payload, size_t len) {
  Perf__V1__Batch *b = NULL;
  CHECK_EQ_INT(perf__batch_decode_stored(payload, len, DECODE_MAX, &b), PERF_OK);
  CHECK_EQ_INT(b->batch_id.len, 16);
  for (size_t i = 0; i < d->batches; i++)
    if (memcmp(d->ids[i], b->batch_id.data, 16) == 0) {
      perf__v1__batch__free_unpacked(b, NULL);
      return;
    }
  CHECK(d->batches < ARRAY_LEN(d->ids));
  memcpy(d->ids[d->batches++], b->batch_id.data, 16);
  if (b->drops) {
    d->sink_failed += b->drops->sink_failed;
    d->rate_limited += b->drops->rate_limited;
  }
  for (size_t e = 0; e < b->n_events; e++) {
    unsigned seq;
    if (sscanf(b->events[e]->reason, "seq %u", &seq) == 1 && seq < MAX_SEQ) d->times[seq]++;
    d->events++;
  }
  perf__v1__batch__free_unpacked(b, NULL);
}

static void count_server(delivered_t *d, http_server_t *srv) {
  for (size_t i = 0; i < http_server_request_count(srv); i++) {
    http_request_t q;
    CHECK(http_server_request(srv, i, &q));
    count_batch(d, q.body, q.body_len);
    http_request_free(&q);
  }
}

/* Every batch file of a spool directory (the file sink's records). */
static void count_spool(delivered_t *d, const char *dir) {
  DIR *dd = opendir(dir);
  CHECK(dd != NULL);
  struct dirent *de;
  while ((de = readdir(dd)) != NULL) {
    size_t n = strlen(de->d_name);
    if (n < 6 || strcmp(de->d_name + n - 6, ".batch") != 0) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    uint8_t *payload = NULL;
    size_t len = 0;
    const char *reason = NULL;
    CHECKF(perf__spool_read_file(path, NULL, NULL, &payload, &len, &reason) == PERF_OK, "%s: %s",
           path, reason ? reason : strerror(errno));
    count_batch(d, payload, len);
    free(payload);
  }
  closedir(dd);
}

static size_t count_files(const char *dir, const char *suffix) {
  DIR *dd = opendir(dir);
  if (!dd) return 0;
  size_t k = 0, s = strlen(suffix);
  struct dirent *de;
  while ((de = readdir(dd)) != NULL) {
    size_t n = strlen(de->d_name);
    k += n > s && strcmp(de->d_name + n - s, suffix) == 0;
  }
  closedir(dd);
  return k;
}

/* ---- the child that records until it is killed ------------------------- */

/* Child: captures "seq <first>", "seq <first+1>", ...; each one's number
   goes to stdout only once the SDK has journaled it (events_journaled),
   with how long that took after perf_sdk_capture_now returned. First line:
   what its start replayed of the journals the previous child left. Then
   it waits to be killed. */
static void child_recorder(const char *dir, const char *endpoint, unsigned first, unsigned count) {
  snprintf(g_dir, sizeof g_dir, "%s", dir);
  perf_sdk_config_t cfg;
  char data_dir[128], report[128];
  journal_config(&cfg, strcmp(endpoint, "-") ? endpoint : NULL, data_dir, report);
  if (strcmp(endpoint, "-")) {
    cfg.backoff_base_ms = 60000; /* the collector is down while children run */
    cfg.backoff_cap_ms = 60000;
  }
  if (perf_sdk_init(&cfg) != PERF_OK) exit(3);
  perf_sdk_flush(1); /* returns once the spool is open: the replay is done */
  perf_sdk_stats_t st;
  perf_sdk_get_stats(&st);
  printf("R %llu %llu\n", (unsigned long long)st.events_replayed,
         (unsigned long long)st.journal_torn);
  fflush(stdout);
  unsigned pace = (unsigned)getpid();
  for (unsigned n = 0; n < count; n++) {
    char reason[32];
    snprintf(reason, sizeof reason, "seq %u", first + n);
    if (perf_sdk_capture_now(reason) != PERF_OK) exit(4);
    int64_t t0 = now_ns();
    do {
      perf_sdk_get_stats(&st);
      if (st.journal_write_failed) exit(5);
    } while (st.events_journaled < n + 1);
    printf("E %u %lld %d\n", first + n, (long long)((now_ns() - t0) / 1000), n == 0);
    fflush(stdout);
    usleep((useconds_t)(rand_r(&pace) % 2000)); /* spread over a few batches */
  }
  for (;;) /* killed while its last batch is open */
    pause();
}

static pid_t spawn_recorder(const char *endpoint, unsigned first, unsigned count, int *out_fd) {
  int out[2];
  CHECK(pipe(out) == 0);
  pid_t parent = getpid();
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(126);
    dup2(out[1], 1);
    close(out[0]);
    char a[16], b[16];
    snprintf(a, sizeof a, "%u", first);
    snprintf(b, sizeof b, "%u", count);
    execl("/proc/self/exe", "test_journal", "child_recorder", g_dir, endpoint, a, b, (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  *out_fd = out[0];
  return pid;
}

typedef struct rounds_s {
  bool reported[MAX_SEQ];
  size_t n_reported;
  uint64_t replayed, torn;
  int64_t latency_us[MAX_SEQ]; /* events after a child's first */
  size_t n_latency;
  int64_t first_max_us; /* a child's first event waits for the writer's start */
} rounds_t;

static void parse_line(const char *line, rounds_t *r) {
  unsigned long long a, b;
  unsigned seq;
  long long us;
  int first;
  if (sscanf(line, "R %llu %llu", &a, &b) == 2) {
    r->replayed += a;
    r->torn += b;
  } else if (sscanf(line, "E %u %lld %d", &seq, &us, &first) == 3 && seq < MAX_SEQ &&
             !r->reported[seq]) {
    r->reported[seq] = true;
    r->n_reported++;
    if (first && us > r->first_max_us) r->first_max_us = us;
    if (!first) r->latency_us[r->n_latency++] = us;
  }
}

static void read_lines(FILE *f, rounds_t *r) {
  char line[64];
  while (fgets(line, sizeof line, f))
    parse_line(line, r);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* `rounds` children, each killed with SIGKILL at a random point: while it
   starts (replaying the journals of the one before), or while it records.
   Sequence numbers never repeat across rounds. */
static void kill_rounds(const char *endpoint, int rounds, unsigned seed, rounds_t *r) {
  srand(seed);
  unsigned first = 0;
  for (int round = 0; round < rounds; round++) {
    int fd;
    unsigned count = 150;
    pid_t pid = spawn_recorder(endpoint, first, count, &fd);
    first += count;
    FILE *f = fdopen(fd, "r");
    CHECK(f != NULL);
    if (rand() % 8 != 0) {
      /* Most rounds: at a random moment once it records (its first event
         waits for the writer's start: unwind rules, modules). */
      char line[64];
      while (fgets(line, sizeof line, f) && line[0] != 'E')
        parse_line(line, r);
      parse_line(line, r);
      usleep((useconds_t)(rand() % 250) * 1000);
    } else { /* some: while it starts, perhaps inside the replay */
      usleep((useconds_t)(rand() % 100) * 1000);
    }
    kill(pid, SIGKILL);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECKF(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0),
           "round %d: child status 0x%x; seed %u", round, status, seed);
    read_lines(f, r);
    fclose(f);
  }
}

static void print_figures(const char *what, const rounds_t *r, size_t delivered, size_t batches,
                          int rounds, unsigned seed) {
  int64_t lat[MAX_SEQ];
  memcpy(lat, r->latency_us, r->n_latency * sizeof *lat);
  qsort(lat, r->n_latency, sizeof *lat, cmp_i64);
  int64_t p50 = r->n_latency ? lat[r->n_latency / 2] : 0;
  int64_t p99 = r->n_latency ? lat[r->n_latency * 99 / 100] : 0;
  int64_t max = r->n_latency ? lat[r->n_latency - 1] : 0;
  printf("%s: %d rounds of kill -9 (seed %u): %zu events reported journaled, %zu delivered "
         "(in %zu batches), %zu journaled but unreported at the kill, each once; torn records "
         "%llu; replayed at starts %llu; capture_now return -> journaled: p50 %lld us, "
         "p99 %lld us, max %lld us (a process's first event, behind the writer's start: "
         "max %lld us)\n",
         what, rounds, seed, r->n_reported, delivered, batches, delivered - r->n_reported,
         (unsigned long long)r->torn, (unsigned long long)r->replayed, (long long)p50,
         (long long)p99, (long long)max, (long long)r->first_max_us);
}

static unsigned test_seed(void) {
  unsigned seed = (unsigned)time(NULL);
  if (getenv("JOURNAL_TEST_SEED")) seed = (unsigned)atoi(getenv("JOURNAL_TEST_SEED"));
  return seed;
}

static void check_exactly_once(const delivered_t *d, const rounds_t *r, unsigned seed) {
  for (unsigned s = 0; s < MAX_SEQ; s++) {
    CHECKF(d->times[s] <= 1, "seq %u delivered %u times; seed %u", s, d->times[s], seed);
    CHECKF(!r->reported[s] || d->times[s] == 1, "seq %u journaled but not delivered; seed %u", s,
           seed);
  }
}

/* ---- cases ----------------------------------------------------------------- */

static delivered_t g_delivered;
static rounds_t g_rounds;

static void case_kill9_rounds_http(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  uint16_t port = http_server_port(srv);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)port);
  http_server_stop(srv); /* down while the children record */
  unsigned seed = test_seed();
  kill_rounds(url, ROUNDS_HTTP, seed, &g_rounds);
  CHECKF(g_rounds.n_reported >= ROUNDS_HTTP, "only %zu events journaled; seed %u",
         g_rounds.n_reported, seed);
  /* The collector is up: the next run replays the last journal and sends
     the whole spool. */
  CHECK((srv = http_server_start_on_port(port)) != NULL);
  perf_sdk_config_t cfg;
  char data_dir[128], report[128];
  journal_config(&cfg, url, data_dir, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECKF(perf_sdk_flush(60000) == PERF_OK, "spool not emptied; seed %u", seed);
  perf_sdk_stats_t st = stats();
  g_rounds.replayed += st.events_replayed;
  g_rounds.torn += st.journal_torn;
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(st.batches_evicted, 0);
  count_server(&g_delivered, srv);
  http_server_stop(srv);
  check_exactly_once(&g_delivered, &g_rounds, seed);
  char spool[160];
  snprintf(spool, sizeof spool, "%s/spool", data_dir);
  CHECK_EQ_INT(count_files(spool, ".journal"), 0);
  print_figures("http", &g_rounds, g_delivered.events, g_delivered.batches, ROUNDS_HTTP, seed);
}

static void case_kill9_rounds_file(void) {
  make_dir();
  unsigned seed = test_seed();
  kill_rounds("-", ROUNDS_FILE, seed, &g_rounds);
  CHECKF(g_rounds.n_reported >= ROUNDS_FILE, "only %zu events journaled; seed %u",
         g_rounds.n_reported, seed);
  perf_sdk_config_t cfg;
  char data_dir[128], report[128];
  journal_config(&cfg, NULL, data_dir, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  perf_sdk_stats_t st = stats();
  g_rounds.replayed += st.events_replayed;
  g_rounds.torn += st.journal_torn;
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(st.batches_evicted, 0);
  char spool[160];
  snprintf(spool, sizeof spool, "%s.batches", report);
  count_spool(&g_delivered, spool);
  check_exactly_once(&g_delivered, &g_rounds, seed);
  CHECK_EQ_INT(count_files(spool, ".journal"), 0);
  print_figures("file sink batch records", &g_rounds, g_delivered.events, g_delivered.batches,
                ROUNDS_FILE, seed);
}

/* A child records `count` events into an open batch that stays open
   (batch_max_delay_ms: an hour), reports them journaled, and is killed. */
static void record_and_kill(unsigned first, unsigned count) {
  setenv("PERF_SDK_BATCH_MAX_DELAY_MS", "3600000", 1);
  int fd;
  pid_t pid = spawn_recorder("-", first, count, &fd);
  FILE *f = fdopen(fd, "r");
  CHECK(f != NULL);
  rounds_t *r = calloc(1, sizeof *r);
  CHECK(r != NULL);
  char line[64];
  size_t journaled = 0;
  int64_t deadline = now_ns() + (int64_t)WAIT_MS * 1000000;
  while (journaled < count && now_ns() < deadline && fgets(line, sizeof line, f))
    journaled += line[0] == 'E';
  kill(pid, SIGKILL);
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  fclose(f);
  free(r);
  unsetenv("PERF_SDK_BATCH_MAX_DELAY_MS");
  CHECK_EQ_INT(journaled, count);
}

/* The one journal in `dir` (its path into out). */
static void find_journal(const char *dir, char *out, size_t cap) {
  DIR *dd = opendir(dir);
  CHECK(dd != NULL);
  struct dirent *de;
  size_t found = 0;
  while ((de = readdir(dd)) != NULL) {
    size_t n = strlen(de->d_name);
    if (n > 8 && strcmp(de->d_name + n - 8, ".journal") == 0) {
      snprintf(out, cap, "%s/%s", dir, de->d_name);
      found++;
    }
  }
  closedir(dd);
  CHECK_EQ_INT(found, 1);
}

static void case_torn_last_record(void) {
  make_dir();
  record_and_kill(0, 3);
  char spool[160], journal[512];
  snprintf(spool, sizeof spool, "%s/report.txt.batches", g_dir);
  find_journal(spool, journal, sizeof journal);
  /* The process died inside a fourth record's write: a header that
     promises more than follows. */
  int fd = open(journal, O_WRONLY | O_APPEND);
  CHECK(fd >= 0);
  const uint8_t torn[] = {0x00, 0x01, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef, 0x0a, 0x10};
  CHECK(write(fd, torn, sizeof torn) == (ssize_t)sizeof torn);
  close(fd);
  perf_sdk_config_t cfg;
  char data_dir[128], report[128];
  journal_config(&cfg, NULL, data_dir, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  perf_sdk_stats_t st = stats();
  CHECK_EQ_INT(st.events_replayed, 3);
  CHECK_EQ_INT(st.journal_torn, 1);
  CHECK_EQ_INT(st.events_dropped_sink, 1);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  delivered_t *d = calloc(1, sizeof *d);
  CHECK(d != NULL);
  count_spool(d, spool);
  CHECK_EQ_INT(d->batches, 1);
  CHECK_EQ_INT(d->events, 3);
  for (unsigned s = 0; s < 3; s++)
    CHECK_EQ_INT(d->times[s], 1);
  CHECK_EQ_INT(d->sink_failed, 1); /* the torn record, reported with the rest */
  CHECK_EQ_INT(count_files(spool, ".journal"), 0);
  free(d);
}

/* The process died after its batch was renamed into the spool and before
   its journal was removed: the next start removes the journal and makes no
   second batch. */
static void case_journal_with_batch_not_twice(void) {
  make_dir();
  record_and_kill(0, 2);
  char spool[160], journal[512], saved[512];
  snprintf(spool, sizeof spool, "%s/report.txt.batches", g_dir);
  find_journal(spool, journal, sizeof journal);
  snprintf(saved, sizeof saved, "%s/saved.journal", g_dir);
  CHECK(link(journal, saved) == 0);
  perf_sdk_config_t cfg;
  char data_dir[128], report[128];
  journal_config(&cfg, NULL, data_dir, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT(stats().events_replayed, 2);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(count_files(spool, ".journal"), 0);
  CHECK(rename(saved, journal) == 0); /* as if the unlink had not happened */
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT(stats().events_replayed, 0);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(count_files(spool, ".journal"), 0);
  delivered_t *d = calloc(1, sizeof *d);
  CHECK(d != NULL);
  count_spool(d, spool);
  CHECK_EQ_INT(d->batches, 1);
  CHECK_EQ_INT(d->events, 2);
  free(d);
}

/* A process that found the spool's root taken wrote into <root>/<pid>/ and
   died with a batch open: the next owner of the root adopts its journal
   along with its batches and replays it. */
static void case_dead_subdir_journal_adopted(void) {
  make_dir();
  char spool[160];
  snprintf(spool, sizeof spool, "%s/report.txt.batches", g_dir);
  perf__spool_options_t so = {spool, 1u << 24, 100, 0, NULL, NULL};
  perf__spool_t *holder = NULL;
  CHECK_EQ_INT(perf__spool_open(&so, &holder), PERF_OK); /* the root is ours */
  record_and_kill(0, 2);
  perf__spool_close(holder);
  CHECK_EQ_INT(count_files(spool, ".journal"), 0); /* it is in <root>/<pid>/ */
  perf_sdk_config_t cfg;
  char data_dir[128], report[128];
  journal_config(&cfg, NULL, data_dir, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT(stats().events_replayed, 2);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  delivered_t *d = calloc(1, sizeof *d);
  CHECK(d != NULL);
  count_spool(d, spool);
  CHECK_EQ_INT(d->batches, 1);
  CHECK_EQ_INT(d->times[0], 1);
  CHECK_EQ_INT(d->times[1], 1);
  CHECK_EQ_INT(count_files(spool, ".journal"), 0);
  free(d);
}

static void case_data_dir_unusable_at_init(void) {
  make_dir();
  char file[128], data_dir[160];
  snprintf(file, sizeof file, "%s/a-file", g_dir);
  int fd = open(file, O_WRONLY | O_CREAT, 0600);
  CHECK(fd >= 0);
  close(fd);
  perf_sdk_config_t cfg;
  char unused[128], report[128];
  journal_config(&cfg, "http://127.0.0.1:1", unused, report);
  snprintf(data_dir, sizeof data_dir, "%s/data", file); /* under a regular file */
  cfg.data_dir = data_dir;
  g_log[0] = '\0';
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_SYSTEM);
  CHECKF(strstr(g_log, data_dir) && strstr(g_log, "Not a directory") && strstr(g_log, "errno 20"),
         "log: %s", g_log);
  CHECK_EQ_INT(perf_sdk_get_stats(&(perf_sdk_stats_t){0}), PERF_E_NOT_INITIALIZED);
}

static void remove_tree(const char *path) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  CHECK(system(cmd) == 0);
}

static void case_data_dir_deleted_recreated(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  perf_sdk_config_t cfg;
  char data_dir[128], report[128];
  journal_config(&cfg, http_server_url(srv), data_dir, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("seq 0"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  remove_tree(data_dir);
  CHECK_EQ_INT(perf_sdk_capture_now("seq 1"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  perf_sdk_stats_t st = stats();
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(st.events_written, 2);
  CHECK_EQ_INT(st.events_journaled, 2);
  CHECK_EQ_INT(st.batches_written, 2);
  CHECK_EQ_INT(st.batches_write_failed, 0);
  CHECK_EQ_INT(st.events_dropped_sink, 0);
  delivered_t *d = calloc(1, sizeof *d);
  CHECK(d != NULL);
  count_server(d, srv);
  CHECK_EQ_INT(d->times[0], 1);
  CHECK_EQ_INT(d->times[1], 1);
  free(d);
  http_server_stop(srv);
}

/* The spool cannot be written (its directory replaced by a file): flush
   says so, the batch's events are dropped and counted, not written, its
   drop counts (a rate-limited event) stay unreported, and all of them go
   out with the next batch that is written: here after a restart, through
   <spool>/drops. */
static void case_spool_write_fails_counted(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  perf_sdk_config_t cfg;
  char data_dir[128], report[128], spool[160];
  journal_config(&cfg, http_server_url(srv), data_dir, report);
  cfg.max_events_per_hour = 2;
  snprintf(spool, sizeof spool, "%s/spool", data_dir);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("seq 0"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  remove_tree(spool);
  int fd = open(spool, O_WRONLY | O_CREAT, 0600);
  CHECK(fd >= 0);
  close(fd);
  CHECK_EQ_INT(perf_sdk_capture_now("seq 1"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("seq 5"), PERF_E_RATE_LIMITED);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_E_SINK_FAILED);
  perf_sdk_stats_t st = stats();
  CHECK_EQ_INT(st.events_recorded, 2);
  CHECK_EQ_INT(st.events_written, 1);
  CHECK_EQ_INT(st.events_dropped_sink, 1);
  CHECK_EQ_INT(st.events_dropped_rate, 1);
  CHECK_EQ_INT(st.batches_write_failed, 1);
  CHECK_EQ_INT(st.journal_write_failed, 1);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK); /* nothing new failed */
  CHECK(unlink(spool) == 0);                    /* the shutdown's save makes it again */
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("seq 2"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  st = stats();
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(st.events_written, 1);
  CHECK_EQ_INT(st.batches_sent, 1);
  delivered_t *d = calloc(1, sizeof *d);
  CHECK(d != NULL);
  count_server(d, srv);
  CHECK_EQ_INT(d->batches, 2);
  CHECK_EQ_INT(d->times[0], 1);
  CHECK_EQ_INT(d->times[1], 0);
  CHECK_EQ_INT(d->times[2], 1);
  CHECK_EQ_INT(d->sink_failed, 1);  /* seq 1, reported by seq 2's batch */
  CHECK_EQ_INT(d->rate_limited, 1); /* seq 5, the same */
  free(d);
  http_server_stop(srv);
}

/* Drops after the last batch of a run go out with the next run's first
   batch. */
static void case_drops_kept_across_restart(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  perf_sdk_config_t cfg;
  char data_dir[128], report[128], drops[192];
  journal_config(&cfg, http_server_url(srv), data_dir, report);
  cfg.max_events_per_hour = 1;
  snprintf(drops, sizeof drops, "%s/spool/drops", data_dir);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("seq 0"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("seq 1"), PERF_E_RATE_LIMITED);
  CHECK_EQ_INT(perf_sdk_capture_now("seq 2"), PERF_E_RATE_LIMITED);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK(access(drops, F_OK) == 0);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("seq 3"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK(access(drops, F_OK) != 0); /* sent: gone */
  delivered_t *d = calloc(1, sizeof *d);
  CHECK(d != NULL);
  count_server(d, srv);
  CHECK_EQ_INT(d->batches, 2);
  CHECK_EQ_INT(d->times[0], 1);
  CHECK_EQ_INT(d->times[3], 1);
  CHECK_EQ_INT(d->rate_limited, 2);
  free(d);
  http_server_stop(srv);
}

static const test_case_t g_cases[] = {
    TEST_CASE(kill9_rounds_http),
    TEST_CASE(kill9_rounds_file),
    TEST_CASE(torn_last_record),
    TEST_CASE(journal_with_batch_not_twice),
    TEST_CASE(dead_subdir_journal_adopted),
    TEST_CASE(data_dir_unusable_at_init),
    TEST_CASE(data_dir_deleted_recreated),
    TEST_CASE(spool_write_fails_counted),
    TEST_CASE(drops_kept_across_restart),
};

int main(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[1], "child_recorder") == 0)
    child_recorder(argv[2], argv[3], (unsigned)atoi(argv[4]), (unsigned)atoi(argv[5]));
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
