/*
 * test_first_moments.c - the monitors from the first moment after
 * perf_sdk_init, as an app meets them: nothing is captured, compiled or
 * loaded before init (no warm-up), each case is a fresh process, and the
 * app's threads do what small programs do right after init.
 *
 *  - CPU: a thread burns a core while the main thread waits in poll(), in
 *    sleep(), in pthread_join() on it, or marked idle in epoll_wait():
 *    exactly one CPU event, of that thread, with its functions, and the
 *    main thread's wait returns as it would without the SDK.
 *  - Hangs: a unit of work of 1 s as the first thing after init, on the
 *    thread that called init and on a thread that called
 *    perf_sdk_watch_current_thread: one hang whose duration is the busy
 *    time the test measured (within one sampling interval), sampled from
 *    its threshold on at every interval (the samples' times are read from
 *    the file sink's batch records: Event.sample_offsets_micros).
 *
 * Linked with the front (libperfsdk.so) as apps link it, so init loads the
 * core, and the first capture loads libdw and compiles unwind rules, inside
 * the measured moments. Built -O2 -fno-optimize-sibling-calls with noinline
 * chains (stack_assert.h's CHAIN).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/spool.h"
#include "sdk_report.h"
#include "sdk_util.h"
#include "stack_assert.h"
#include "tempdir.h"
#include "test_util.h"

#define WAIT_MS 20000    /* every wait for the SDK gives up after this */
#define CPU_WAIT_MS 6000 /* the main thread's wait beside the burning thread */
#define HANG_MS 1000     /* the first unit of work */
#define THRESHOLD_MS 200 /* hang_threshold_ms */
#define INTERVAL_MS 50   /* hang_sample_interval_ms */

static volatile unsigned long g_sink;

static pid_t gettid_now(void) {
  return (pid_t)syscall(SYS_gettid);
}

/* ---- call chains ----------------------------------------------------------- */

static atomic_int g_burn_stop;

/* Burns CPU until the deadline or g_burn_stop, reading the clock only every
   few microseconds so that samples land in the caller. */
static inline __attribute__((always_inline)) unsigned long burn(int64_t deadline) {
  unsigned long x = 7;
  do {
    for (int i = 0; i < 4096; i++)
      x = x * 2862933555777941757UL + 3;
  } while (now_ns() < deadline && !atomic_load_explicit(&g_burn_stop, memory_order_relaxed));
  return x;
}

static CHAIN unsigned long burst_leaf(int64_t deadline) {
  return burn(deadline) + 1;
}
static CHAIN unsigned long burst_outer(int ms) {
  return burst_leaf(now_ns() + (int64_t)ms * 1000000) + 1;
}

static CHAIN unsigned long first_hang_leaf(int64_t deadline) {
  return burn(deadline) + 1;
}
static CHAIN unsigned long first_hang_outer(int ms) {
  return first_hang_leaf(now_ns() + (int64_t)ms * 1000000) + 1;
}

/* ---- set-up ---------------------------------------------------------------- */

static void config(perf_sdk_config_t *cfg, char *report, size_t len) {
  const char *dir = tempdir_make("perf-first");
  snprintf(report, len, "%s/report.txt", dir);
  perf_sdk_config_init(cfg);
  cfg->app_name = "test_first_moments";
  cfg->data_dir = dir;
  cfg->sink = PERF_SINK_FILE;
  cfg->sink_path = report;
  cfg->hang_threshold_ms = THRESHOLD_MS;
  cfg->hang_sample_interval_ms = INTERVAL_MS;
  cfg->cpu_threshold_percent = 25600; /* no CPU events unless a case wants them */
}

/* The events of kind `kind` in the file sink's batch records (after
   shutdown: every batch closed), copied out one at a time to `fn`. */
