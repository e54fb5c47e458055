/*
 * test_no_eintr.c - sampling never cuts an app's blocking call short. A
 * thread blocks for 1 s in one call (nanosleep, clock_nanosleep,
 * epoll_wait, poll, select, read on a pipe, sem_timedwait,
 * pthread_cond_timedwait, accept) inside a unit of work, while the SDK runs
 * with the file sink: the hang monitor samples it every 5 ms, another
 * thread spins (a CPU burst sampled at 1000 Hz), the main thread asks for
 * `perf_sdk_capture_now` every 50 ms and captures the blocked thread
 * directly as fast as it can. The call must return what it returns without
 * the SDK (exact value and errno, never EINTR), not before its time on its
 * own clock, and every capture taken while it blocked shows the call under
 * the test's own callers, as does the hang event in the report.
 *
 * Each case runs in its own process (`test_no_eintr <case>`); the SDK
 * through the shared library as an app links it.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk_util.h"
#include "stack_assert.h"
#include "tempdir.h"
#include "test_util.h"

#define BLOCK_NS 1000000000LL /* how long each call blocks */
#define WAIT_MS 20000         /* waits for a thread to get somewhere give up after this */
#define ANY_FD (-1000)        /* run()'s want_ret for accept: a new descriptor */

typedef enum {
  K_NANOSLEEP,
  K_CLOCK_NANOSLEEP,
  K_EPOLL_WAIT,
  K_POLL,
  K_SELECT,
  K_READ,
  K_SEM_TIMEDWAIT,
  K_COND_TIMEDWAIT,
  K_ACCEPT,
} kind_t;

/* What the blocked thread saw. */
typedef struct {
  kind_t kind;
  long ret;         /* the call's return value */
  int err;          /* errno after it (or the pthread return code) */
  clockid_t clock;  /* the clock the call's timeout is on */
  long long t0, t1; /* before and after the call, on that clock (ns) */
  int fd;           /* pipe read end / listening socket / epoll fd */
  atomic_int tid;
  atomic_int started; /* t0 is set, the call comes next */
  atomic_int done;
  int go[2]; /* a pipe: one byte once the test's instrument knows the thread's frames */
} block_t;

static sem_t g_sem;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static atomic_int g_stop_spin;
static volatile unsigned long g_sink;

static long long clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct timespec ts_of(long long ns) {
  return (struct timespec){ns / 1000000000LL, ns % 1000000000LL};
}

/* ---- the blocked thread: blocker_main -> blocking_call_outer -> inner -- */

static CHAIN long blocking_call_inner(block_t *b) {
  struct timespec rel = ts_of(BLOCK_NS), abs = ts_of(b->t0 + BLOCK_NS);
  long r = -1;
  errno = 0;
  switch (b->kind) {
  case K_NANOSLEEP: r = nanosleep(&rel, NULL); break;
  case K_CLOCK_NANOSLEEP: r = clock_nanosleep(CLOCK_MONOTONIC, 0, &rel, NULL); break;
  case K_EPOLL_WAIT: {
    struct epoll_event ev;
    r = epoll_wait(b->fd, &ev, 1, (int)(BLOCK_NS / 1000000));
    break;
  }
  case K_POLL: {
    struct pollfd p = {.fd = b->fd, .events = POLLIN};
    r = poll(&p, 1, (int)(BLOCK_NS / 1000000));
    break;
  }
  case K_SELECT: {
    fd_set set;
    FD_ZERO(&set);
    FD_SET(b->fd, &set);
    struct timeval tv = {BLOCK_NS / 1000000000LL, 0};
    r = select(b->fd + 1, &set, NULL, NULL, &tv);
    break;
  }
  case K_READ: {
    char c;
    r = read(b->fd, &c, 1);
    break;
  }
  case K_SEM_TIMEDWAIT: r = sem_timedwait(&g_sem, &abs); break;
  case K_COND_TIMEDWAIT:
    pthread_mutex_lock(&g_lock);
    r = pthread_cond_timedwait(&g_cond, &g_lock, &abs); /* nobody signals it */
    pthread_mutex_unlock(&g_lock);
    break;
  case K_ACCEPT: r = accept(b->fd, NULL, NULL); break;
  }
  b->err = b->kind == K_COND_TIMEDWAIT ? (int)r : errno;
  return r;
}

