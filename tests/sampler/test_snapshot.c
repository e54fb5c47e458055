/*
 * test_snapshot.c - the sampler's snapshots (perf__sampler_capture_threads:
 * every running thread signalled, then every answer collected) and the /proc
 * files it keeps open (task_files.h). Linked statically to reach perf__
 * names; each case runs in its own process: `test_snapshot <case>`.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include "perf_sdk.h"
#include "sdk/base/strbuf.h"
#include "sdk/sampler/backtrace_text.h"
#include "sdk/sampler/sampler.h"
#include "sdk/sampler/stack_end.h"
#include "sdk/sampler/task_files.h"
#include "stack_assert.h"
#include "test_util.h"

#define WAIT_MS 20000 /* polls for a thread to reach its chain give up after this */
/* As test_sampler: the cases are about stacks, not about late threads on a
   loaded machine. */
#define SLOW_TIMEOUT_MS 10000
enum { SPINNERS = 6, READERS = 3, SLEEPERS = 3, WORKERS = SPINNERS + READERS + SLEEPERS };

static atomic_int g_stop;
static atomic_int g_eintr; /* blocking calls of the workers cut short by a signal */
static volatile unsigned long g_sink;

/* ---- the workers: spinning, blocked in read, blocked in nanosleep ------ */

static CHAIN unsigned long snap_spin_leaf(unsigned long x) {
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed))
    x = x * 2862933555777941757UL + 3;
  return x;
}
static CHAIN unsigned long snap_spin_outer(unsigned long x) {
  return snap_spin_leaf(x) + 1;
}
static void *spin_main(void *arg) {
  (void)arg;
  g_sink = snap_spin_outer(7);
  return NULL;
}

/* The blocked workers' functions keep no frame pointer, so their callers
   are found by their CFI rules alone: under ASan + UBSan (-O0, frame
   pointers everywhere) the blocked-thread walk's search for an rbp-based
   frame's record took a stale one here (also on main: a limitation of that
   search, not of snapshots, which this program tests; test_sampler covers
   the search). read(2) goes through syscall(): ASan's read interceptor keeps
   an rbp-based frame with 2 KiB of locals. */
#define BLOCKED_CHAIN CHAIN __attribute__((optimize("omit-frame-pointer")))
static BLOCKED_CHAIN long snap_read_inner(int fd) {
  char c;
  long n;
  while ((n = syscall(SYS_read, fd, &c, 1)) < 0 && errno == EINTR)
    atomic_fetch_add(&g_eintr, 1);
  return n + 1;
}
static BLOCKED_CHAIN long snap_read_outer(int fd) {
  return snap_read_inner(fd) + 1;
}
static void *read_main(void *arg) {
  g_sink = (unsigned long)snap_read_outer((int)(intptr_t)arg);
  return NULL;
}

/* One sleep for the whole case, ended by SIGUSR1 after g_stop (workers_stop): a
   sleeper that woke now and then could be caught running by a snapshot and
   signalled in the microsecond before its next nanosleep, the window
   docs/operations.md ("Side effects on the app") admits; under ASan on two
   busy cores that happened (g_eintr = 1). */
static BLOCKED_CHAIN int snap_sleep_inner(void) {
  struct timespec ts = {3600, 0};
  int r = nanosleep(&ts, NULL);
  if (r != 0 && errno == EINTR && !atomic_load(&g_stop)) atomic_fetch_add(&g_eintr, 1);
  return r + 1;
}
static BLOCKED_CHAIN int snap_sleep_outer(void) {
  int r = 0;
  while (!atomic_load(&g_stop))
    r += snap_sleep_inner();
  return r;
}
static void *sleep_main(void *arg) {
  (void)arg;
  g_sink = (unsigned long)snap_sleep_outer();
  return NULL;
}

typedef struct {
  pthread_t threads[WORKERS];
  pid_t tids[WORKERS];
  int pipe_fds[2];
} workers_t;

static atomic_int g_started;
static pid_t g_started_tids[WORKERS];

typedef struct {
  void *(*body)(void *);
  void *arg;
  int index;
} start_t;

static start_t g_starts[WORKERS];

static void *start_main(void *arg) {
  const start_t *st = arg;
  g_started_tids[st->index] = (pid_t)syscall(SYS_gettid);
  atomic_fetch_add(&g_started, 1);
  return st->body(st->arg);
}

/* What worker i runs and the frames its stack must show, innermost first
   ('|': alternatives). */
