/*
 * test_sampler.c - the any-thread sampler against threads parked in known
 * call chains. Built twice (-O0 and -O2, see CMakeLists.txt); each case runs
 * in its own process: `test_sampler_O2 <case>`.
 *
 * Chain functions are noinline (and noclone/noipa under gcc) and use their
 * callee's result, so every frame really exists, as gdb shows it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "eu_stack.h"
#include "perf_sdk.h"
#include "stack_assert.h"
#include "stale_record.h"
#include "test_util.h"

#define WAIT_MS 20000 /* polls for a thread to reach its chain give up after this */
/* The capture timeout of every case (main sets it) but those about
   timeouts: a running thread on a loaded machine can wait longer than the
   default 100 ms (the SDK monitors', which must not wait) for a core, and
   these cases are about stacks, not about late threads. 10 s is the most
   the sampler takes. */
#define SLOW_TIMEOUT_MS 10000
#define GARBAGE_BUDGET_MS 30000 /* rbp_garbage: captures for at most this long */
#define BLOCKED_TIMEOUT_MS 1000 /* signal_blocked: the capture timeout */
#define MASK_LOOK_MS 100        /* how long a thread masking the signal is looked at */

static atomic_int g_stop;
static volatile unsigned long g_sink;

/* ---- parked threads -------------------------------------------------- */

typedef struct {
  pthread_t thread;
  atomic_int tid;
  void *(*body)(void *);
  const char *name;
  int fd;
} parked_t;

static pid_t gettid_now(void) {
  return (pid_t)syscall(SYS_gettid);
}

static CHAIN void *parked_trampoline_body(parked_t *p) {
  return p->body(p);
}
static void *parked_start(void *arg) {
  parked_t *p = arg;
  if (p->name) pthread_setname_np(pthread_self(), p->name);
  atomic_store(&p->tid, gettid_now());
  return parked_trampoline_body(p);
}

static pid_t park(parked_t *p, void *(*body)(void *), const char *name) {
  p->body = body;
  p->name = name;
  atomic_store(&p->tid, 0);
  CHECK(pthread_create(&p->thread, NULL, parked_start, p) == 0);
  while (atomic_load(&p->tid) == 0)
    usleep(1000);
  return atomic_load(&p->tid);
}

/* A busy leaf that never sets up a frame at -O2 and never returns on its own. */
static CHAIN unsigned long chain_spin_leaf(unsigned long x) {
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed))
    x = x * 2862933555777941757UL + 3;
  return x;
}
static CHAIN unsigned long chain_spin_middle(unsigned long x) {
  return chain_spin_leaf(x) + 1;
}
CHAIN unsigned long chain_spin_outer(unsigned long x) {
  return chain_spin_middle(x) + 1;
}
static void *spin_body(void *arg) {
  (void)arg;
  g_sink = chain_spin_outer(7);
  return NULL;
}

static CHAIN long chain_read_inner(int fd) {
  char c;
  long n = read(fd, &c, 1);
  return n + 1;
}
static CHAIN long chain_read_middle(int fd) {
  return chain_read_inner(fd) + 1;
}
CHAIN long chain_read_outer(int fd) {
  return chain_read_middle(fd) + 1;
}
static void *read_body(void *arg) {
  g_sink = (unsigned long)chain_read_outer(((parked_t *)arg)->fd);
  return NULL;
}

static CHAIN int chain_sleep_inner(void) {
  struct timespec ts = {0, 100 * 1000 * 1000};
  return nanosleep(&ts, NULL) + 1;
}
CHAIN int chain_sleep_outer(void) {
  int r = 0;
  while (!atomic_load(&g_stop))
    r += chain_sleep_inner();
  return r;
}
static void *sleep_body(void *arg) {
  (void)arg;
  g_sink = (unsigned long)chain_sleep_outer();
  return NULL;
}

static CHAIN unsigned long chain_recurse(int depth, unsigned long x) {
  if (depth == 0) return chain_spin_leaf(x) + 1;
  return chain_recurse(depth - 1, x + 1) + 1;
}
static void *deep_body(void *arg) {
  (void)arg;
  g_sink = chain_recurse(300, 1);
  return NULL;
}

/* ---- helpers ----------------------------------------------------------- */

/* Default sampler options with the capture timeout `timeout_ms`. */
static void sampler_options(perf_sampler_options_t *opts, unsigned timeout_ms) {
  perf_sampler_options_init(opts);
  opts->timeout_ms = timeout_ms;
}

static void set_capture_timeout(unsigned timeout_ms) {
  perf_sampler_options_t opts;
  sampler_options(&opts, timeout_ms);
  CHECK_EQ_INT(perf_sampler_configure(&opts), PERF_OK);
}

static void expect_chain(const char *title, const char *text, const char *const *chain, size_t n) {
  stack_syms_t *s = malloc(sizeof *s);
  CHECK(s != NULL);
  stack_parse(text, s);
  if (!stack_has_chain(s, chain, n)) {
    stack_dump(title, text);
    fprintf(stderr, "expected consecutive frames:");
    for (size_t i = 0; i < n; i++)
      fprintf(stderr, " %s", chain[i]);
    fputc('\n', stderr);
    free(s);
    exit(1);
  }
  free(s);
}

static void stop_all(parked_t *p, size_t n, int write_fd) {
  atomic_store(&g_stop, 1);
  if (write_fd >= 0) CHECK(write(write_fd, "xxxxxxxx", 8) == 8);
  for (size_t i = 0; i < n; i++)
    pthread_join(p[i].thread, NULL);
}

/* ---- cases --------------------------------------------------------------- */