static size_t for_each_batch_event(const char *report, Perf__V1__EventKind kind,
                                   void (*fn)(const Perf__V1__Event *, void *), void *arg) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s.batches", report);
  DIR *d = opendir(dir);
  CHECKF(d != NULL, "%s: %s", dir, strerror(errno));
  size_t seen = 0;
  for (struct dirent *de; (de = readdir(d)) != NULL;) {
    size_t n = strlen(de->d_name);
    if (n < 6 || strcmp(de->d_name + n - 6, ".batch") != 0) continue;
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    uint8_t *payload = NULL;
    size_t plen = 0;
    const char *reason = NULL;
    CHECKF(perf__spool_read_file(path, NULL, NULL, &payload, &plen, &reason) == PERF_OK, "%s: %s",
           path, reason ? reason : "unreadable");
    Perf__V1__Batch *b = NULL;
    CHECK_EQ_INT(perf__batch_decode_stored(payload, plen, 64u << 20, &b), PERF_OK);
    for (size_t i = 0; i < b->n_events; i++)
      if (b->events[i]->kind == kind) {
        fn(b->events[i], arg);
        seen++;
      }
    perf__v1__batch__free_unpacked(b, NULL);
    free(payload);
  }
  closedir(d);
  return seen;
}

/* ---- CPU: a burning thread beside a waiting main thread -------------------- */

typedef enum { WAIT_POLL, WAIT_SLEEP, WAIT_JOIN, WAIT_IDLE } main_wait_t;

static atomic_int g_burner_tid;

static void *burner_main(void *arg) {
  int ms = *(const int *)arg;
  atomic_store(&g_burner_tid, gettid_now());
  g_sink = burst_outer(ms);
  return NULL;
}

/* The main thread's wait of CPU_WAIT_MS, as the app would make it; checks
   it returned as it does without the SDK (no EINTR, not early). */
static void main_waits(main_wait_t how, pthread_t burner) {
  int64_t t0 = now_ns();
  switch (how) {
  case WAIT_POLL: CHECK_EQ_INT(poll(NULL, 0, CPU_WAIT_MS), 0); break;
  case WAIT_SLEEP: CHECK_EQ_INT(sleep(CPU_WAIT_MS / 1000), 0); break;
  case WAIT_JOIN: /* the burner stops by itself after CPU_WAIT_MS */
    CHECK_EQ_INT(pthread_join(burner, NULL), 0);
    break;
  case WAIT_IDLE: {
    CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
    int ep = epoll_create1(EPOLL_CLOEXEC), efd = eventfd(0, EFD_CLOEXEC);
    CHECK(ep >= 0 && efd >= 0);
    struct epoll_event e = {.events = EPOLLIN, .data.fd = efd};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &e) == 0);
    struct epoll_event got;
    CHECK_EQ_INT(epoll_wait(ep, &got, 1, CPU_WAIT_MS), 0);
    close(efd);
    close(ep);
    break;
  }
  }
  int64_t waited_ms = (now_ns() - t0) / 1000000;
  CHECKF(waited_ms >= CPU_WAIT_MS - 1, "the main thread's wait returned after %lld ms of %d",
         (long long)waited_ms, CPU_WAIT_MS);
}

static void cpu_burst_beside(main_wait_t how) {
  char report[PATH_MAX];
  perf_sdk_config_t cfg;
  config(&cfg, report, sizeof report);
  /* The burning thread may share the two cores with a whole suite: a
     twentieth of a core over the window is what it still gets there, and
     nothing else of this process comes close (the main thread waits). */
  cfg.cpu_threshold_percent = 5;
  cfg.cpu_window_ms = 1000;
  cfg.cpu_burst_ms = 1000;
  cfg.cpu_sample_hz = 100;
  cfg.cpu_cooldown_ms = 600000; /* one burst per case */
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  pid_t main_tid = gettid_now();
  int burn_ms = CPU_WAIT_MS;
  pthread_t burner;
  CHECK(pthread_create(&burner, NULL, burner_main, &burn_ms) == 0);
  main_waits(how, burner);
  atomic_store(&g_burn_stop, 1);
  if (how != WAIT_JOIN) CHECK_EQ_INT(pthread_join(burner, NULL), 0);
  if (how == WAIT_IDLE) CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  perf_sdk_stats_t st;
  SDK_WAIT_FOR_STATS(st, st.cpu_bursts >= 1 && st.events_recorded >= 1, WAIT_MS, 10);
  CHECK_EQ_INT(perf_sdk_shutdown(10000), PERF_OK);
  st = sdk_stats();
  CHECKF(st.cpu_bursts == 1 && st.cpu_bursts_empty == 0 && st.events_written == 1,
         "bursts %llu (empty %llu), events written %llu", (unsigned long long)st.cpu_bursts,
         (unsigned long long)st.cpu_bursts_empty, (unsigned long long)st.events_written);
  CHECK_EQ_INT(st.hangs_detected, 0);

  char *text = read_text(report);
  CHECK_EQ_INT(count_events(text, NULL), 1);
  event_t ev;
  find_event(text, "cpu", 0, &ev);
  pid_t burner_tid = atomic_load(&g_burner_tid);
  CHECKF(ev.thread == burner_tid, "the CPU event's thread is %d, the burning thread %d:\n%s",
         ev.thread, (int)burner_tid, ev.text);
  CHECK(ev.samples >= 1);
  CHECK_EQ_INT(ev.samples, event_stack_samples(&ev));
  const char *chain[] = {"burst_leaf", "burst_outer"};
  expect_chain(&ev, 0, chain, ARRAY_LEN(chain));
  ev_stack_t s;
  for (size_t i = 0; event_stack(&ev, i, &s); i++) {
    CHECKF(s.thread == burner_tid && s.thread != main_tid, "stack of thread %d:\n%s", s.thread,
           ev.text);
    free(s.text);
  }
  event_free(&ev);
  free(text);
}