static CHAIN long blocking_call_outer(block_t *b) {
  long r = blocking_call_inner(b);
  g_sink++;
  return r;
}

static CHAIN void *blocker_main(void *arg) {
  block_t *b = arg;
  atomic_store(&b->tid, (int)syscall(SYS_gettid));
  /* Waits in read(): through the same libc (and ASan's interceptor) frames
     as the blocking calls, whose unwind rules and names the test's first
     capture below then pays for. */
  char byte;
  while (read(b->go[0], &byte, 1) != 1)
    CHECK(errno == EINTR);
  CHECK_EQ_INT(perf_sdk_watch_current_thread(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  b->t0 = clock_ns(b->clock);
  atomic_store(&b->started, 1);
  b->ret = blocking_call_outer(b);
  b->t1 = clock_ns(b->clock);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  atomic_store(&b->done, 1);
  return NULL;
}

/* ---- the helpers around it --------------------------------------------- */

static void *spinner_main(void *arg) {
  (void)arg;
  unsigned long x = 1;
  while (!atomic_load_explicit(&g_stop_spin, memory_order_relaxed))
    x = x * 6364136223846793005UL + 1;
  g_sink = x;
  return NULL;
}

/* Wakes a read or an accept when its second is up: writes a byte to the
   pipe (fd) or connects to the listening port (port). */
typedef struct {
  block_t *b;
  int fd;
  int port;
} waker_t;

static void *waker_main(void *arg) {
  waker_t *w = arg;
  while (atomic_load(&w->b->started) == 0)
    usleep(1000);
  struct timespec at = ts_of(w->b->t0 + BLOCK_NS);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR) {
  }
  if (w->port) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)w->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(s, (struct sockaddr *)&a, sizeof a) == 0);
    return (void *)(intptr_t)s; /* closed by the case */
  }
  CHECK(write(w->fd, "x", 1) == 1);
  return NULL;
}

static void start_sdk(const char *report) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "test_no_eintr";
  cfg.data_dir = "";
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = report;
  cfg.hang_threshold_ms = 100;
  cfg.hang_sample_interval_ms = 5;
  cfg.hang_max_samples = 200;
  cfg.cpu_threshold_percent = 50;
  cfg.cpu_window_ms = 100;
  cfg.cpu_sample_hz = 1000;
  cfg.cpu_burst_ms = 2000;
  cfg.cpu_top_threads = 64;
  cfg.cpu_cooldown_ms = 0;
  cfg.max_events_per_hour = 100000;
  cfg.queue_capacity = 4096;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
}

/* The capture shows the blocking call (`libc`: the libc functions it may be
   named by, innermost first, alternatives with '|') right under the test's
   own callers. */
static bool shows_call(const char *text, const char *libc) {
  stack_syms_t *s = malloc(sizeof *s);
  CHECK(s != NULL);
  stack_parse(text, s);
  const char *chain[] = {"blocking_call_inner", "blocking_call_outer", "blocker_main"};
  bool ok = stack_has_chain(s, chain, ARRAY_LEN(chain));
  size_t inner = 0;
  while (ok && inner < s->count && strcmp(s->symbols[inner], "blocking_call_inner") != 0)
    inner++;
  bool named = false;
  for (size_t i = 0; ok && i < inner; i++) {
    const char *one[] = {libc};
    stack_syms_t single = {.count = 1};
    snprintf(single.symbols[0], sizeof single.symbols[0], "%s", s->symbols[i]);
    named = named || stack_has_chain(&single, one, 1);
  }
  free(s);
  return ok && named && inner >= 1;
}