static void case_spin_leaf(void) {
  parked_t p;
  pid_t tid = park(&p, spin_body, "spinner");
  char *text = stack_wait_for_frame0(tid, "chain_spin_leaf", WAIT_MS);
  const char *chain[] = {"chain_spin_leaf", "chain_spin_middle",      "chain_spin_outer",
                         "spin_body",       "parked_trampoline_body", "parked_start"};
  expect_chain("spin_leaf", text, chain, ARRAY_LEN(chain));
  CHECK(strstr(text, "\"spinner\"") != NULL);
  perf_free(text);
  stop_all(&p, 1, -1);
}

static void case_blocked_read(void) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  parked_t p;
  p.fd = fds[0];
  pid_t tid = park(&p, read_body, "reader");
  char *text = stack_wait_for_frame0(tid, "read|__libc_read|__read", WAIT_MS);
  const char *chain[] = {"read|__libc_read|__read", "chain_read_inner", "chain_read_middle",
                         "chain_read_outer", "read_body"};
  expect_chain("blocked_read", text, chain, ARRAY_LEN(chain));
  perf_free(text);
  stop_all(&p, 1, fds[1]);
}

static void case_nanosleep(void) {
  parked_t p;
  pid_t tid = park(&p, sleep_body, "sleeper");
  char *text = stack_wait_for_frame0(tid, "clock_nanosleep|__clock_nanosleep", WAIT_MS);
  const char *chain[] = {"clock_nanosleep|__clock_nanosleep", "nanosleep|__nanosleep",
                         "chain_sleep_inner", "chain_sleep_outer", "sleep_body"};
  expect_chain("nanosleep", text, chain, ARRAY_LEN(chain));
  perf_free(text);
  stop_all(&p, 1, -1);
}

static void case_deep_recursion(void) {
  parked_t p;
  pid_t tid = park(&p, deep_body, "deep");
  char *text = stack_wait_for_frame0(tid, "chain_spin_leaf", WAIT_MS);
  /* The full report: the leaf, 301 recursion frames, then the thread entry. */
  const char *chain[] = {"chain_spin_leaf", "chain_recurse", "chain_recurse"};
  expect_chain("deep", text, chain, ARRAY_LEN(chain));
  stack_syms_t *s = malloc(sizeof *s);
  CHECK(s != NULL);
  stack_parse(text, s);
  size_t recursion = 0;
  for (size_t i = 0; i < s->count; i++)
    recursion += strcmp(s->symbols[i], "chain_recurse") == 0;
  CHECK_EQ_INT(recursion, 301);
  const char *tail[] = {"chain_recurse", "deep_body", "parked_trampoline_body"};
  expect_chain("deep tail", text, tail, ARRAY_LEN(tail));
  free(s);
  perf_free(text);

  /* Beyond max: exactly max frames and PERF_E_TRUNCATED. Frame 1 returns
     into chain_recurse after its call of the leaf, frames 2..63 all after
     the recursive call. */
  uintptr_t pcs[64];
  size_t count = 0;
  CHECK_EQ_INT(perf_backtrace_thread(tid, pcs, 64, &count), PERF_E_TRUNCATED);
  CHECK_EQ_INT(count, 64);
  for (size_t i = 3; i < count; i++)
    CHECK(pcs[i] == pcs[2]);
  for (size_t i = 1; i < 3; i++)
    CHECK(pcs[i] > (uintptr_t)&chain_recurse && pcs[i] < (uintptr_t)&chain_recurse + 4096);
  CHECK(pcs[1] != pcs[2]);
  stop_all(&p, 1, -1);
}

static void case_all_threads(void) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  parked_t p[3];
  p[1].fd = fds[0];
  pid_t tids[3] = {park(&p[0], spin_body, "worker-spin"), park(&p[1], read_body, "worker-read"),
                   park(&p[2], sleep_body, "worker-sleep")};
  free(stack_wait_for_frame0(tids[1], "read|__libc_read|__read", WAIT_MS));
  char *text = NULL;
  CHECK_EQ_INT(perf_backtrace_all_threads_text(&text), PERF_OK);
  /* Every thread of the process has its section, main thread included. */
  char header[64];
  snprintf(header, sizeof header, "thread %d \"", (int)getpid());
  CHECKF(strstr(text, header) != NULL, "no main thread section in:\n%s", text);
  const char *names[] = {"worker-spin", "worker-read", "worker-sleep"};
  for (int i = 0; i < 3; i++) {
    snprintf(header, sizeof header, "thread %d \"%s\"", (int)tids[i], names[i]);
    const char *section = strstr(text, header);
    CHECKF(section != NULL, "no section '%s' in:\n%s", header, text);
  }
  size_t sections = 0;
  for (const char *q = text; (q = strstr(q, "\nthread ")) != NULL; q++)
    sections++;
  CHECK_EQ_INT(sections + 1, 4); /* main + 3 workers, nothing else runs here */
  const char *spin[] = {"chain_spin_middle", "chain_spin_outer"};
  const char *rd[] = {"chain_read_inner", "chain_read_middle", "chain_read_outer"};
  snprintf(header, sizeof header, "thread %d ", (int)tids[0]);
  expect_chain("all/spin", strstr(text, header), spin, ARRAY_LEN(spin));
  snprintf(header, sizeof header, "thread %d ", (int)tids[1]);
  expect_chain("all/read", strstr(text, header), rd, ARRAY_LEN(rd));
  perf_free(text);
  stop_all(p, 3, fds[1]);
}

static atomic_int g_unblock;
static void *blocked_body(void *arg) {
  (void)arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, perf_sampler_signal());
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  while (!atomic_load(&g_unblock))
    g_sink++;
  pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* the late signal arrives here */
  g_sink = chain_spin_outer(3);
  return NULL;
}

