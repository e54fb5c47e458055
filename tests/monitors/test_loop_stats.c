/*
 * test_loop_stats.c - the watched loop's statistics in the SDK's real
 * batches (LoopStats, proto/perf/v1/perf.proto field 15): units of work
 * counted by duration bucket, time watched and busy, stats-only batches
 * for a loop that never hangs (at most one per batch period), none for a
 * loop that was never marked, and a killed process's stats replayed from
 * its journal exactly once. The file sink's batches are read from
 * <sink_path>.batches as perf-dump reads them.
 *
 * Durations are measured around each mark on CLOCK_MONOTONIC (the SDK's
 * clock), and the expected bucket of a unit comes from its measured
 * duration, so a slow machine moves a unit to a later bucket in both the
 * expectation and the SDK's count. Waits poll with a deadline.
 */
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk/wire/batch.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/spool.h"
#include "tempdir.h"
#include "test_util.h"

#define WAIT_MS 10000
#define PERIOD_MS 100 /* batch_max_delay_ms in the period cases (its minimum) */

/* What the batches under a directory hold. */
typedef struct {
  size_t batches, stats_only, hangs, with_stats;
  perf__batch_loop_stats_t sum;
  char first_name[PATH_MAX]; /* the file name of the first batch read */
} seen_t;

static void add_batch(seen_t *s, const uint8_t *payload, size_t len) {
  Perf__V1__Batch *b = NULL;
  CHECK_EQ_INT(perf__batch_decode_stored(payload, len, 64u << 20, &b), PERF_OK);
  s->batches++;
  for (size_t i = 0; i < b->n_events; i++)
    if (b->events[i]->kind == PERF__V1__EVENT_KIND__EVENT_KIND_HANG) s->hangs++;
  perf__batch_loop_stats_t ls;
  if (perf__batch_loop_stats_of(b, &ls)) {
    s->with_stats++;
    if (b->n_events == 0) s->stats_only++;
    s->sum.watched_ns += ls.watched_ns;
    s->sum.busy_ns += ls.busy_ns;
    for (size_t i = 0; i < PERF__LOOP_BUCKETS; i++)
      s->sum.units[i] += ls.units[i];
  }
  perf__v1__batch__free_unpacked(b, NULL);
}

/* Every batch file under dir (recursively) into *s. */
static void read_batches(const char *dir, seen_t *s) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    char path[PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    size_t len = strlen(de->d_name);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      read_batches(path, s);
    } else if (len > 6 && strcmp(de->d_name + len - 6, ".batch") == 0) {
      uint8_t *payload = NULL;
      size_t plen = 0;
      const char *reason = NULL;
      CHECKF(perf__spool_read_file(path, NULL, NULL, &payload, &plen, &reason) == PERF_OK, "%s: %s",
             path, reason ? reason : "unreadable");
      add_batch(s, payload, plen);
      if (!s->first_name[0]) snprintf(s->first_name, sizeof s->first_name, "%s", de->d_name);
      free(payload);
    }
  }
  closedir(d);
}