static void *(*body_of(int i))(void *) {
  return i < SPINNERS ? spin_main : i < SPINNERS + READERS ? read_main : sleep_main;
}
static const char *const k_spin_chain[] = {"snap_spin_leaf", "snap_spin_outer", "spin_main"};
static const char *const k_read_chain[] = {"syscall", "snap_read_inner", "snap_read_outer",
                                           "read_main"};
static const char *const k_sleep_chain[] = {"clock_nanosleep|__clock_nanosleep",
                                            "nanosleep|__nanosleep", "snap_sleep_inner",
                                            "snap_sleep_outer", "sleep_main"};

static void chain_of(int i, const char *const **chain, size_t *n) {
  if (i < SPINNERS) {
    *chain = k_spin_chain, *n = ARRAY_LEN(k_spin_chain);
  } else if (i < SPINNERS + READERS) {
    *chain = k_read_chain, *n = ARRAY_LEN(k_read_chain);
  } else {
    *chain = k_sleep_chain, *n = ARRAY_LEN(k_sleep_chain);
  }
}

static void workers_start(workers_t *w) {
  CHECK(pipe(w->pipe_fds) == 0);
  for (int i = 0; i < WORKERS; i++) {
    g_starts[i] = (start_t){body_of(i), (void *)(intptr_t)w->pipe_fds[0], i};
    CHECK(pthread_create(&w->threads[i], NULL, start_main, &g_starts[i]) == 0);
  }
  while (atomic_load(&g_started) < WORKERS)
    usleep(1000);
  memcpy(w->tids, g_started_tids, sizeof w->tids);
  /* The blocked ones in their call, seen from /proc (no capture, so no
     signal, before they block), then each worker in its chain. */
  for (int i = SPINNERS; i < WORKERS; i++)
    wait_in_syscall(w->tids[i], i < SPINNERS + READERS ? SYS_read : SYS_clock_nanosleep, WAIT_MS);
  for (int i = 0; i < WORKERS; i++) {
    const char *const *chain;
    size_t n;
    chain_of(i, &chain, &n);
    char *text = stack_wait_for_chain(w->tids[i], chain, n, WAIT_MS);
    CHECKF(text != NULL, "worker %d could not be captured", i);
    stack_syms_t *s = malloc(sizeof *s);
    CHECK(s != NULL);
    stack_parse(text, s);
    if (!stack_has_chain(s, chain, n)) stack_dump("worker", text);
    CHECKF(stack_has_chain(s, chain, n), "worker %d never reached its chain", i);
    free(s);
    perf_free(text);
  }
}

static void wake_sleeper(int sig) {
  (void)sig;
}

static void workers_stop(workers_t *w) {
  atomic_store(&g_stop, 1);
  char bytes[READERS] = {0};
  CHECK(write(w->pipe_fds[1], bytes, sizeof bytes) == (ssize_t)sizeof bytes);
  /* The sleepers' hour-long sleep ends with EINTR from a signal of the
     test's own (not counted: g_stop is set). */
  struct sigaction sa = {.sa_handler = wake_sleeper};
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  for (int i = SPINNERS + READERS; i < WORKERS; i++)
    CHECK(pthread_kill(w->threads[i], SIGUSR1) == 0);
  for (int i = 0; i < WORKERS; i++)
    pthread_join(w->threads[i], NULL);
  close(w->pipe_fds[0]);
  close(w->pipe_fds[1]);
  CHECK_EQ_INT(atomic_load(&g_eintr), 0); /* no blocking call was cut short */
}

/* The shot as the text report names it, checked against worker i's chain. */
static void expect_shot(const perf__sampler_shot_t *shot, perf__modules_t *mods, int i,
                        size_t in_flight) {
  CHECKF(shot->err == PERF_OK, "in_flight %zu, worker %d: %s", in_flight, i,
         perf_strerror(shot->err));
  CHECKF(shot->taken_ns > 0, "in_flight %zu, worker %d: no time", in_flight, i);
  perf__strbuf_t b;
  perf__strbuf_init(&b, 1 << 20);
  CHECK_EQ_INT(perf__format_thread_header(&b, shot->tid), PERF_OK);
  CHECK_EQ_INT(perf__format_frames(&b, mods, shot->pcs, shot->count,
                                   perf__stack_end_of(shot->err, shot->status)),
               PERF_OK);
  char *text = NULL;
  CHECK_EQ_INT(perf__strbuf_take(&b, &text), PERF_OK);
  perf__strbuf_free(&b);
  const char *const *chain;
  size_t n;
  chain_of(i, &chain, &n);
  stack_syms_t *s = malloc(sizeof *s);
  CHECK(s != NULL);
  stack_parse(text, s);
  if (!stack_has_chain(s, chain, n)) {
    stack_dump("snapshot", text);
    CHECKF(0, "in_flight %zu, worker %d: not its chain (first: %s)", in_flight, i, chain[0]);
  }
  free(s);
  free(text);
}