/* Whether signal signo is pending for thread tid, in its own queue
   (SigPnd) or the process's (ShdPnd). */
static bool signal_pending_for(pid_t tid, int signo) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
  char *status = read_text(path);
  bool pending = false;
  const char *keys[] = {"\nSigPnd:", "\nShdPnd:"};
  for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
    const char *line = strstr(status, keys[i]);
    CHECKF(line != NULL, "no %s in %s", keys[i] + 1, path);
    unsigned long long mask = strtoull(line + strlen(keys[i]), NULL, 16);
    pending = pending || (mask >> (signo - 1) & 1);
  }
  free(status);
  return pending;
}

static void case_signal_blocked(void) {
  CHECK(perf_sampler_signal() > 0);
  parked_t p;
  pid_t tid = park(&p, blocked_body, "blocker");
  /* A thread that masks the signal is looked at for min(timeout_ms,
     100 ms), then refused at once for a while. A single capture reads the
     mask while its signal flies: the signal it sent is taken back, none
     stays pending. */
  set_capture_timeout(BLOCKED_TIMEOUT_MS);
  uintptr_t pcs[64];
  size_t count = 99;
  /* The first capture builds the unwind rules (seconds under ASan on a
     loaded machine): not part of the wait measured below. */
  CHECK_EQ_INT(perf_backtrace_thread(0, pcs, 64, &count), PERF_OK);
  count = 99;
  long long t0 = now_ms();
  CHECK_EQ_INT(perf_backtrace_thread(tid, pcs, 64, &count), PERF_E_TIMEOUT);
  long long waited = now_ms() - t0;
  CHECK_EQ_INT(count, 0);
  CHECKF(!signal_pending_for(tid, perf_sampler_signal()),
         "the sampler's signal %d is left pending for a thread masking it", perf_sampler_signal());
  /* Looked at for the 100 ms, not for the 1 s answer timeout. */
  CHECKF(waited >= MASK_LOOK_MS - 10 && waited < BLOCKED_TIMEOUT_MS,
         "waited %lld ms looking at a thread masking the signal (%d ms)", waited, MASK_LOOK_MS);
  /* Refused at once now, without the look. */
  t0 = now_ms();
  CHECK_EQ_INT(perf_backtrace_thread(tid, pcs, 64, &count), PERF_E_TIMEOUT);
  waited = now_ms() - t0;
  CHECKF(waited < MASK_LOOK_MS - 10, "second request waited %lld ms", waited);
  /* Other threads are still served meanwhile. */
  CHECK(perf_backtrace_thread(0, pcs, 64, &count) == PERF_OK && count > 2);
  /* Unmasked (no signal was left pending for it), the thread becomes
     capturable again once the hold ends. */
  atomic_store(&g_unblock, 1);
  char *text = stack_wait_for_frame0(tid, "chain_spin_leaf", WAIT_MS);
  const char *chain[] = {"chain_spin_leaf", "chain_spin_middle", "chain_spin_outer",
                         "blocked_body"};
  expect_chain("after unblock", text, chain, ARRAY_LEN(chain));
  perf_free(text);
  stop_all(&p, 1, -1);
}

static void *exit_body(void *arg) {
  (void)arg;
  return NULL;
}

static void case_thread_exit(void) {
  /* A thread that exits before it answers is waited for until the timeout
     (then PERF_E_NO_THREAD or PERF_E_TIMEOUT): the default 100 ms, 300 times. */
  set_capture_timeout(100);
  uintptr_t pcs[64];
  size_t count;
  int outcomes[4] = {0};
  for (int i = 0; i < 300; i++) {
    parked_t p;
    pid_t tid = park(&p, exit_body, NULL);
    int err = perf_backtrace_thread(tid, pcs, 64, &count);
    CHECKF(err == PERF_OK || err == PERF_E_TRUNCATED || err == PERF_E_NO_THREAD ||
               err == PERF_E_TIMEOUT,
           "capture of an exiting thread: %s", perf_strerror(err));
    outcomes[err == PERF_OK ? 0 : err == PERF_E_NO_THREAD ? 1 : err == PERF_E_TIMEOUT ? 2 : 3]++;
    pthread_join(p.thread, NULL);
    /* Gone for good: a clear error, whatever the capture above saw. */
    err = perf_backtrace_thread(tid, pcs, 64, &count);
    CHECKF(err == PERF_E_NO_THREAD || err == PERF_E_TIMEOUT, "after join: %s", perf_strerror(err));
  }
  fprintf(stderr, "exiting threads: ok=%d no_thread=%d timeout=%d\n", outcomes[0], outcomes[1],
          outcomes[2]);
  /* A tid that was never ours. */
  CHECK_EQ_INT(perf_backtrace_thread(1, pcs, 64, &count), PERF_E_NO_THREAD);
}

void rbp_garbage_loop(atomic_int *stop, uintptr_t stack_hint);
extern const char rbp_garbage_loop_end[]; /* the end of its code */
static atomic_int g_garbage_stop;
static void *garbage_body(void *arg) {
  (void)arg;
  int here;
  rbp_garbage_loop(&g_garbage_stop, (uintptr_t)&here);
  return NULL;
}