static void case_cpu_burst_beside_poll(void) {
  cpu_burst_beside(WAIT_POLL);
}
static void case_cpu_burst_beside_sleep(void) {
  cpu_burst_beside(WAIT_SLEEP);
}
static void case_cpu_burst_beside_join(void) {
  cpu_burst_beside(WAIT_JOIN);
}
static void case_cpu_burst_beside_idle_loop(void) {
  cpu_burst_beside(WAIT_IDLE);
}

/* ---- hangs: the first unit of work after init ------------------------------- */

typedef struct {
  int64_t duration_us;
  size_t samples, failed;
  int64_t offsets_us[256]; /* of the samples, from the event's start */
} hang_seen_t;

/* sample_offsets_micros are each sample's time minus the previous one's
   (the first: minus the event's start); a failed capture's sample_stacks
   entry is 0. */
static void note_hang(const Perf__V1__Event *e, void *arg) {
  hang_seen_t *h = arg;
  h->duration_us = e->duration_nanos / 1000;
  h->samples = e->n_sample_offsets_micros;
  int64_t at = 0;
  for (size_t i = 0; i < e->n_sample_offsets_micros && i < ARRAY_LEN(h->offsets_us); i++) {
    h->offsets_us[i] = at += e->sample_offsets_micros[i];
    h->failed += i < e->n_sample_stacks && e->sample_stacks[i] == 0;
  }
}

/* The unit of work: HANG_MS of burning between a busy and an idle mark;
   its busy time as measured around the marks, lo..hi microseconds. */
static void first_unit(int64_t *lo_us, int64_t *hi_us) {
  int64_t a0 = now_ns();
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  int64_t a1 = now_ns();
  g_sink = first_hang_outer(HANG_MS);
  int64_t b0 = now_ns();
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  int64_t b1 = now_ns();
  *lo_us = (b0 - a1) / 1000;
  *hi_us = (b1 - a0) / 1000;
}

/* One hang in the report and the batch: its duration the measured busy time
   within one interval, no failed sample, and sampled from its threshold on
   at every interval. A loaded machine makes the monitor (and the sampled
   thread, which answers the signal only once it runs) late at any sample;
   what the SDK must not do is make the first one later than the others:
     - the first sample's delay past the threshold is at most an interval,
       or twice the largest delay of a later sample past its due time
       (the previous sample's time plus the interval);
     - as many samples as the busy time holds, less one (the last may find
       the unit ended), less one per whole interval some sample (or the
       unit's end after the last sample) came late: the samples the
       machine's delays account for. */