/* ---- cases --------------------------------------------------------------- */

static void set_capture_timeout(unsigned timeout_ms) {
  perf_sampler_options_t opts;
  perf_sampler_options_init(&opts);
  opts.timeout_ms = timeout_ms;
  CHECK_EQ_INT(perf_sampler_configure(&opts), PERF_OK);
}

/* Twelve workers (six spinning, three in read, three in nanosleep) and the
   caller itself, three snapshots each one at a time and with every request
   in flight: every thread's stack has its chain, every time, and no
   blocking call ends early. The first round learns the stacks' bounds. */
static void case_parallel_names(void) {
  workers_t w;
  workers_start(&w);
  perf__modules_t *mods = perf__modules_acquire();
  CHECK(mods != NULL);
  enum { N = WORKERS + 1 };
  static uintptr_t pcs[N][256];
  perf__sampler_shot_t shots[N];
  static const size_t k_in_flight[] = {PERF__SAMPLER_IN_FLIGHT_MAX, 1, 4};
  for (int round = 0; round < 3; round++) {
    for (size_t f = 0; f < ARRAY_LEN(k_in_flight); f++) {
      for (int i = 0; i < N; i++)
        shots[i] =
            (perf__sampler_shot_t){.tid = i < WORKERS ? w.tids[i] : 0, .pcs = pcs[i], .max = 256};
      CHECK_EQ_INT(perf__sampler_capture_threads(mods, shots, N, k_in_flight[f]), PERF_OK);
      for (int i = 0; i < WORKERS; i++)
        expect_shot(&shots[i], mods, i, k_in_flight[f]);
      CHECK_EQ_INT(shots[WORKERS].err, PERF_OK); /* the caller's own stack */
      CHECK(shots[WORKERS].count > 0);
    }
  }
  perf__modules_release(mods);
  workers_stop(&w);
}

/* perf_backtrace_all_threads_text takes its snapshot the same way: exactly
   one section per thread (the caller and the twelve workers), each with
   its chain. */
static void case_all_threads_text(void) {
  workers_t w;
  workers_start(&w);
  char *text = NULL;
  CHECK_EQ_INT(perf_backtrace_all_threads_text(&text), PERF_OK);
  size_t sections = 1;
  for (const char *q = text; (q = strstr(q, "\nthread ")) != NULL; q++)
    sections++;
  CHECK_EQ_INT(sections, WORKERS + 1);
  for (int i = 0; i < WORKERS; i++) {
    char header[32];
    snprintf(header, sizeof header, "thread %d ", (int)w.tids[i]);
    const char *section = strstr(text, header);
    CHECKF(section != NULL, "no section for worker %d in:\n%s", i, text);
    const char *const *chain;
    size_t n;
    chain_of(i, &chain, &n);
    stack_syms_t *s = malloc(sizeof *s);
    CHECK(s != NULL);
    stack_parse(section, s);
    CHECKF(stack_has_chain(s, chain, n), "worker %d: not its chain in:\n%s", i, text);
    free(s);
  }
  perf_free(text);
  workers_stop(&w);
}

static void case_bad_arguments(void) {
  perf__modules_t *mods = perf__modules_acquire();
  uintptr_t pcs[8];
  perf__sampler_shot_t shot = {.tid = 0, .pcs = pcs, .max = 8};
  CHECK_EQ_INT(perf__sampler_capture_threads(mods, &shot, 1, 0), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__sampler_capture_threads(mods, &shot, 1, PERF__SAMPLER_IN_FLIGHT_MAX + 1),
               PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__sampler_capture_threads(NULL, &shot, 1, 1), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__sampler_capture_threads(mods, NULL, 1, 1), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__sampler_capture_threads(mods, NULL, 0, 1), PERF_OK);
  perf__modules_release(mods);
}

static int capture_ok(pid_t tid) {
  uintptr_t pcs[64];
  size_t count = 0;
  return perf_backtrace_thread(tid, pcs, 64, &count);
}

/* The sampler's kept descriptors (links to /proc/PID/task/...), in fds. */
static int kept_descriptors(int *fds, int max) {
  DIR *d = opendir("/proc/self/fd");
  CHECK(d != NULL);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL && n < max) {
    char link[300], target[256] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
    ssize_t len = readlink(link, target, sizeof target - 1);
    if (len > 0) target[len] = '\0';
    if (strncmp(target, "/proc/", 6) == 0 && strstr(target, "/task/")) fds[n++] = atoi(de->d_name);
  }
  closedir(d);
  return n;
}