static void case_rbp_garbage(void) {
  parked_t p;
  pid_t tid = park(&p, garbage_body, "rbp-garbage");
  /* Once the thread is in the loop, it never leaves: every capture's frame 0
     is in it. */
  const char *loop[] = {"rbp_garbage_loop"};
  char *text = stack_wait_for_frame0(tid, loop[0], WAIT_MS);
  expect_chain("rbp_garbage", text, loop, 1);
  perf_free(text);
  const uintptr_t loop_lo = (uintptr_t)&rbp_garbage_loop, loop_hi = (uintptr_t)rbp_garbage_loop_end;
  uintptr_t pcs[256];
  size_t count;
  perf_sampler_options_t opts;
  sampler_options(&opts, SLOW_TIMEOUT_MS); /* every capture must succeed */
  /* 100000 captures take a second or two on a quiet machine; a loaded one
     gets GARBAGE_BUDGET_MS of them. The modes take turns every 1000, so
     both get their share however many there are. */
  long long deadline = now_ms() + GARBAGE_BUDGET_MS;
  int taken = 0, in_loop = 0;
  for (; taken < 100000 && (taken % 1000 != 0 || now_ms() < deadline); taken++) {
    if (taken % 1000 == 0) {
      opts.unwind_mode = (taken / 1000) % 2 ? PERF_UNWIND_FRAME_POINTER : PERF_UNWIND_CFI;
      CHECK_EQ_INT(perf_sampler_configure(&opts), PERF_OK);
    }
    int err = perf_backtrace_thread(tid, pcs, 256, &count);
    CHECKF(err == PERF_OK || err == PERF_E_TRUNCATED, "sample %d: %s", taken, perf_strerror(err));
    CHECK(count >= 1);
    in_loop += pcs[0] >= loop_lo && pcs[0] < loop_hi;
  }
  fprintf(stderr, "%d captures, %d in the loop\n", taken, in_loop);
  CHECKF(taken >= 2000, "only %d captures in %d ms", taken, GARBAGE_BUDGET_MS);
  CHECKF(in_loop == taken, "only %d of %d captures in the loop (0x%lx..0x%lx)", in_loop, taken,
         (unsigned long)loop_lo, (unsigned long)loop_hi);
  atomic_store(&g_garbage_stop, 1);
  pthread_join(p.thread, NULL);
}

static CHAIN int chain_self_inner(char **text) {
  return perf_backtrace_thread_text(0, text) + 1;
}
CHAIN int chain_self_outer(char **text) {
  return chain_self_inner(text) + 1;
}

static void case_self_capture(void) {
  char *text = NULL;
  CHECK_EQ_INT(chain_self_outer(&text), 2);
  const char *chain[] = {"chain_self_inner", "chain_self_outer", "case_self_capture"};
  expect_chain("self", text, chain, ARRAY_LEN(chain));
  char header[64];
  snprintf(header, sizeof header, "thread %d \"", (int)gettid_now());
  CHECK(strncmp(text, header, strlen(header)) == 0);
  perf_free(text);
  uintptr_t pcs[128];
  size_t count;
  CHECK_EQ_INT(perf_backtrace_thread(gettid_now(), pcs, 128, &count), PERF_OK);
  CHECK(count > 3);
}

/* An app signal handler that spins: the stack must continue through the
   kernel's signal frame into the code it interrupted. */
static atomic_int g_in_handler;
static CHAIN void chain_app_handler_leaf(void) {
  atomic_store(&g_in_handler, 1);
  chain_spin_leaf(1);
}
static CHAIN void app_handler(int sig) {
  (void)sig;
  chain_app_handler_leaf();
}
static CHAIN unsigned long chain_interrupted(unsigned long x) {
  while (!atomic_load(&g_in_handler))
    x = x * 3 + 1;
  return x;
}
static void *interrupted_body(void *arg) {
  (void)arg;
  g_sink = chain_interrupted(5) + 1;
  return NULL;
}

static void case_signal_frame(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = app_handler;
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  parked_t p;
  pid_t tid = park(&p, interrupted_body, "interrupted");
  usleep(10000);
  CHECK(pthread_kill(p.thread, SIGUSR1) == 0);
  char *text = stack_wait_for_frame0(tid, "chain_spin_leaf", WAIT_MS);
  const char *chain[] = {"chain_spin_leaf", "chain_app_handler_leaf", "app_handler"};
  expect_chain("signal frame", text, chain, ARRAY_LEN(chain));
  const char *below[] = {"chain_interrupted", "interrupted_body"};
  expect_chain("signal frame (interrupted code)", text, below, ARRAY_LEN(below));
  perf_free(text);
  stop_all(&p, 1, -1);
}

static void case_modes(void) {
  parked_t p;
  pid_t tid = park(&p, spin_body, "modes");
  perf_sampler_options_t opts;
  sampler_options(&opts, SLOW_TIMEOUT_MS);
  const perf_unwind_mode_t complete[] = {PERF_UNWIND_CFI, PERF_UNWIND_STACK_COPY};
  for (size_t m = 0; m < ARRAY_LEN(complete); m++) {
    opts.unwind_mode = complete[m];
    CHECK_EQ_INT(perf_sampler_configure(&opts), PERF_OK);
    char *text = stack_wait_for_frame0(tid, "chain_spin_leaf", WAIT_MS);
    const char *chain[] = {"chain_spin_leaf", "chain_spin_middle", "chain_spin_outer", "spin_body"};
    expect_chain(complete[m] == PERF_UNWIND_CFI ? "cfi" : "stack_copy", text, chain,
                 ARRAY_LEN(chain));
    perf_free(text);
  }
  /* Frame pointers only: frame 0 is always right; callers may be missing. */
  opts.unwind_mode = PERF_UNWIND_FRAME_POINTER;
  CHECK_EQ_INT(perf_sampler_configure(&opts), PERF_OK);
  char *text = stack_wait_for_frame0(tid, "chain_spin_leaf", WAIT_MS);
  stack_syms_t *s = malloc(sizeof *s);
  CHECK(s != NULL);
  stack_parse(text, s);
  CHECK(s->count >= 1 && strcmp(s->symbols[0], "chain_spin_leaf") == 0);
  free(s);
  perf_free(text);
  /* Bad options are refused and name what is wrong. */
  opts.timeout_ms = 0;
  CHECK_EQ_INT(perf_sampler_configure(&opts), PERF_E_INVALID_CONFIG);
  perf_sampler_options_init(&opts);
  opts.stack_copy_bytes = 4096; /* fixed at first use */
  CHECK_EQ_INT(perf_sampler_configure(&opts), PERF_E_ALREADY_INITIALIZED);
  stop_all(&p, 1, -1);
}

