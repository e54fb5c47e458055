/*
 * test_worker.c - the worker threads (sdk/base/worker.c) with real threads:
 * start and stop, the tid registry, the thread's name, waits on the
 * monotonic clock, notify, a stop that times out on a thread ignoring it
 * (which then frees itself), and the registry's capacity. Each case runs
 * in its own process: `test_worker <case>`.
 *
 * Nothing sleeps hoping for timing: the cases wait for a flag with a
 * deadline, and durations are measured on CLOCK_MONOTONIC, the worker's own
 * clock; upper bounds are generous (a loaded 2-core machine, sanitizers).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk/base/worker.h"
#include "test_util.h"

#define MS 1000000LL
#define WAIT_MS 10000 /* every wait for a thread gives up after this */
#define SLACK_MS 3000 /* how late a deadline may be kept on a loaded machine */

static pid_t gettid_now(void) {
  return (pid_t)syscall(SYS_gettid);
}

/* Poll until `cond` holds, failing after WAIT_MS. */
#define WAIT_FOR(cond)                                                                             \
  do {                                                                                             \
    int64_t wait_deadline_ = now_ns() + WAIT_MS * MS;                                              \
    while (!(cond)) {                                                                              \
      CHECKF(now_ns() < wait_deadline_, "waited %d ms for %s", WAIT_MS, #cond);                    \
      sleep_ms(1);                                                                                 \
    }                                                                                              \
  } while (0)

/* What a worker's body saw and did; the test thread reads it. */
typedef struct {
  perf__worker_t *w;    /* as start stored it: read by the body through arg */
  atomic_int tid;       /* the body's gettid */
  atomic_bool saw_self; /* the body found its worker in w (set before it ran) */
  char name[16];        /* the body's prctl name, set before `tid` */
  atomic_bool release;  /* ignore_stop_main: return now */
  /* under the worker's lock */
  bool ready, go;
  int64_t waited_from, waited_until, woke_at;
} probe_t;

static probe_t g_probe;

static void note_self(perf__worker_t *w, probe_t *p) {
  prctl(PR_GET_NAME, p->name, 0, 0, 0);
  atomic_store(&p->saw_self, p->w == w);
  atomic_store(&p->tid, gettid_now());
}

/* Runs until asked to stop. */
static void until_stopped_main(perf__worker_t *w, void *arg) {
  note_self(w, arg);
  perf__worker_lock(w);
  while (!perf__worker_stopping(w))
    perf__worker_wait(w, 0);
  perf__worker_unlock(w);
}

/* Ignores stop until the test releases it. */
static void ignore_stop_main(perf__worker_t *w, void *arg) {
  probe_t *p = arg;
  note_self(w, p);
  while (!atomic_load(&p->release))
    sleep_ms(1);
}

/* One wait with a deadline nobody interrupts. */
static void wait_deadline_main(perf__worker_t *w, void *arg) {
  probe_t *p = arg;
  note_self(w, p);
  perf__worker_lock(w);
  p->waited_from = now_ns();
  p->waited_until = p->waited_from + 300 * MS;
  perf__worker_wait(w, p->waited_until);
  p->woke_at = now_ns();
  perf__worker_unlock(w);
  while (!perf__worker_stopping(w))
    perf__worker_sleep_until(w, now_ns() + 1000 * MS);
}

/* Waits (60 s deadline) until the test sets go and notifies. */
static void wait_for_go_main(perf__worker_t *w, void *arg) {
  probe_t *p = arg;
  note_self(w, p);
  perf__worker_lock(w);
  p->ready = true;
  perf__worker_notify_locked(w);
  while (!p->go)
    perf__worker_wait(w, now_ns() + 60000 * MS);
  p->woke_at = now_ns();
  perf__worker_unlock(w);
}

/* Sleeps 300 ms whatever notifications come. */
static void sleep_through_main(perf__worker_t *w, void *arg) {
  probe_t *p = arg;
  note_self(w, p);
  perf__worker_lock(w);
  p->ready = true;
  perf__worker_unlock(w);
  int64_t from = now_ns();
  perf__worker_sleep_until(w, from + 300 * MS);
  perf__worker_lock(w);
  p->waited_from = from;
  p->waited_until = from + 300 * MS;
  p->woke_at = now_ns();
  perf__worker_unlock(w);
}

static bool locked_flag(perf__worker_t *w, const bool *flag) {
  perf__worker_lock(w);
  bool v = *flag;
  perf__worker_unlock(w);
  return v;
}

static int64_t locked_i64(perf__worker_t *w, const int64_t *v) {
  perf__worker_lock(w);
  int64_t x = *v;
  perf__worker_unlock(w);
  return x;
}

static bool task_exists(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
  struct stat st;
  return stat(path, &st) == 0;
}

static void task_name(pid_t tid, char *buf, size_t len) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
  FILE *f = fopen(path, "r");
  CHECKF(f != NULL, "%s: %s", path, strerror(errno));
  CHECK(fgets(buf, (int)len, f) != NULL);
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
}