static void expect_first_hang(const char *report, pid_t tid, int64_t lo_us, int64_t hi_us) {
  char *text = read_text(report);
  CHECK_EQ_INT(count_events(text, NULL), 1);
  event_t ev;
  find_event(text, "hang", 0, &ev);
  CHECK_EQ_INT(ev.thread, tid);
  const char *chain[] = {"first_hang_leaf", "first_hang_outer"};
  expect_chain(&ev, 0, chain, ARRAY_LEN(chain));
  event_free(&ev);
  free(text);

  hang_seen_t h = {0};
  CHECK_EQ_INT(for_each_batch_event(report, PERF__V1__EVENT_KIND__EVENT_KIND_HANG, note_hang, &h),
               1);
  /* In every failure message: what was seen. */
  fprintf(stderr, "hang of %lld us, %zu samples at (ms from its start):", (long long)h.duration_us,
          h.samples);
  for (size_t i = 0; i < h.samples && i < ARRAY_LEN(h.offsets_us); i++)
    fprintf(stderr, " %.1f", (double)h.offsets_us[i] / 1000);
  fprintf(stderr, "\n");
  const int64_t interval = INTERVAL_MS * 1000, threshold = THRESHOLD_MS * 1000;
  CHECKF(h.duration_us >= lo_us - interval && h.duration_us <= hi_us + interval,
         "hang of %lld us for a unit of %lld..%lld us (interval %lld us)", (long long)h.duration_us,
         (long long)lo_us, (long long)hi_us, (long long)interval);
  CHECKF(h.failed == 0, "%zu of %zu samples failed", h.failed, h.samples);
  CHECK(h.samples >= 1 && h.samples <= ARRAY_LEN(h.offsets_us));
  int64_t first_delay = h.offsets_us[0] - threshold, later_delay = 0, late_intervals = 0;
  CHECKF(first_delay >= 0, "first sample at %lld us, before the threshold (%lld us)",
         (long long)h.offsets_us[0], (long long)threshold);
  late_intervals += first_delay / interval;
  for (size_t i = 1; i <= h.samples; i++) {
    int64_t at = i < h.samples ? h.offsets_us[i] : lo_us; /* the end: after the last sample */
    int64_t delay = at - h.offsets_us[i - 1] - interval;
    if (i < h.samples && delay > later_delay) later_delay = delay;
    if (delay > 0) late_intervals += delay / interval;
  }
  CHECKF(first_delay <= interval || first_delay <= 2 * later_delay,
         "first sample %lld us after the threshold; later samples at most %lld us late",
         (long long)first_delay, (long long)later_delay);
  int64_t due = (lo_us - threshold) / interval + 1;
  CHECKF((int64_t)h.samples >= due - 1 - late_intervals && (int64_t)h.samples <= due + 1,
         "%zu samples of a %lld us unit: %lld due (threshold %lld us, every %lld us), %lld "
         "intervals lost to late samples",
         h.samples, (long long)lo_us, (long long)due, (long long)threshold, (long long)interval,
         (long long)late_intervals);
}

static void case_hang_first_after_init(void) {
  char report[PATH_MAX];
  perf_sdk_config_t cfg;
  config(&cfg, report, sizeof report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  int64_t lo, hi;
  first_unit(&lo, &hi);
  CHECK_EQ_INT(perf_sdk_shutdown(10000), PERF_OK);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(st.hangs_detected, 1);
  CHECK_EQ_INT(st.events_written, 1);
  expect_first_hang(report, gettid_now(), lo, hi);
}

typedef struct {
  int64_t lo, hi;
  pid_t tid;
} watched_unit_t;

static void *watched_thread_main(void *arg) {
  watched_unit_t *u = arg;
  u->tid = gettid_now();
  CHECK_EQ_INT(perf_sdk_watch_current_thread(), PERF_OK);
  first_unit(&u->lo, &u->hi);
  return NULL;
}

static void case_hang_first_after_watch_current_thread(void) {
  char report[PATH_MAX];
  perf_sdk_config_t cfg;
  config(&cfg, report, sizeof report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  watched_unit_t u = {0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, watched_thread_main, &u) == 0);
  CHECK_EQ_INT(pthread_join(t, NULL), 0);
  CHECK_EQ_INT(perf_sdk_shutdown(10000), PERF_OK);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(st.hangs_detected, 1);
  CHECK_EQ_INT(st.events_written, 1);
  expect_first_hang(report, u.tid, u.lo, u.hi);
}

static const test_case_t g_cases[] = {
    TEST_CASE(cpu_burst_beside_poll),
    TEST_CASE(cpu_burst_beside_sleep),
    TEST_CASE(cpu_burst_beside_join),
    TEST_CASE(cpu_burst_beside_idle_loop),
    /* Every sample at its time: the hung thread and the monitor must get
       a core on time, which a -j8 suite on 2 cores denies. */
    TEST_CASE_SERIAL(hang_first_after_init, "counts the samples of a 1 s hang and their times"),
    TEST_CASE_SERIAL(hang_first_after_watch_current_thread,
                     "counts the samples of a 1 s hang and their times"),
};

int main(int argc, char **argv) {
  unsetenv("PERF_SDK_DISABLED");
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