static void case_bad_arguments(void) {
  uintptr_t pcs[4];
  size_t count;
  char *text;
  CHECK_EQ_INT(perf_backtrace_thread(0, NULL, 4, &count), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_backtrace_thread(0, pcs, 0, &count), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_backtrace_thread(0, pcs, 4, NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_backtrace_thread(-5, pcs, 4, &count), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_backtrace_thread_text(0, NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_backtrace_all_threads_text(NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_backtrace_thread_text(999999999, &text), PERF_E_NO_THREAD);
  CHECK(text == NULL);
  CHECK_EQ_INT(perf_sampler_configure(NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_main_thread_id(), gettid_now());
  for (int e = 0; e >= PERF_E_SINK_FAILED; e--)
    CHECKF(strcmp(perf_strerror(e), "unknown error") != 0, "code %d has no text", e);
  CHECK(strcmp(perf_strerror(-1000), "unknown error") == 0);
  perf_free(NULL);
}

/* ---- an independent view: elfutils' eu-stack (ptrace + libdwfl) -------- */

static pthread_mutex_t g_cond_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static CHAIN int chain_wait_inner(void) {
  pthread_mutex_lock(&g_cond_lock);
  while (!atomic_load(&g_stop))
    pthread_cond_wait(&g_cond, &g_cond_lock);
  pthread_mutex_unlock(&g_cond_lock);
  return 1;
}
CHAIN int chain_wait_outer(void) {
  return chain_wait_inner() + 1;
}
static void *wait_body(void *arg) {
  (void)arg;
  g_sink = (unsigned long)chain_wait_outer();
  return NULL;
}

static void case_matches_eu_stack(void) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  parked_t p[3];
  p[1].fd = fds[0];
  pid_t tids[3] = {park(&p[0], spin_body, "cmp-spin"), park(&p[1], read_body, "cmp-read"),
                   park(&p[2], wait_body, "cmp-wait")};
  const char *parked_in[3][2] = {{"chain_spin_leaf", "chain_spin_middle"},
                                 {"read|__libc_read|__read", "chain_read_inner"},
                                 {"pthread_cond_wait", "chain_wait_inner"}};
  uintptr_t ours[3][256];
  size_t n_ours[3];
  for (int i = 0; i < 3; i++) {
    perf_free(stack_wait_for_chain(tids[i], parked_in[i], 2, WAIT_MS));
    CHECK_EQ_INT(perf_backtrace_thread(tids[i], ours[i], 256, &n_ours[i]), PERF_OK);
  }
  /* Each parked thread's section must be there and match, below. */
  const char *out = eu_stack_report();
  for (int i = 0; i < 3; i++) {
    uintptr_t theirs[256];
    size_t n_theirs = eu_stack_pcs(out, tids[i], theirs, 256);
    /* Every caller must be identical. Frame 0: the spinning thread moves
       between the two captures (its function was checked above); a thread
       blocked in a restartable system call is seen by a signal handler AT
       the 2-byte `syscall` instruction (the kernel rewinds the pc to restart
       it) and by ptrace just after it. */
    bool same = n_theirs == n_ours[i] && n_theirs > 0 &&
                (i == 0 || (theirs[0] >= ours[i][0] && theirs[0] - ours[i][0] <= 2));
    for (size_t k = 1; same && k < n_ours[i]; k++)
      same = ours[i][k] == theirs[k];
    if (!same) {
      fprintf(stderr, "thread %d: ours %zu frames, eu-stack %zu\n", (int)tids[i], n_ours[i],
              n_theirs);
      for (size_t k = 0; k < n_ours[i] || k < n_theirs; k++)
        fprintf(stderr, "  #%zu ours 0x%lx eu-stack 0x%lx\n", k,
                k < n_ours[i] ? (unsigned long)ours[i][k] : 0UL,
                k < n_theirs ? (unsigned long)theirs[k] : 0UL);
      fprintf(stderr, "%s", out);
      exit(1);
    }
  }
  pthread_mutex_lock(&g_cond_lock);
  atomic_store(&g_stop, 1);
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_cond_lock);
  stop_all(p, 3, fds[1]);
}

/* ---- stale frame records under frame-pointer code --------------------- */

/* A thread blocked in a call is captured without a signal: only its pc and
   sp are known. Its first frame-pointer frame (stale_block_inner, straight
   above the libc wrapper) has its rbp searched for, in a frame that also
   holds the records an earlier call left there (stale_record.c). Every
   capture must be eu-stack's stack (ptrace: the real rbp), frame for frame. */
#define STALE_ROUNDS 3     /* blocking calls per case, each entered afresh */
#define STALE_CAPTURES 100 /* captures compared per blocking call */

static stale_thread_t g_stale;
static void *stale_body(void *arg) {
  (void)arg;
  stale_record_loop(&g_stale);
  return NULL;
}
static void stale_wake_handler(int sig) {
  (void)sig;
}

/* One word of the blocked thread's stack, which may lie in what an
   instrumented frame marks as a redzone. */
__attribute__((no_sanitize_address)) static uintptr_t stack_word(uintptr_t addr) {
  return *(const volatile uintptr_t *)addr;
}

static void stale_record_case(stale_call_t call, const char *frame0) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = stale_wake_handler; /* no SA_RESTART: ends the nanosleep */
  CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);
  int fds[2];
  CHECK(pipe(fds) == 0);
  g_stale.call = call;
  g_stale.fd = fds[0];
  parked_t p;
  pid_t tid = park(&p, stale_body, "stale-record");
  const char *chain[] = {"stale_block_inner", "stale_block_outer", "stale_record_loop",
                         "stale_body"};
  for (int round = 1; round <= STALE_ROUNDS; round++) {
    long long deadline = now_ms() + WAIT_MS;
    while (atomic_load(&g_stale.calls) < round)
      CHECKF(now_ms() < deadline, "round %d: the thread did not reach its call", round);
    perf_free(stack_wait_for_frame0(tid, frame0, WAIT_MS));
    /* What the case is about: the old records lie in the blocked frame,
       below its own record, intact. */
    CHECKF(g_stale.stale_at > g_stale.scratch_at && g_stale.stale_at < g_stale.record_at,
           "the stale record (0x%lx) is not in stale_block_inner's frame (0x%lx..0x%lx)",
           (unsigned long)g_stale.stale_at, (unsigned long)g_stale.scratch_at,
           (unsigned long)g_stale.record_at);
    CHECK(stack_word(g_stale.stale_at) == g_stale.stale_words[0] &&
          stack_word(g_stale.stale_at + 8) == g_stale.stale_words[1]);
    uintptr_t theirs[256];
    const char *report = eu_stack_report();
    size_t n_theirs = eu_stack_pcs(report, tid, theirs, 256);
    CHECKF(n_theirs > 4, "eu-stack has no stack of thread %d:\n%s", (int)tid, report);
    for (int i = 0; i < STALE_CAPTURES; i++) {
      uintptr_t ours[256];
      size_t n_ours = 0;
      CHECK_EQ_INT(perf_backtrace_thread(tid, ours, 256, &n_ours), PERF_OK);
      /* Frame 0: ptrace sees a thread stopped in a restartable call at
         the syscall instruction or just after it. */
      bool same = n_ours == n_theirs && ours[0] >= theirs[0] && ours[0] - theirs[0] <= 2;
      for (size_t k = 1; same && k < n_ours; k++)
        same = ours[k] == theirs[k];
      if (!same) {
        fprintf(stderr, "round %d capture %d: ours %zu frames, eu-stack %zu\n", round, i, n_ours,
                n_theirs);
        for (size_t k = 0; k < n_ours || k < n_theirs; k++)
          fprintf(stderr, "  #%zu ours 0x%lx eu-stack 0x%lx\n", k,
                  k < n_ours ? (unsigned long)ours[k] : 0UL,
                  k < n_theirs ? (unsigned long)theirs[k] : 0UL);
        char *text = NULL;
        if (perf_backtrace_thread_text(tid, &text) == PERF_OK) stack_dump("ours", text);
        perf_free(text);
        fprintf(stderr, "%s", report);
        exit(1);
      }
    }
    char *text = NULL;
    CHECK_EQ_INT(perf_backtrace_thread_text(tid, &text), PERF_OK);
    expect_chain("stale record", text, chain, ARRAY_LEN(chain));
    perf_free(text);
    if (round == STALE_ROUNDS) atomic_store(&g_stale.stop, 1);
    if (call == STALE_NANOSLEEP)
      CHECK(pthread_kill(p.thread, SIGUSR2) == 0);
    else
      CHECK(write(fds[1], "x", 1) == 1);
  }
  pthread_join(p.thread, NULL);
  fprintf(stderr, "%d blocking calls, %d captures each, every one eu-stack's\n", STALE_ROUNDS,
          STALE_CAPTURES);
}

