/*
 * test_thread_cpu.c - unit test of sdk/platform/linux/thread_cpu.c: per-thread
 * CPU clocks read by tid, and the thread set's re-enumeration rules (a thread
 * exits, appears, is replaced by another one, comes and goes between two
 * reads; nothing changes), its bound, and its state after an allocation
 * failure (realloc is wrapped: link with -Wl,--wrap=realloc).
 *
 * Every case starts from a process with one thread and waits for thread
 * starts, exits and CPU burns by polling with generous deadlines.
 * `test_thread_cpu` runs every case; `test_thread_cpu <case>` runs one.
 */
#include "sdk/monitors/thread_cpu.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk/base/threads.h"

#define MS 1000000LL
#define DEADLINE_NS (30000 * MS) /* for anything we wait for: machines under ASan can be slow */

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static int64_t clock_ns(clockid_t clock) {
  struct timespec ts;
  CHECK(clock_gettime(clock, &ts) == 0);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void nap_ms(int ms) {
  struct timespec ts = {0, ms * MS};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

#define WAIT_UNTIL(cond, ...)                                                                      \
  do {                                                                                             \
    int64_t wait_deadline_ = clock_ns(CLOCK_MONOTONIC) + DEADLINE_NS;                              \
    while (!(cond)) {                                                                              \
      CHECKF(clock_ns(CLOCK_MONOTONIC) < wait_deadline_, __VA_ARGS__);                             \
      nap_ms(1);                                                                                   \
    }                                                                                              \
  } while (0)

/* Use `ms` of the calling thread's own CPU time (its CLOCK_THREAD_CPUTIME_ID,
   independent of the code under test). */
static void burn_cpu_ms(int ms) {
  int64_t start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  int64_t deadline = clock_ns(CLOCK_MONOTONIC) + DEADLINE_NS;
  volatile uint64_t x = 1;
  while (clock_ns(CLOCK_THREAD_CPUTIME_ID) - start < ms * MS) {
    for (int i = 0; i < 1000; i++)
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    CHECKF(clock_ns(CLOCK_MONOTONIC) < deadline, "burning %d ms of CPU took over 30 s", ms);
  }
}

static size_t thread_count(void) {
  pid_t *tids = NULL;
  size_t n = 0;
  CHECK_EQ_INT(perf__thread_list(&tids, &n), PERF_OK);
  free(tids);
  return n;
}

static bool task_exists(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
  return access(path, F_OK) == 0;
}

static long task_dir_nlink(void) {
  struct stat st;
  CHECK(stat("/proc/self/task", &st) == 0);
  return (long)st.st_nlink;
}

static void wait_single_thread(void) {
  WAIT_UNTIL(thread_count() == 1, "threads of earlier cases still alive: %zu", thread_count());
}

/* A thread that blocks on a condition variable (no CPU) until told to burn
   CPU or to quit; or, with exit_after_burn_ms, burns that much and exits. */
typedef struct worker_s {
  pthread_t thread;
  atomic_int tid;
  atomic_int burns_done;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int burn_ms; /* request, under mu */
  bool quit;   /* under mu */
  int exit_after_burn_ms;
} worker_t;

static void *worker_main(void *arg) {
  worker_t *w = arg;
  atomic_store(&w->tid, (int)perf__gettid());
  if (w->exit_after_burn_ms) {
    burn_cpu_ms(w->exit_after_burn_ms);
    return NULL;
  }
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->quit && w->burn_ms == 0)
      pthread_cond_wait(&w->cv, &w->mu);
    if (w->quit) break;
    int ms = w->burn_ms;
    w->burn_ms = 0;
    pthread_mutex_unlock(&w->mu);
    burn_cpu_ms(ms);
    atomic_fetch_add(&w->burns_done, 1);
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

static pid_t worker_start(worker_t *w, int exit_after_burn_ms) {
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  w->exit_after_burn_ms = exit_after_burn_ms;
  CHECK(pthread_create(&w->thread, NULL, worker_main, w) == 0);
  WAIT_UNTIL(atomic_load(&w->tid) != 0, "a new thread did not start");
  return (pid_t)atomic_load(&w->tid);
}

static void worker_burn(worker_t *w, int ms) {
  int before = atomic_load(&w->burns_done);
  pthread_mutex_lock(&w->mu);
  w->burn_ms = ms;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  WAIT_UNTIL(atomic_load(&w->burns_done) != before, "thread %d did not burn %d ms",
             atomic_load(&w->tid), ms);
}

/* Join the thread and wait until the kernel has released it (pthread_join
   returns when the thread cleared its tid, slightly before that). */
static void worker_join(worker_t *w) {
  if (!w->exit_after_burn_ms) {
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
  }
  CHECK(pthread_join(w->thread, NULL) == 0);
  pid_t tid = (pid_t)atomic_load(&w->tid);
  WAIT_UNTIL(!task_exists(tid), "thread %d still listed after join", (int)tid);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
}

static const perf__thread_cpu_t *must_find(const perf__thread_set_t *set, pid_t tid) {
  const perf__thread_cpu_t *t = perf__thread_set_find(set, tid);
  CHECKF(t != NULL, "thread %d is not in the set (%zu entries)", (int)tid, set->count);
  return t;
}

static int64_t sum_deltas(const perf__thread_set_t *set) {
  int64_t sum = 0;
  for (size_t i = 0; i < set->count; i++)
    sum += set->threads[i].delta_ns;
  return sum;
}

static void check_ascending(const perf__thread_set_t *set) {
  CHECK(set->count <= set->cap);
  CHECK(set->count <= set->max_threads);
  for (size_t i = 1; i < set->count; i++)
    CHECK(set->threads[i - 1].tid < set->threads[i].tid);
}

/* realloc, failing the fail_at-th call from when fail_at was set (0: never). */
static atomic_int fail_at;
void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n) {
  if (atomic_load(&fail_at) > 0 && atomic_fetch_sub(&fail_at, 1) == 1) return NULL;
  return __real_realloc(p, n);
}

/* ------------------------------------------------------------------------ */
/* Cases                                                                     */
/* ------------------------------------------------------------------------ */

static void case_clocks(void) {
  wait_single_thread();
  pid_t self = perf__gettid();
  int64_t a = perf__thread_cpu_ns(self);
  burn_cpu_ms(20);
  int64_t b = perf__thread_cpu_ns(self);
  CHECKF(a > 0 && b - a >= 20 * MS, "own clock %lld then %lld", (long long)a, (long long)b);
  /* Agrees with CLOCK_THREAD_CPUTIME_ID, read in between. */
  int64_t before = perf__thread_cpu_ns(self);
  int64_t own = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  int64_t after = perf__thread_cpu_ns(self);
  CHECK(before <= own && own <= after);
  /* The process clock counts every thread: at least this one's time. */
  int64_t thread_ns = perf__thread_cpu_ns(self);
  int64_t process_ns = perf__process_cpu_ns();
  CHECKF(process_ns >= thread_ns, "process %lld ns, thread %lld ns", (long long)process_ns,
         (long long)thread_ns);
  /* Not threads of this process. */
  CHECK_EQ_INT(perf__thread_cpu_ns(0), -1);
  CHECK_EQ_INT(perf__thread_cpu_ns(-1), -1);
  CHECK_EQ_INT(perf__thread_cpu_ns(getppid()), -1);
  CHECK_EQ_INT(perf__thread_cpu_ns(0x40000000), -1);
  CHECK_EQ_INT(perf__thread_set_read(NULL), PERF_E_INVALID_ARGUMENT);
  CHECK(perf__thread_set_find(NULL, self) == NULL);
  perf__thread_set_free(NULL);
}

/* A thread burning 300 ms of CPU between two reads against one blocked in
   a condition variable. */
static void case_busy_vs_idle(void) {
  wait_single_thread();
  worker_t busy, idle;
  pid_t busy_tid = worker_start(&busy, 0), idle_tid = worker_start(&idle, 0);
  perf__thread_set_t set;
  perf__thread_set_init(&set, 64);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(set.count, 3);
  check_ascending(&set);
  for (size_t i = 0; i < set.count; i++)
    CHECK_EQ_INT(set.threads[i].delta_ns, 0); /* first read */
  CHECK_EQ_INT(set.process_delta_ns, 0);

  worker_burn(&busy, 300);
  unsigned enumerations = set.enumerations;
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  /* CPU used by known threads is no reason to list them again. */
  CHECK_EQ_INT(set.enumerations, enumerations);
  int64_t busy_delta = must_find(&set, busy_tid)->delta_ns;
  int64_t idle_delta = must_find(&set, idle_tid)->delta_ns;
  /* The whole burn happened between the two reads. */
  CHECKF(busy_delta >= 300 * MS, "busy delta %lld ns", (long long)busy_delta);
  CHECKF(idle_delta >= 0 && idle_delta < 20 * MS, "idle delta %lld ns", (long long)idle_delta);
  CHECKF(busy_delta > 15 * idle_delta, "busy %lld ns, idle %lld ns", (long long)busy_delta,
         (long long)idle_delta);
  /* By tid, directly. */
  int64_t busy_now = perf__thread_cpu_ns(busy_tid), idle_now = perf__thread_cpu_ns(idle_tid);
  CHECK(busy_now >= must_find(&set, busy_tid)->cpu_ns && busy_now >= 300 * MS);
  CHECK(idle_now >= must_find(&set, idle_tid)->cpu_ns && idle_now < 20 * MS);
  /* The process used at least what its threads used (the clocks are read a
     few microseconds apart: 2 ms of slack), and not much more. */
  int64_t sum = sum_deltas(&set);
  CHECKF(set.process_delta_ns >= sum - 2 * MS && set.process_delta_ns <= sum + sum / 20 + 2 * MS,
         "process delta %lld ns, threads %lld ns", (long long)set.process_delta_ns, (long long)sum);
  int64_t total = 0;
  for (size_t i = 0; i < set.count; i++)
    total += set.threads[i].cpu_ns;
  CHECK(set.process_cpu_ns >= total - 2 * MS);

  worker_join(&busy);
  worker_join(&idle);
  perf__thread_set_free(&set);
  CHECK(set.threads == NULL && set.count == 0 && set.cap == 0);
}

static void case_exit_removed(void) {
  wait_single_thread();
  worker_t gone, stays;
  pid_t gone_tid = worker_start(&gone, 0), stays_tid = worker_start(&stays, 0);
  perf__thread_set_t set;
  perf__thread_set_init(&set, 64);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  must_find(&set, gone_tid);
  int64_t stays_before = must_find(&set, stays_tid)->cpu_ns;
  int64_t self_before = must_find(&set, perf__gettid())->cpu_ns;
  worker_join(&gone);
  CHECK_EQ_INT(perf__thread_cpu_ns(gone_tid), -1);
  worker_burn(&stays, 5);
  unsigned enumerations = set.enumerations;
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK(perf__thread_set_find(&set, gone_tid) == NULL);
  CHECK_EQ_INT(set.count, 2);
  CHECK_EQ_INT(set.enumerations, enumerations + 1);
  check_ascending(&set);
  /* The threads that stayed keep their history: deltas since the last read. */
  const perf__thread_cpu_t *stays_entry = must_find(&set, stays_tid);
  const perf__thread_cpu_t *self = must_find(&set, perf__gettid());
  CHECK_EQ_INT(stays_entry->delta_ns, stays_entry->cpu_ns - stays_before);
  CHECK(stays_entry->delta_ns >= 5 * MS);
  CHECK_EQ_INT(self->delta_ns, self->cpu_ns - self_before);
  worker_join(&stays);
  perf__thread_set_free(&set);
}

static void case_new_thread(void) {
  wait_single_thread();
  perf__thread_set_t set;
  perf__thread_set_init(&set, 64);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(set.count, 1);
  CHECK_EQ_INT(set.enumerations, 1);
  worker_t fresh;
  pid_t tid = worker_start(&fresh, 0);
  worker_burn(&fresh, 10); /* so that its whole CPU time is clearly not 0 */
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(set.enumerations, 2);
  CHECK_EQ_INT(set.count, 2);
  const perf__thread_cpu_t *t = must_find(&set, tid);
  /* New since the previous read: its delta is all its CPU time. */
  CHECK(t->cpu_ns >= 10 * MS);
  CHECK_EQ_INT(t->delta_ns, t->cpu_ns);
  check_ascending(&set);
  worker_join(&fresh);
  perf__thread_set_free(&set);
}

/* Nothing changes: no listing, over reads with CPU used by a known thread
   (this one) in between. */
static void case_steady(void) {
  wait_single_thread();
  worker_t idle[3];
  for (int i = 0; i < 3; i++)
    worker_start(&idle[i], 0);
  perf__thread_set_t set;
  perf__thread_set_init(&set, 64);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(set.count, 4);
  CHECK_EQ_INT(set.enumerations, 1);
  for (int r = 0; r < 20; r++) {
    if (r % 2) burn_cpu_ms(3);
    CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
    CHECKF(set.enumerations == 1, "read %d listed the threads again (%u listings)", r,
           set.enumerations);
    CHECK_EQ_INT(set.count, 4);
  }
  CHECK(must_find(&set, perf__gettid())->delta_ns >= 0);
  for (int i = 0; i < 3; i++)
    worker_join(&idle[i]);
  perf__thread_set_free(&set);
}

/* Nothing changes while four known threads spin on the 2 CPUs, so that this
   thread is often preempted in the middle of a read: the per-thread clocks
   are then read milliseconds after the process clock, and the process clock
   lags for threads running elsewhere; neither may look like CPU used by
   unknown threads. (A single process clock read before the thread reads
   listed 4 to 10 times in 2000 reads here.) Allows two spurious listings: a
   preemption right between the last thread read and the final process read
   can still add up to a tick per running thread. */
#define SPINNERS 4
#define IDLE_THREADS 40

static atomic_int g_spin_stop;

static void *spin_main(void *arg) {
  atomic_store((atomic_int *)arg, (int)perf__gettid());
  volatile uint64_t x = 0;
  while (!atomic_load_explicit(&g_spin_stop, memory_order_relaxed))
    x++;
  return NULL;
}

static void case_steady_busy(void) {
  wait_single_thread();
  atomic_store(&g_spin_stop, 0);
  pthread_t spinners[SPINNERS];
  atomic_int spin_tids[SPINNERS];
  for (int i = 0; i < SPINNERS; i++) {
    atomic_init(&spin_tids[i], 0);
    CHECK(pthread_create(&spinners[i], NULL, spin_main, &spin_tids[i]) == 0);
  }
  for (int i = 0; i < SPINNERS; i++)
    WAIT_UNTIL(atomic_load(&spin_tids[i]) != 0, "spinner %d did not start", i);
  static worker_t idle[IDLE_THREADS];
  for (int i = 0; i < IDLE_THREADS; i++)
    worker_start(&idle[i], 0);
  perf__thread_set_t set;
  perf__thread_set_init(&set, 64);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(set.count, 1 + SPINNERS + IDLE_THREADS);
  /* At least 2000 reads, and until the spinners got 100 ms of CPU among
     them (with other processes competing for the CPUs they may not run
     during a few milliseconds of reads). */
  int64_t spun = 0, deadline = clock_ns(CLOCK_MONOTONIC) + DEADLINE_NS;
  int reads = 0;
  while (reads < 2000 || spun < 100 * MS) {
    CHECKF(clock_ns(CLOCK_MONOTONIC) < deadline, "spinners got %lld ns of CPU in 30 s",
           (long long)spun);
    CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
    reads++;
    CHECK_EQ_INT(set.count, 1 + SPINNERS + IDLE_THREADS);
    for (int i = 0; i < SPINNERS; i++)
      spun += must_find(&set, (pid_t)atomic_load(&spin_tids[i]))->delta_ns;
  }
  CHECKF(set.enumerations <= 3, "%u listings in %d reads without a thread change",
         set.enumerations - 1, reads);
  atomic_store(&g_spin_stop, 1);
  for (int i = 0; i < SPINNERS; i++)
    pthread_join(spinners[i], NULL);
  for (int i = 0; i < IDLE_THREADS; i++)
    worker_join(&idle[i]);
  perf__thread_set_free(&set);
}

/* One thread exits and another starts between two reads: the link count is
   the same, the exited thread's failed read triggers the listing. */
static void case_replaced(void) {
  wait_single_thread();
  worker_t old, young;
  pid_t old_tid = worker_start(&old, 0);
  perf__thread_set_t set;
  perf__thread_set_init(&set, 64);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(set.count, 2);
  int64_t self_before = must_find(&set, perf__gettid())->cpu_ns;
  worker_join(&old);
  pid_t young_tid = worker_start(&young, 0);
  CHECK_EQ_INT(task_dir_nlink(), set.nlink); /* the link count cannot tell */
  unsigned enumerations = set.enumerations;
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(set.enumerations, enumerations + 1);
  CHECK_EQ_INT(set.count, 2);
  const perf__thread_cpu_t *t = must_find(&set, young_tid);
  CHECK_EQ_INT(t->delta_ns, t->cpu_ns);
  if (young_tid != old_tid) CHECK(perf__thread_set_find(&set, old_tid) == NULL);
  const perf__thread_cpu_t *self = must_find(&set, perf__gettid());
  CHECK_EQ_INT(self->delta_ns, self->cpu_ns - self_before);
  worker_join(&young);
  perf__thread_set_free(&set);
}

/* A thread starts, burns 60 ms and exits between two reads: neither the link
   count nor a failed read tells; the process CPU does. */
static void case_came_and_went(void) {
  wait_single_thread();
  perf__thread_set_t set;
  perf__thread_set_init(&set, 64);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(set.enumerations, 1);
  worker_t brief;
  pid_t tid = worker_start(&brief, 60);
  worker_join(&brief);
  CHECK_EQ_INT(task_dir_nlink(), set.nlink);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(set.enumerations, 2);
  CHECK_EQ_INT(set.count, 1);
  CHECK(perf__thread_set_find(&set, tid) == NULL);
  CHECKF(set.process_delta_ns - sum_deltas(&set) >= 59 * MS, "process delta %lld, threads %lld",
         (long long)set.process_delta_ns, (long long)sum_deltas(&set));
  /* Once listed, the next read has nothing to explain. */
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(set.enumerations, 2);
  perf__thread_set_free(&set);
}

static void case_bound(void) {
  wait_single_thread();
  worker_t w[6];
  for (int i = 0; i < 6; i++)
    worker_start(&w[i], 0);
  pid_t *tids = NULL;
  size_t n = 0;
  CHECK_EQ_INT(perf__thread_list(&tids, &n), PERF_OK);
  CHECK_EQ_INT(n, 7);

  perf__thread_set_t set;
  perf__thread_set_init(&set, 4);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK_EQ_INT(set.count, 4);
  CHECK(set.cap == 4);
  for (size_t i = 0; i < 4; i++)
    CHECK_EQ_INT(set.threads[i].tid, tids[i]); /* the lowest tids */
  /* An untracked thread's CPU shows only in the process delta; with the set
     full that is expected and is no reason to list again. */
  worker_t *untracked = NULL;
  for (int i = 0; i < 6 && !untracked; i++)
    if (!perf__thread_set_find(&set, (pid_t)atomic_load(&w[i].tid))) untracked = &w[i];
  CHECK(untracked != NULL);
  for (int r = 0; r < 3; r++) {
    worker_burn(untracked, 30);
    CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
    CHECK_EQ_INT(set.enumerations, 1);
    CHECK_EQ_INT(set.count, 4);
    /* The clocks are read microseconds apart: 1 ms of slack. */
    CHECKF(set.process_delta_ns - sum_deltas(&set) >= 29 * MS, "process delta %lld, threads %lld",
           (long long)set.process_delta_ns, (long long)sum_deltas(&set));
  }
  perf__thread_set_free(&set);

  /* Growth stops at the bound; a larger bound holds everything. */
  perf__thread_set_init(&set, 5);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK(set.count == 5 && set.cap == 5);
  perf__thread_set_free(&set);
  perf__thread_set_init(&set, 100000);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK(set.count == 7 && set.cap >= 7 && set.cap < 100);
  for (size_t i = 0; i < 7; i++)
    CHECK_EQ_INT(set.threads[i].tid, tids[i]);
  perf__thread_set_free(&set);
  /* Bound 0: no thread, the process clock still. */
  perf__thread_set_init(&set, 0);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  burn_cpu_ms(5);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK(set.count == 0 && set.threads == NULL && set.process_delta_ns >= 5 * MS);
  perf__thread_set_free(&set);

  free(tids);
  for (int i = 0; i < 6; i++)
    worker_join(&w[i]);
}

/* Fail each realloc of a read that must list and grow, one at a time: every
   failure gives PERF_E_NO_MEMORY and leaves the set exactly as it was. */
static void case_no_memory(void) {
  wait_single_thread();
  perf__thread_set_t set;
  perf__thread_set_init(&set, 1000);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  burn_cpu_ms(5);
  CHECK_EQ_INT(perf__thread_set_read(&set), PERF_OK);
  CHECK(set.count == 1 && set.cap < 40);
  perf__thread_set_t before = set;
  perf__thread_cpu_t before_entry = set.threads[0];

  worker_t w[40];
  for (int i = 0; i < 40; i++)
    worker_start(&w[i], 0);
  int rc = PERF_E_NO_MEMORY, failures = 0;
  for (int k = 1; k <= 20 && rc == PERF_E_NO_MEMORY; k++) {
    atomic_store(&fail_at, k);
    rc = perf__thread_set_read(&set);
    atomic_store(&fail_at, 0);
    if (rc != PERF_E_NO_MEMORY) break;
    failures++;
    CHECK(set.threads == before.threads && set.count == before.count && set.cap == before.cap);
    CHECK(set.max_threads == before.max_threads && set.nlink == before.nlink);
    CHECK(set.process_cpu_ns == before.process_cpu_ns);
    CHECK(set.process_delta_ns == before.process_delta_ns);
    CHECK(set.enumerations == before.enumerations);
    CHECK(memcmp(&set.threads[0], &before_entry, sizeof before_entry) == 0);
  }
  CHECK_EQ_INT(rc, PERF_OK);
  CHECK(failures >= 1);
  CHECK(set.cap > before.cap); /* the growth was one of the failed reallocs */
  CHECK_EQ_INT(set.count, 41);
  CHECK_EQ_INT(set.enumerations, before.enumerations + 1);
  for (int i = 0; i < 40; i++)
    must_find(&set, (pid_t)atomic_load(&w[i].tid));
  /* The previous state was kept: this thread's delta is since that read. */
  const perf__thread_cpu_t *self = must_find(&set, perf__gettid());
  CHECK_EQ_INT(self->delta_ns, self->cpu_ns - before_entry.cpu_ns);
  CHECK_EQ_INT(set.process_delta_ns, set.process_cpu_ns - before.process_cpu_ns);
  for (int i = 0; i < 40; i++)
    worker_join(&w[i]);
  perf__thread_set_free(&set);
}

/* ------------------------------------------------------------------------ */

static const test_case_t g_cases[] = {
    TEST_CASE(clocks), TEST_CASE(busy_vs_idle), TEST_CASE(exit_removed), TEST_CASE(new_thread),
    TEST_CASE(steady), TEST_CASE(steady_busy),  TEST_CASE(replaced),     TEST_CASE(came_and_went),
    TEST_CASE(bound),  TEST_CASE(no_memory),
};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