/* Whether the sampler keeps exactly these files open ("TID/status",
   "TID/syscall", in any order). */
static void expect_kept(const char *title, const char *const *files, int n) {
  int fds[8];
  int kept = kept_descriptors(fds, 8);
  CHECKF(kept == n && perf__task_files_open_count() == n, "%s: %d kept, %d counted, %d expected",
         title, kept, perf__task_files_open_count(), n);
  for (int i = 0; i < n; i++) {
    char want[64];
    snprintf(want, sizeof want, "/proc/%d/task/%s", (int)getpid(), files[i]);
    bool found = false;
    for (int k = 0; k < kept && !found; k++) {
      char link[64], target[256] = "";
      snprintf(link, sizeof link, "/proc/self/fd/%d", fds[k]);
      ssize_t len = readlink(link, target, sizeof target - 1);
      if (len > 0) target[len] = '\0';
      found = strcmp(target, want) == 0;
    }
    CHECKF(found, "%s: %s is not kept open", title, want);
  }
}

static const char *file_name(char *buf, size_t len, pid_t tid, const char *name) {
  snprintf(buf, len, "%d/%s", (int)tid, name);
  return buf;
}

/* The files of the last two threads captured stay open: a running
   thread's syscall (the last look before the send) and status (its mask,
   read while the signal flies), a blocked one's syscall (its last capture
   found it blocked: looked at there first); a third thread takes the place
   of the least recent; all closed on perf__sampler_close_files. */
static void case_kept_files(void) {
  workers_t w;
  workers_start(&w);
  perf__task_files_set_idle_ns(3600LL * 1000000000LL); /* a loaded machine is slow */
  perf__sampler_close_files();
  expect_kept("closed", NULL, 0);
  pid_t spin0 = w.tids[0], spin1 = w.tids[1], spin2 = w.tids[2], reader = w.tids[SPINNERS];
  char a[32], b[32];
  for (int i = 0; i < 5; i++) {
    CHECK_EQ_INT(capture_ok(spin0), PERF_OK);
    CHECK_EQ_INT(capture_ok(reader), PERF_OK);
  }
  char c[32], d[32];
  const char *files[4] = {file_name(a, sizeof a, spin0, "status"),
                          file_name(b, sizeof b, spin0, "syscall"),
                          file_name(c, sizeof c, reader, "syscall")};
  expect_kept("spinner and reader", files, 3);
  CHECK_EQ_INT(capture_ok(spin1), PERF_OK); /* takes the first spinner's place */
  files[0] = file_name(a, sizeof a, spin1, "status");
  files[1] = file_name(b, sizeof b, spin1, "syscall");
  expect_kept("second spinner and reader", files, 3);
  CHECK_EQ_INT(capture_ok(spin2), PERF_OK); /* takes the reader's */
  files[2] = file_name(c, sizeof c, spin2, "status");
  files[3] = file_name(d, sizeof d, spin2, "syscall");
  expect_kept("second and third spinner", files, 4);
  perf__sampler_close_files();
  expect_kept("closed again", NULL, 0);
  workers_stop(&w);
}

/* Files unused for the idle time are closed at the next capture. */
static void case_idle_files_closed(void) {
  workers_t w;
  workers_start(&w);
  perf__task_files_set_idle_ns(0);
  char a[32], b[32];
  const char *files[2];
  CHECK_EQ_INT(capture_ok(w.tids[0]), PERF_OK);
  files[0] = file_name(a, sizeof a, w.tids[0], "status");
  files[1] = file_name(b, sizeof b, w.tids[0], "syscall");
  expect_kept("spinner", files, 2);
  CHECK_EQ_INT(capture_ok(w.tids[SPINNERS]), PERF_OK); /* the spinner's files closed */
  files[0] = file_name(a, sizeof a, w.tids[SPINNERS], "syscall");
  expect_kept("reader", files, 1);
  workers_stop(&w);
}

/* A daemon closes the descriptors it does not know and opens its own: the
   sampler's kept descriptor numbers now name the app's files. The sampler
   neither reads them as /proc files nor closes them. */