static void case_stale_record_nanosleep(void) {
  stale_record_case(STALE_NANOSLEEP, "clock_nanosleep|__clock_nanosleep");
}
static void case_stale_record_read(void) {
  stale_record_case(STALE_READ, "read|__libc_read|__read");
}
static void case_stale_record_poll(void) {
  stale_record_case(STALE_POLL, "poll|__poll");
}

/* ---- modules loaded after the sampler started -------------------------- */

static unsigned long (*g_dl_outer)(atomic_int *, unsigned long);
static atomic_int g_dl_stop;
static void *dlopen_body(void *arg) {
  (void)arg;
  g_sink = g_dl_outer(&g_dl_stop, 9) + 1;
  return NULL;
}

static void case_dlopen_module(void) {
  uintptr_t pcs[64];
  size_t count;
  CHECK_EQ_INT(perf_backtrace_thread(0, pcs, 64, &count), PERF_OK); /* first snapshot */
  void *lib = dlopen(DL_CHAIN_PATH, RTLD_NOW);
  CHECKF(lib != NULL, "dlopen: %s", dlerror());
  g_dl_outer = (unsigned long (*)(atomic_int *, unsigned long))dlsym(lib, "dl_chain_outer");
  CHECK(g_dl_outer != NULL);
  parked_t p;
  pid_t tid = park(&p, dlopen_body, "dl-user");
  char *text = stack_wait_for_frame0(tid, "dl_chain_leaf", WAIT_MS);
  const char *chain[] = {"dl_chain_leaf", "dl_chain_middle", "dl_chain_outer", "dlopen_body"};
  expect_chain("dlopen", text, chain, ARRAY_LEN(chain));
  CHECK(strstr(text, "libdl_chain.so") != NULL);
  perf_free(text);
  atomic_store(&g_dl_stop, 1);
  pthread_join(p.thread, NULL);
  /* Unloaded again: captures go on with the module gone. */
  CHECK_EQ_INT(dlclose(lib), 0);
  CHECK_EQ_INT(perf_backtrace_thread(0, pcs, 64, &count), PERF_OK);
}