/* ---- cases --------------------------------------------------------------- */

static void case_start_registers_tid(void) {
  CHECK(!perf__worker_is_sdk_thread(gettid_now()));
  CHECK(!perf__worker_is_sdk_thread(0));
  CHECK(!perf__worker_is_sdk_thread(-1)); /* a reserved slot's mark is no tid */
  CHECK_EQ_INT(perf__worker_start("perf-test", until_stopped_main, &g_probe, &g_probe.w), PERF_OK);
  pid_t tid = perf__worker_tid(g_probe.w);
  CHECK(tid > 0);
  CHECK(perf__worker_is_sdk_thread(tid)); /* registered before start returned */
  CHECK(!perf__worker_is_sdk_thread(gettid_now()));
  WAIT_FOR(atomic_load(&g_probe.tid) != 0);
  CHECK_EQ_INT(atomic_load(&g_probe.tid), tid); /* the thread's own gettid */
  CHECK(atomic_load(&g_probe.saw_self));
  CHECK(!perf__worker_stopping(g_probe.w));
  CHECK_EQ_INT(perf__worker_stop(g_probe.w, now_ns() + WAIT_MS * MS), PERF_OK);
  CHECK(!perf__worker_is_sdk_thread(tid));
}

static void case_named(void) {
  CHECK_EQ_INT(
      perf__worker_start("perf-a-long-thread-name", until_stopped_main, &g_probe, &g_probe.w),
      PERF_OK);
  pid_t tid = perf__worker_tid(g_probe.w);
  WAIT_FOR(atomic_load(&g_probe.tid) != 0);
  CHECK_EQ_INT(strcmp(g_probe.name, "perf-a-long-thr"), 0); /* named before fn ran */
  char comm[32];
  task_name(tid, comm, sizeof comm);
  CHECKF(strcmp(comm, "perf-a-long-thr") == 0, "comm=%s", comm);
  CHECK_EQ_INT(perf__worker_stop(g_probe.w, 0), PERF_OK);
}

static void case_wait_until_deadline(void) {
  CHECK_EQ_INT(perf__worker_start("perf-test", wait_deadline_main, &g_probe, &g_probe.w), PERF_OK);
  perf__worker_t *w = g_probe.w;
  WAIT_FOR(locked_i64(w, &g_probe.woke_at) != 0);
  int64_t until = locked_i64(w, &g_probe.waited_until), woke = locked_i64(w, &g_probe.woke_at);
  CHECKF(woke >= until, "woke %lld ms before the deadline", (long long)((until - woke) / MS));
  CHECKF(woke - until < SLACK_MS * MS, "woke %lld ms after the deadline",
         (long long)((woke - until) / MS));
  CHECK_EQ_INT(perf__worker_stop(w, 0), PERF_OK);
}

static void case_wait_past_deadline_returns(void) {
  CHECK_EQ_INT(perf__worker_start("perf-test", until_stopped_main, &g_probe, &g_probe.w), PERF_OK);
  perf__worker_t *w = g_probe.w;
  /* Any thread may wait on the worker's condition; a past deadline returns
     at once, without a notification. */
  perf__worker_lock(w);
  int64_t t0 = now_ns();
  perf__worker_wait(w, t0 - 1000 * MS);
  perf__worker_wait(w, 1); /* the clock's first nanosecond */
  int64_t took = now_ns() - t0;
  perf__worker_unlock(w);
  CHECKF(took < SLACK_MS * MS, "waits past their deadline took %lld ms", (long long)(took / MS));
  CHECK_EQ_INT(perf__worker_stop(w, 0), PERF_OK);
}

static void case_notify_wakes_waiter(void) {
  CHECK_EQ_INT(perf__worker_start("perf-test", wait_for_go_main, &g_probe, &g_probe.w), PERF_OK);
  perf__worker_t *w = g_probe.w;
  WAIT_FOR(locked_flag(w, &g_probe.ready));
  perf__worker_lock(w);
  g_probe.go = true;
  perf__worker_unlock(w);
  int64_t notified = now_ns();
  perf__worker_notify(w);
  WAIT_FOR(locked_i64(w, &g_probe.woke_at) != 0); /* long before its 60 s deadline */
  CHECK(locked_i64(w, &g_probe.woke_at) >= notified);
  CHECK_EQ_INT(perf__worker_stop(w, 0), PERF_OK);
}