static void case_app_closes_descriptors(void) {
  workers_t w;
  workers_start(&w);
  CHECK_EQ_INT(capture_ok(w.tids[0]), PERF_OK);
  CHECK_EQ_INT(capture_ok(w.tids[SPINNERS]), PERF_OK);
  int fds[8];
  int n = kept_descriptors(fds, 8);
  CHECK_EQ_INT(n, 3); /* the spinner's status and syscall, the reader's syscall */
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  CHECK(devnull >= 0);
  for (int i = 0; i < n; i++) /* closes the sampler's file, the number is the app's */
    CHECK(dup2(devnull, fds[i]) == fds[i]);
  for (int i = 0; i < 3; i++) {
    CHECK_EQ_INT(capture_ok(w.tids[0]), PERF_OK);
    CHECK_EQ_INT(capture_ok(w.tids[SPINNERS]), PERF_OK);
  }
  CHECK_EQ_INT(perf__task_files_open_count(), 3); /* opened again, elsewhere */
  perf__sampler_close_files();
  CHECK_EQ_INT(perf__task_files_open_count(), 0);
  CHECK_EQ_INT(kept_descriptors(fds, 8), 0);
  for (int i = 0; i < n; i++)
    CHECKF(fcntl(fds[i], F_GETFD) >= 0, "the app's descriptor %d was closed", fds[i]);
  workers_stop(&w);
}

/* A forked child holds none of the parent's kept descriptors (they name
   the parent's threads). */
static void case_fork_drops_files(void) {
  workers_t w;
  workers_start(&w);
  CHECK_EQ_INT(capture_ok(w.tids[0]), PERF_OK);
  CHECK(perf__task_files_open_count() > 0);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) _exit(perf__task_files_open_count() == 0 ? 0 : 1);
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child kept the parent's files");
  CHECK(perf__task_files_open_count() > 0); /* the parent's are still there */
  workers_stop(&w);
}

/* ---- the blocked-stack copy buffer -------------------------------------- */

#define DEEP_FRAMES 48 /* 4 KiB of locals each: a stack about 200 KiB deep */

typedef struct {
  int pipe[2];
  atomic_int tid;
} deep_t;

static CHAIN long deep_block(deep_t *d, int depth) {
  volatile char locals[4096];
  locals[0] = (char)depth;
  locals[sizeof locals - 1] = (char)depth;
  if (depth > 0) return deep_block(d, depth - 1) + locals[0];
  atomic_store(&d->tid, (int)syscall(SYS_gettid));
  char c;
  return read(d->pipe[0], &c, 1) + locals[sizeof locals - 1];
}

static void *deep_main(void *arg) {
  deep_block(arg, DEEP_FRAMES);
  return NULL;
}

/* The process's resident KiB, counted from its page tables
   (smaps_rollup's Rss). Not VmRSS: the kernel keeps that count per CPU
   and sums it lazily, so it may be off by a batch of pages per CPU. */
static long resident_kib(void) {
  char *status = read_text("/proc/self/smaps_rollup");
  const char *p = strstr(status, "\nRss:");
  CHECK(p != NULL);
  long kib = strtol(p + 5, NULL, 10);
  free(status);
  return kib;
}

/* A thread blocked 200 KiB deep is copied into the sampler's buffer
   (perf__blocked_capture); perf__sampler_release_idle, what the writer's
   idle release calls, gives those pages back, and the next capture of it
   is whole again. */
static void case_blocked_copy_released(void) {
  deep_t d = {.tid = 0};
  CHECK(pipe(d.pipe) == 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, deep_main, &d) == 0);
  while (atomic_load(&d.tid) == 0)
    sleep_ms(1);
  pid_t tid = atomic_load(&d.tid);
  wait_in_syscall(tid, SYS_read, 10000);
  uintptr_t pcs[128];
  size_t count = 0;
  CHECK_EQ_INT(perf_backtrace_thread(tid, pcs, 128, &count), PERF_OK);
  CHECKF(count > DEEP_FRAMES, "%zu frames of a %d-deep stack", count, DEEP_FRAMES);
  long before = resident_kib();
  perf__sampler_release_idle();
  long after = resident_kib();
  CHECKF(before - after >= 150, "Rss %ld KiB before the release, %ld after", before, after);
  size_t again = 0;
  CHECK_EQ_INT(perf_backtrace_thread(tid, pcs, 128, &again), PERF_OK);
  CHECK_EQ_INT(again, count);
  CHECK(write(d.pipe[1], "x", 1) == 1);
  pthread_join(t, NULL);
  close(d.pipe[0]);
  close(d.pipe[1]);
}

static const test_case_t g_cases[] = {
    TEST_CASE(parallel_names),    TEST_CASE(all_threads_text),
    TEST_CASE(bad_arguments),     TEST_CASE(kept_files),
    TEST_CASE(idle_files_closed), TEST_CASE(app_closes_descriptors),
    TEST_CASE(fork_drops_files),  TEST_CASE(blocked_copy_released),
};

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  set_capture_timeout(SLOW_TIMEOUT_MS);
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