static seen_t batches_of(const char *report) {
  char dir[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s.batches", report);
  seen_t s = {0};
  read_batches(dir, &s);
  return s;
}

static void config(perf_sdk_config_t *cfg, char *report, size_t len, unsigned threshold_ms) {
  const char *dir = tempdir_make("perf-loopst");
  snprintf(report, len, "%s/report.txt", dir);
  perf_sdk_config_init(cfg);
  cfg->app_name = "test_loop_stats";
  cfg->data_dir = dir;
  cfg->sink = PERF_SINK_FILE;
  cfg->sink_path = report;
  cfg->hang_threshold_ms = threshold_ms;
  cfg->hang_sample_interval_ms = 50;
  cfg->cpu_threshold_percent = 25600; /* no CPU events */
}

/* One unit of work of about ms milliseconds (the loop waits, as a handler
   blocked on I/O would); its measured duration's bucket counted into
   expected, the duration's bounds into *lo / *hi. */
static void unit(int ms, uint64_t expected[PERF__LOOP_BUCKETS], int64_t *lo, int64_t *hi) {
  int64_t b0 = now_ns();
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  int64_t b1 = now_ns();
  sleep_ms(ms);
  int64_t i0 = now_ns();
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  int64_t i1 = now_ns();
  unsigned blo = perf__batch_loop_bucket(i0 - b1), bhi = perf__batch_loop_bucket(i1 - b0);
  CHECKF(blo == bhi, "a unit of %lld ns sits on a bucket's bound", (long long)(i0 - b1));
  expected[blo]++;
  *lo += i0 - b1;
  *hi += i1 - b0;
}

static void check_units(const seen_t *s, const uint64_t expected[PERF__LOOP_BUCKETS]) {
  for (size_t i = 0; i < PERF__LOOP_BUCKETS; i++)
    CHECKF(s->sum.units[i] == expected[i], "bucket %zu: %llu units, expected %llu", i,
           (unsigned long long)s->sum.units[i], (unsigned long long)expected[i]);
}

/* 3 units of ~120 ms and 1 of ~600 ms (a hang over the 500 ms threshold)
   with idle time between: the buckets exactly, busy within the units'
   measured bounds, watched from the first busy mark to shutdown. */
static void case_units_by_bucket(void) {
  char report[PATH_MAX];
  perf_sdk_config_t cfg;
  config(&cfg, report, sizeof report, 500);
  int64_t t_init = now_ns();
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  uint64_t expected[PERF__LOOP_BUCKETS] = {0};
  int64_t busy_lo = 0, busy_hi = 0;
  int64_t t_first = now_ns();
  for (int i = 0; i < 3; i++) {
    unit(120, expected, &busy_lo, &busy_hi);
    sleep_ms(100); /* idle */
  }
  unit(600, expected, &busy_lo, &busy_hi);
  sleep_ms(100);
  int64_t t_last = now_ns();
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  int64_t t_end = now_ns();

  seen_t s = batches_of(report);
  check_units(&s, expected);
  /* The long unit is a hang. A short one that a starved machine stretched
     past the threshold (its measured bounds put it in a bucket from
     500 ms) may be one too: at most one hang per unit that long. */
  uint64_t long_units = 0;
  for (size_t i = 4; i < PERF__LOOP_BUCKETS; i++)
    long_units += expected[i];
  CHECK(long_units >= 1);
  CHECKF(s.hangs >= 1 && (uint64_t)s.hangs <= long_units, "%d hangs, %llu units of 500 ms or more",
         (int)s.hangs, (unsigned long long)long_units);
  CHECKF(s.sum.busy_ns >= (uint64_t)busy_lo && s.sum.busy_ns <= (uint64_t)busy_hi,
         "busy %llu ns, the units measured %lld..%lld", (unsigned long long)s.sum.busy_ns,
         (long long)busy_lo, (long long)busy_hi);
  CHECKF(s.sum.watched_ns >= (uint64_t)(t_last - t_first) &&
             s.sum.watched_ns <= (uint64_t)(t_end - t_init),
         "watched %llu ns, the loop ran %lld..%lld", (unsigned long long)s.sum.watched_ns,
         (long long)(t_last - t_first), (long long)(t_end - t_init));
}

static bool find_journal(const char *dir, char *out, size_t len);

/* Wait (deadline WAIT_MS, polling every 5 ms) for a journal with a record
   under the file sink's <report>.batches/: its path into journal. */
static void wait_journal(const char *report, char *journal, size_t len) {
  char dir[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s.batches", report);
  long long deadline = now_ms() + WAIT_MS;
  while (!find_journal(dir, journal, len)) {
    CHECKF(now_ms() < deadline, "no journal with a record in %s within %d ms", dir, WAIT_MS);
    sleep_ms(5);
  }
}

/* A loop that never hangs: its stats go into the open batch (journaled)
   every period, but a batch of stats alone is not closed per period
   (PERF__STATS_BATCH_DELAY_MS, 5 min): shutdown writes one stats-only
   batch with every unit and the watched time. */
static void case_stats_only_batch(void) {
  char report[PATH_MAX];
  perf_sdk_config_t cfg;
  config(&cfg, report, sizeof report, 1000); /* no unit here comes near a hang */
  cfg.batch_max_delay_ms = PERIOD_MS;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  uint64_t expected[PERF__LOOP_BUCKETS] = {0};
  int64_t busy_lo = 0, busy_hi = 0;
  int64_t t_first = now_ns();
  unit(20, expected, &busy_lo, &busy_hi);
  char journal[PATH_MAX + 300];
  wait_journal(report, journal, sizeof journal);
  /* Idle, watched: the next periods' stats journaled (the open batch's
     journal grows), and still no batch of stats alone after five periods. */
  struct stat j0, j1;
  CHECK(stat(journal, &j0) == 0);
  long long t_journal = now_ms(), deadline = t_journal + WAIT_MS;
  for (;;) {
    CHECK(stat(journal, &j1) == 0);
    if (j1.st_size > j0.st_size) break;
    CHECKF(now_ms() < deadline, "%s: still %lld bytes after %d ms", journal, (long long)j0.st_size,
           WAIT_MS);
    sleep_ms(5);
  }
  long long left = t_journal + 5 * PERIOD_MS - now_ms();
  if (left > 0) sleep_ms((int)left);
  seen_t s = batches_of(report);
  CHECKF(s.batches == 0, "%zu batches of stats alone within 5 periods", s.batches);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  int64_t t_end = now_ns();

  s = batches_of(report);
  CHECK_EQ_INT(s.hangs, 0);
  CHECK_EQ_INT(s.batches, 1);
  CHECK_EQ_INT(s.stats_only, 1);
  check_units(&s, expected);
  CHECK(s.sum.busy_ns >= (uint64_t)busy_lo && s.sum.busy_ns <= (uint64_t)busy_hi);
  CHECK(s.sum.watched_ns > 5 * PERIOD_MS * 1000000ULL &&
        s.sum.watched_ns <= (uint64_t)(t_end - t_first) + 500000000ULL);
}

/* A loop never marked busy was not watched: no batch at all. */
static void case_nothing_watched(void) {
  char report[PATH_MAX];
  perf_sdk_config_t cfg;
  config(&cfg, report, sizeof report, 200);
  cfg.batch_max_delay_ms = PERIOD_MS;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK); /* idle marks alone start nothing */
  sleep_ms(5 * PERIOD_MS);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  seen_t s = batches_of(report);
  CHECK_EQ_INT(s.batches, 0);
}

/* The first journal file with at least one record under dir
   (recursively): its path into out. */
static bool find_journal(const char *dir, char *out, size_t len) {
  DIR *d = opendir(dir);
  if (!d) return false;
  bool found = false;
  struct dirent *de;
  while (!found && (de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    char path[PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    size_t n = strlen(de->d_name);
    struct stat st;
    if (stat(path, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      found = find_journal(path, out, len);
    } else if (n > 8 && strcmp(de->d_name + n - 8, ".journal") == 0 && st.st_size > 8) {
      snprintf(out, len, "%s", path);
      found = true;
    }
  }
  closedir(d);
  return found;
}

/* A process killed (SIGKILL) with a period's loop stats in its open batch:
   the next start replays its journal into one batch of the same id with
   those stats, exactly once, and removes the journal. */
static void case_journal_replay(void) {
  char report[PATH_MAX];
  perf_sdk_config_t cfg;
  config(&cfg, report, sizeof report, 1000);
  cfg.batch_max_delay_ms = 3000; /* the stats come after 3 s, their batch closes 3 s later */
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    if (perf_sdk_init(&cfg) != PERF_OK) _exit(3);
    for (int i = 0; i < 2; i++) {
      perf_sdk_loop_busy();
      perf_sdk_loop_idle();
    }
    for (;;)
      pause(); /* killed by the parent */
  }
  char journal[PATH_MAX + 300];
  wait_journal(report, journal, sizeof journal);
  CHECK_EQ_INT(kill(child, SIGKILL), 0);
  int status = 0;
  CHECK_EQ_INT(waitpid(child, &status, 0), child);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  seen_t before = batches_of(report);
  CHECK_EQ_INT(before.batches, 0); /* the stats were in the open batch only */

  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK); /* replays the journal; no mark here */
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  seen_t s = batches_of(report);
  CHECK_EQ_INT(s.batches, 1);
  CHECK_EQ_INT(s.stats_only, 1);
  uint64_t expected[PERF__LOOP_BUCKETS] = {2}; /* two units of a few microseconds */
  check_units(&s, expected);
  CHECK(s.sum.watched_ns > 0);
  char dir[PATH_MAX + 16], left[PATH_MAX + 300];
  snprintf(dir, sizeof dir, "%s.batches", report);
  CHECK(!find_journal(dir, left, sizeof left));
  /* The batch carries the journal's id: "<32 hex>.journal" in its file name. */
  const char *base = strrchr(journal, '/') + 1;
  char id[33];
  snprintf(id, sizeof id, "%.32s", base);
  CHECKF(s.first_name[0] && strstr(s.first_name, id), "batch %s, journal %s", s.first_name, base);
}

static const test_case_t g_cases[] = {
    TEST_CASE(units_by_bucket),
    TEST_CASE(stats_only_batch),
    TEST_CASE(nothing_watched),
    TEST_CASE(journal_replay),
};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