static void case_sleep_ignores_notify(void) {
  CHECK_EQ_INT(perf__worker_start("perf-test", sleep_through_main, &g_probe, &g_probe.w), PERF_OK);
  perf__worker_t *w = g_probe.w;
  WAIT_FOR(locked_flag(w, &g_probe.ready));
  while (locked_i64(w, &g_probe.woke_at) == 0) {
    perf__worker_notify(w);
    sleep_ms(5);
  }
  int64_t until = locked_i64(w, &g_probe.waited_until), woke = locked_i64(w, &g_probe.woke_at);
  CHECKF(woke >= until, "woke %lld ms before the deadline", (long long)((until - woke) / MS));
  CHECK_EQ_INT(perf__worker_stop(w, 0), PERF_OK);
}

static void case_stop_wakes_sleeper(void) {
  CHECK_EQ_INT(perf__worker_start("perf-test", until_stopped_main, &g_probe, &g_probe.w), PERF_OK);
  WAIT_FOR(atomic_load(&g_probe.tid) != 0);
  int64_t t0 = now_ns();
  CHECK_EQ_INT(perf__worker_stop(g_probe.w, t0 + 60000 * MS), PERF_OK);
  int64_t took = now_ns() - t0;
  CHECKF(took < SLACK_MS * MS, "stop took %lld ms", (long long)(took / MS));
}

static void case_stop_timeout_detaches(void) {
  CHECK_EQ_INT(perf__worker_start("perf-stuck", ignore_stop_main, &g_probe, &g_probe.w), PERF_OK);
  pid_t tid = perf__worker_tid(g_probe.w);
  WAIT_FOR(atomic_load(&g_probe.tid) != 0);
  int64_t t0 = now_ns(), deadline = t0 + 300 * MS;
  CHECK_EQ_INT(perf__worker_stop(g_probe.w, deadline), PERF_E_TIMEOUT);
  int64_t back = now_ns();
  CHECKF(back >= deadline, "gave up %lld ms early", (long long)((deadline - back) / MS));
  CHECKF(back - deadline < SLACK_MS * MS, "gave up %lld ms late",
         (long long)((back - deadline) / MS));
  g_probe.w = NULL;                       /* the thread owns it now */
  CHECK(perf__worker_is_sdk_thread(tid)); /* still running fn */
  CHECK(task_exists(tid));
  /* Once fn returns the thread unregisters, frees the worker (ASan's leak
     check at exit would see it otherwise) and ends. */
  atomic_store(&g_probe.release, true);
  WAIT_FOR(!perf__worker_is_sdk_thread(tid));
  WAIT_FOR(!task_exists(tid));
}

static void case_registry_capacity(void) {
  static probe_t probes[PERF__WORKER_MAX + 1];
  for (size_t i = 0; i < PERF__WORKER_MAX; i++)
    CHECK_EQ_INT(perf__worker_start("perf-test", until_stopped_main, &probes[i], &probes[i].w),
                 PERF_OK);
  perf__worker_t *extra = probes[0].w; /* a failed start sets it to NULL */
  CHECK_EQ_INT(
      perf__worker_start("perf-test", until_stopped_main, &probes[PERF__WORKER_MAX], &extra),
      PERF_E_NO_MEMORY);
  CHECK(extra == NULL);
  for (size_t i = 0; i < PERF__WORKER_MAX; i++) {
    pid_t tid = perf__worker_tid(probes[i].w);
    CHECK(perf__worker_is_sdk_thread(tid));
    for (size_t j = 0; j < i; j++)
      CHECK(perf__worker_tid(probes[j].w) != tid);
  }
  /* A stopped worker's slot is free again. */
  pid_t first = perf__worker_tid(probes[0].w);
  CHECK_EQ_INT(perf__worker_stop(probes[0].w, 0), PERF_OK);
  CHECK(!perf__worker_is_sdk_thread(first));
  CHECK_EQ_INT(perf__worker_start("perf-test", until_stopped_main, &probes[0], &probes[0].w),
               PERF_OK);
  pid_t tids[PERF__WORKER_MAX];
  for (size_t i = 0; i < PERF__WORKER_MAX; i++) {
    tids[i] = perf__worker_tid(probes[i].w);
    CHECK_EQ_INT(perf__worker_stop(probes[i].w, 0), PERF_OK);
  }
  for (size_t i = 0; i < PERF__WORKER_MAX; i++)
    CHECK(!perf__worker_is_sdk_thread(tids[i]));
}

static const test_case_t g_cases[] = {
    TEST_CASE(start_registers_tid), TEST_CASE(named),
    TEST_CASE(wait_until_deadline), TEST_CASE(wait_past_deadline_returns),
    TEST_CASE(notify_wakes_waiter), TEST_CASE(sleep_ignores_notify),
    TEST_CASE(stop_wakes_sleeper),  TEST_CASE(stop_timeout_detaches),
    TEST_CASE(registry_capacity),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