/* ---- the case runner ---------------------------------------------------- */

static void run(kind_t kind, clockid_t clock, int fd, const char *libc, long want_ret, int want_err,
                waker_t *waker) {
  const char *dir = tempdir_make("perf_no_eintr");
  char report[512];
  snprintf(report, sizeof report, "%s/report.txt", dir);
  start_sdk(report);

  pthread_t spinner, blocker, wk;
  CHECK(pthread_create(&spinner, NULL, spinner_main, NULL) == 0);
  block_t b = {.kind = kind, .clock = clock, .fd = fd};
  CHECK(pipe(b.go) == 0);
  if (waker) waker->b = &b;
  CHECK(pthread_create(&blocker, NULL, blocker_main, &b) == 0);
  long long give_up = clock_ns(CLOCK_MONOTONIC) + WAIT_MS * 1000000LL;
  while (atomic_load(&b.tid) == 0)
    usleep(1000);
  pid_t tid = atomic_load(&b.tid);
  /* The test's own instrument, the text captures below, names the blocked
     thread's frames on this thread: its first capture reads the DWARF of
     each module on that stack (libc's, libasan's: over a second under ASan
     on a loaded machine, longer than the blocked call). Paid on the thread
     before it blocks (it waits for `go`); the SDK's own first moments stay
     as an app meets them. */
  char *first = NULL;
  CHECK_EQ_INT(perf_backtrace_thread_text(tid, &first), PERF_OK);
  perf_free(first);
  CHECK(write(b.go[1], "g", 1) == 1);
  if (waker) CHECK(pthread_create(&wk, NULL, waker_main, waker) == 0);

  /* Capture it while it blocks: directly, and all threads now and then. */
  int captures = 0, showing = 0, nows = 0, err;
  long long next_now = 0;
  char *last = NULL;
  while (!atomic_load(&b.done)) {
    CHECKF(clock_ns(CLOCK_MONOTONIC) < give_up, "the call did not return in %d ms", WAIT_MS);
    long long t = clock_ns(CLOCK_MONOTONIC);
    if (t >= next_now) {
      err = perf_sdk_capture_now("while blocked");
      CHECKF(err == PERF_OK, "capture_now: %s", perf_strerror(err));
      nows++;
      next_now = t + 50000000LL;
    }
    char *text = NULL;
    err = perf_backtrace_thread_text(tid, &text);
    if (err != PERF_OK) continue;
    captures++;
    /* Counted while the call is still blocked: a capture after it returned
       shows other frames. */
    if (shows_call(text, libc) && !atomic_load(&b.done)) showing++;
    perf_free(last);
    last = text;
  }
  pthread_join(blocker, NULL);
  close(b.go[0]);
  close(b.go[1]);
  intptr_t conn = 0;
  if (waker) pthread_join(wk, (void **)&conn);
  if (conn > 0) close((int)conn);
  atomic_store(&g_stop_spin, 1);
  pthread_join(spinner, NULL);

  /* The call returned what it returns without the SDK, not early. */
  long long took = b.t1 - b.t0;
  fprintf(stderr, "ret %ld errno %d after %lld ms; %d captures (%d showing the call), %d now\n",
          b.ret, b.err, took / 1000000, captures, showing, nows);
  CHECKF(b.err != EINTR, "the call returned EINTR after %lld ms", took / 1000000);
  if (want_ret == ANY_FD)
    CHECKF(b.ret >= 0, "accept returned %ld", b.ret);
  else
    CHECK_EQ_INT(b.ret, want_ret);
  if (want_ret == ANY_FD) close((int)b.ret);
  if (want_err) CHECK_EQ_INT(b.err, want_err);
  CHECKF(took >= BLOCK_NS, "the call returned after %lld ns, before its %lld", took, BLOCK_NS);
  CHECKF(showing >= 1 && showing * 2 >= captures,
         "%d of %d captures show the call under its callers; last:\n%s", showing, captures,
         last ? last : "");
  perf_free(last);

  CHECK_EQ_INT(perf_sdk_shutdown(WAIT_MS), PERF_OK);
  char *text = read_text(report);
  const char *hang = strstr(text, "event hang");
  CHECKF(hang != NULL, "no hang event in the report:\n%.4000s", text);
  CHECKF(strstr(hang, "blocking_call_outer") != NULL,
         "the hang has no blocking_call_outer:\n%.6000s", hang);
  CHECKF(strstr(text, "while blocked") != NULL, "no capture_now event in the report");
  free(text);
}