/* The app takes the sampler's signal for itself: captures fail with a
   clear error instead of hanging or crashing. */
static void case_signal_taken_over(void) {
  set_capture_timeout(100); /* the ignored signal is waited for until then */
  uintptr_t pcs[16];
  size_t count;
  int signo = perf_sampler_signal();
  CHECK(signo > 0);
  CHECK_EQ_INT(perf_backtrace_thread(0, pcs, 16, &count), PERF_OK);
  CHECK(signal(signo, SIG_IGN) != SIG_ERR);
  CHECK_EQ_INT(perf_backtrace_thread(0, pcs, 16, &count), PERF_E_SIGNAL);
  CHECK_EQ_INT(count, 0);
}

/* ---- the handler's stack budget ---------------------------------------- */

/* The handler runs on the interrupted thread's stack, below the kernel's
   signal frame (a few KiB with AVX-512 state). Its own share, measured
   against a trivial handler's, must stay within this. */
#define HANDLER_BUDGET 1024
#define PAINT_BYTES 49152
#define PAINT_SKIP 512 /* the painting frame's own stack */

static atomic_int g_painted, g_paint_stop;
static size_t g_paint_used;

static CHAIN void paint_spin(void) {
  while (!atomic_load(&g_paint_stop))
    g_sink++;
}
/* Paint the stack below this frame, spin while handlers run, then find the
   lowest byte they changed. */
static CHAIN void paint_and_measure(void) {
  volatile unsigned char *sp = __builtin_frame_address(0);
  for (size_t i = PAINT_SKIP; i < PAINT_BYTES; i++)
    sp[-(long)i] = 0xA5;
  atomic_store(&g_painted, 1);
  paint_spin();
  size_t i = PAINT_BYTES - 1;
  while (i >= PAINT_SKIP && sp[-(long)i] == 0xA5)
    i--;
  g_paint_used = i;
}
static void *paint_body(void *arg) {
  (void)arg;
  paint_and_measure();
  return NULL;
}

static atomic_int g_trivial_hits;
static void trivial_handler(int signo, siginfo_t *si, void *uc) {
  (void)signo, (void)si, (void)uc;
  atomic_fetch_add(&g_trivial_hits, 1);
}

/* Bytes below the interrupted frame that 20 of the sampler's captures
   (sampler != 0) or 20 trivial handlers use. */
static size_t handler_stack_use(int sampler, int trivial_signo) {
  atomic_store(&g_painted, 0);
  atomic_store(&g_paint_stop, 0);
  pthread_attr_t attr;
  CHECK(pthread_attr_init(&attr) == 0);
  CHECK(pthread_attr_setstacksize(&attr, 128 * 1024) == 0);
  parked_t p;
  p.body = paint_body;
  p.name = "paint";
  atomic_store(&p.tid, 0);
  CHECK(pthread_create(&p.thread, &attr, parked_start, &p) == 0);
  while (!atomic_load(&g_painted))
    usleep(1000);
  pid_t tid = atomic_load(&p.tid);
  for (int i = 0; i < 20; i++) {
    if (sampler) {
      uintptr_t pcs[64];
      size_t count;
      int err = perf_backtrace_thread(tid, pcs, 64, &count);
      CHECKF(err == PERF_OK, "%s", perf_strerror(err));
    } else {
      int before = atomic_load(&g_trivial_hits);
      CHECK(syscall(SYS_tgkill, getpid(), tid, trivial_signo) == 0);
      long long deadline = now_ms() + WAIT_MS;
      while (atomic_load(&g_trivial_hits) == before)
        CHECK(now_ms() < deadline);
    }
  }
  atomic_store(&g_paint_stop, 1);
  pthread_join(p.thread, NULL);
  return g_paint_used;
}

/* A thread on a 16 KiB stack, recursed until only what a trivial handler
   needs plus the budget is left, is captured again and again: it must
   survive, and its stack must show the recursion. */
static size_t g_room;
static atomic_int g_small_ready, g_small_stop, g_small_tid;
static uintptr_t g_small_lo;
static CHAIN unsigned long small_recurse(int depth) {
  volatile char frame[256];
  frame[0] = (char)depth;
  uintptr_t sp = (uintptr_t)__builtin_frame_address(0) - sizeof frame - 64;
  unsigned long r;
  if (sp - g_small_lo > g_room + sizeof frame + 128) {
    r = small_recurse(depth + 1) + 1;
  } else {
    atomic_store(&g_small_ready, depth);
    while (!atomic_load(&g_small_stop))
      g_sink++;
    r = 0;
  }
  return r + (unsigned long)frame[0];
}
static void *small_body(void *arg) {
  (void)arg;
  pthread_attr_t attr;
  void *lo;
  size_t size;
  CHECK(pthread_getattr_np(pthread_self(), &attr) == 0);
  CHECK(pthread_attr_getstack(&attr, &lo, &size) == 0);
  pthread_attr_destroy(&attr);
  g_small_lo = (uintptr_t)lo;
  atomic_store(&g_small_tid, gettid_now());
  g_sink = small_recurse(1);
  return NULL;
}

static void case_small_stack(void) {
  int trivial_signo = SIGRTMIN + 3;
  CHECK(trivial_signo != perf_sampler_signal());
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = trivial_handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  CHECK(sigaction(trivial_signo, &sa, NULL) == 0);
  size_t trivial = handler_stack_use(0, trivial_signo);
  size_t ours = handler_stack_use(1, 0);
  fprintf(stderr, "stack below the interrupted frame: trivial handler %zu, sampler %zu bytes\n",
          trivial, ours);
  CHECKF(ours <= trivial + HANDLER_BUDGET,
         "the sampler's handler takes %zu bytes more than a trivial one", ours - trivial);

  g_room = trivial + HANDLER_BUDGET;
  pthread_attr_t attr;
  CHECK(pthread_attr_init(&attr) == 0);
  CHECK(pthread_attr_setstacksize(&attr, 16 * 1024) == 0);
  pthread_t t;
  CHECK(pthread_create(&t, &attr, small_body, NULL) == 0);
  long long deadline = now_ms() + WAIT_MS;
  while (!atomic_load(&g_small_ready))
    CHECK(now_ms() < deadline);
  int depth = atomic_load(&g_small_ready);
  fprintf(stderr, "16 KiB stack: recursion depth %d, %zu bytes left for the handler\n", depth,
          g_room);
  CHECK(depth >= 2);
  /* Running: every capture goes through the signal handler. */
  pid_t tid = atomic_load(&g_small_tid);
  int shown = 0;
  for (int i = 0; i < 200; i++) {
    char *text = NULL;
    CHECK_EQ_INT(perf_backtrace_thread_text(tid, &text), PERF_OK);
    shown += strstr(text, "small_recurse") != NULL;
    perf_free(text);
  }
  CHECK_EQ_INT(shown, 200);
  atomic_store(&g_small_stop, 1);
  pthread_join(t, NULL);
}

/* ---- signals the app owns ---------------------------------------------- */

/* The app resets the sampler's signal to SIG_DFL: a capture that sent it
   would kill the process. Captures of running threads fail with
   PERF_E_SIGNAL instead; blocked threads need no signal and still work. */
static void case_signal_reset_default(void) {
  int signo = perf_sampler_signal();
  CHECK(signo > 0);
  parked_t p[2];
  pid_t spinner = park(&p[0], spin_body, "dfl-spin");
  perf_free(stack_wait_for_frame0(spinner, "chain_spin_leaf", WAIT_MS));
  CHECK(signal(signo, SIG_DFL) != SIG_ERR);
  uintptr_t pcs[64];
  size_t count = 99;
  CHECK_EQ_INT(perf_backtrace_thread(spinner, pcs, 64, &count), PERF_E_SIGNAL);
  CHECK_EQ_INT(count, 0);
  CHECK_EQ_INT(perf_backtrace_thread(0, pcs, 64, &count), PERF_E_SIGNAL);
  int fds[2];
  CHECK(pipe(fds) == 0);
  p[1].fd = fds[0];
  pid_t reader = park(&p[1], read_body, "dfl-read");
  char *text = stack_wait_for_frame0(reader, "read|__libc_read|__read", WAIT_MS);
  const char *chain[] = {"read|__libc_read|__read", "chain_read_inner", "chain_read_middle"};
  expect_chain("blocked, SIG_DFL", text, chain, ARRAY_LEN(chain));
  perf_free(text);
  stop_all(p, 2, fds[1]);
}

/* A thread that blocks every signal, is asked for its stack, then execs a
   program that unblocks every signal: no sampler signal may be pending
   then (its default action kills). */
static atomic_int g_exec_ready, g_exec_go;
static void *exec_body(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  atomic_store(&g_exec_ready, 1);
  while (!atomic_load(&g_exec_go)) /* running, not blocked in a call: it would be signalled */
    g_sink++;
  char *argv[] = {"test_sampler", "--exec-unblock", NULL};
  execv("/proc/self/exe", argv);
  _exit(99);
}

static void case_exec_after_blocked_signal(void) {
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    set_capture_timeout(200);
    parked_t p;
    pid_t tid = park(&p, exec_body, "exec-blocker");
    while (!atomic_load(&g_exec_ready))
      usleep(1000);
    uintptr_t pcs[16];
    size_t count;
    if (perf_backtrace_thread(tid, pcs, 16, &count) != PERF_E_TIMEOUT) _exit(3);
    atomic_store(&g_exec_go, 1);
    for (;;)
      pause(); /* the exec replaces this process */
  }
  int status = 0;
  long long deadline = now_ms() + WAIT_MS;
  pid_t got;
  while ((got = waitpid(child, &status, WNOHANG)) == 0 && now_ms() < deadline)
    usleep(10000);
  CHECKF(got == child, "the child did not end in %d ms", WAIT_MS);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the exec'd program %s %d",
         WIFSIGNALED(status) ? "died of signal" : "exited with",
         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

/* The program case_exec_after_blocked_signal execs: unblocks every signal,
   lets anything pending arrive, exits 0. */
static int exec_unblock_main(void) {
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_UNBLOCK, &all, NULL);
  struct timespec ts = {0, 200 * 1000 * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return 0;
}

static const test_case_t g_cases[] = {
    TEST_CASE(signal_reset_default),
    TEST_CASE(exec_after_blocked_signal),
    TEST_CASE(small_stack),
    TEST_CASE(signal_taken_over),
    TEST_CASE(dlopen_module),
    TEST_CASE(matches_eu_stack),
    TEST_CASE(stale_record_nanosleep),
    TEST_CASE(stale_record_read),
    TEST_CASE(stale_record_poll),
    TEST_CASE(spin_leaf),
    TEST_CASE(blocked_read),
    TEST_CASE(nanosleep),
    TEST_CASE(deep_recursion),
    TEST_CASE(all_threads),
    TEST_CASE(signal_blocked),
    TEST_CASE(thread_exit),
    TEST_CASE(rbp_garbage),
    TEST_CASE(self_capture),
    TEST_CASE(signal_frame),
    TEST_CASE(modes),
    TEST_CASE(bad_arguments),
};

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--exec-unblock") == 0) return exec_unblock_main();
  set_capture_timeout(SLOW_TIMEOUT_MS);
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