/* A pipe's read end; its write end stays open (no data, no end of file). */
static int a_pipe(int *write_end) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  *write_end = fds[1];
  return fds[0];
}

/* ---- cases -------------------------------------------------------------- */

static void case_nanosleep(void) {
  run(K_NANOSLEEP, CLOCK_MONOTONIC, -1, "clock_nanosleep|__clock_nanosleep|nanosleep|__nanosleep",
      0, 0, NULL);
}

static void case_clock_nanosleep(void) {
  run(K_CLOCK_NANOSLEEP, CLOCK_MONOTONIC, -1, "clock_nanosleep|__clock_nanosleep", 0, 0, NULL);
}

static int g_keep_write_end;

static void case_epoll_wait(void) {
  int rd = a_pipe(&g_keep_write_end);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN};
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, rd, &ev) == 0);
  run(K_EPOLL_WAIT, CLOCK_MONOTONIC, ep, "epoll_wait|__epoll_wait", 0, 0, NULL);
}

static void case_poll(void) {
  run(K_POLL, CLOCK_MONOTONIC, a_pipe(&g_keep_write_end), "poll|__poll", 0, 0, NULL);
}

static void case_select(void) {
  run(K_SELECT, CLOCK_MONOTONIC, a_pipe(&g_keep_write_end), "select|__select", 0, 0, NULL);
}

static void case_read(void) {
  int wr;
  int rd = a_pipe(&wr);
  waker_t w = {.fd = wr};
  run(K_READ, CLOCK_MONOTONIC, rd, "read|__libc_read|__read", 1, 0, &w);
}

static void case_sem_timedwait(void) {
  CHECK(sem_init(&g_sem, 0, 0) == 0);
  run(K_SEM_TIMEDWAIT, CLOCK_REALTIME, -1,
      "sem_timedwait|__new_sem_timedwait|__sem_timedwait|__futex_abstimed_wait_common|"
      "__futex_abstimed_wait_common64|do_futex_wait|__new_sem_wait_slow64|__new_sem_wait_slow",
      -1, ETIMEDOUT, NULL);
}

static void case_cond_timedwait(void) {
  run(K_COND_TIMEDWAIT, CLOCK_REALTIME, -1,
      "pthread_cond_timedwait|__pthread_cond_timedwait|___pthread_cond_timedwait|"
      "__pthread_cond_wait_common|__futex_abstimed_wait_common|__futex_abstimed_wait_common64",
      ETIMEDOUT, ETIMEDOUT, NULL);
}

static void case_accept(void) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  CHECK(bind(s, (struct sockaddr *)&a, sizeof a) == 0);
  CHECK(listen(s, 4) == 0);
  CHECK(getsockname(s, (struct sockaddr *)&a, &len) == 0);
  waker_t w = {.port = ntohs(a.sin_port)};
  run(K_ACCEPT, CLOCK_MONOTONIC, s, "accept|__libc_accept|__accept", ANY_FD, 0, &w);
}

static const test_case_t g_cases[] = {
    TEST_CASE(nanosleep),     TEST_CASE(clock_nanosleep), TEST_CASE(epoll_wait),
    TEST_CASE(poll),          TEST_CASE(select),          TEST_CASE(read),
    TEST_CASE(sem_timedwait), TEST_CASE(cond_timedwait),  TEST_CASE(accept),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
