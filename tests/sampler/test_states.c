/*
 * test_states.c - the thread state of each sample (sdk/sampler/sample_state.h)
 * against real threads in real system calls: read() on a pipe and on a
 * socket, a futex (pthread_mutex_lock on a mutex this thread holds),
 * nanosleep, poll, and a spinning thread. Each thread is first seen in its
 * call through /proc (a deadline, no sleeps), then captured: the state is
 * exact. The same threads captured into an event go through the encoder and
 * decoder (Event.sample_states, sample_syscalls, sample_fds) and the file
 * sink's text ("states thread=... waiting in read() (pipe) 100%"). And a
 * hang under the SDK (tests/support/hang_phases.h: read() on a pipe, a
 * futex, a spin, each transition stamped): every sample's state from the
 * file sink's batch record is the one its time says, and the report's
 * states line is exactly those samples' shares.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "hang_phases.h"
#include "perf_sdk.h"
#include "sdk/base/stats.h"
#include "sdk/base/strbuf.h"
#include "sdk/pipeline/capture.h"
#include "sdk/pipeline/event_encode.h"
#include "sdk/pipeline/event_text.h"
#include "sdk/sampler/sampler.h"
#include "sdk/sampler/thread_state.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/spool.h"
#include "sdk/wire/state_text.h"
#include "tempdir.h"
#include "test_util.h"

#define WAIT_MS 10000
#define CHECK_EQ_STR(a, b) CHECKF(strcmp((a), (b)) == 0, "\"%s\" != \"%s\"", (a), (b))

enum { W_PIPE, W_SOCKET, W_MUTEX, W_SLEEP, W_POLL, W_SPIN, W_COUNT };

typedef struct worker_s {
  int kind;
  pthread_t thread;
  _Atomic pid_t tid;
  int fd;                /* read / poll: the descriptor it waits on */
  pthread_mutex_t *lock; /* W_MUTEX */
  atomic_int *stop;      /* W_SPIN */
} worker_t;

static void *worker_main(void *arg) {
  worker_t *w = arg;
  atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
  char c;
  switch (w->kind) {
  case W_PIPE:
  case W_SOCKET:
    if (read(w->fd, &c, 1) != 1) abort();
    break;
  case W_MUTEX:
    pthread_mutex_lock(w->lock);
    pthread_mutex_unlock(w->lock);
    break;
  case W_SLEEP: {
    struct timespec hour = {3600, 0};
    while (!atomic_load(w->stop))
      nanosleep(&hour, NULL); /* ended by SIGUSR2 (EINTR) once stop is set */
    break;
  }
  case W_POLL: {
    struct pollfd p = {w->fd, POLLIN, 0};
    poll(&p, 1, -1);
    break;
  }
  case W_SPIN: {
    volatile unsigned long x = 1;
    while (!atomic_load_explicit(w->stop, memory_order_relaxed))
      x = x * 3 + 1;
    break;
  }
  }
  return NULL;
}

typedef struct rig_s {
  worker_t w[W_COUNT];
  int pipe_fd[2], poll_fd[2], sock[2];
  pthread_mutex_t lock;
  atomic_int stop;
} rig_t;

/* The system call each worker waits in (-1: the spinner runs). */
static long expected_nr(int kind) {
  switch (kind) {
  case W_PIPE:
  case W_SOCKET: return SYS_read;
  case W_MUTEX: return SYS_futex;
  case W_SLEEP: return SYS_clock_nanosleep; /* glibc's nanosleep */
  case W_POLL: return SYS_poll;
  }
  return -1;
}

/* Wait until /proc shows worker k in its call (the spinner: running). */
static void wait_in_call(const worker_t *w) {
  long long deadline = now_ms() + WAIT_MS;
  for (;;) {
    pid_t tid = atomic_load(&w->tid);
    perf__thread_state_t ts;
    if (tid && perf__thread_state_read(tid, &ts) == PERF_OK) {
      if (w->kind == W_SPIN ? ts.running : !ts.running && ts.nr == expected_nr(w->kind)) return;
    }
    CHECKF(now_ms() < deadline, "worker %d never showed its call", w->kind);
    sleep_ms(1);
  }
}

static void wake(int sig) {
  (void)sig;
}

static void rig_start(rig_t *r) {
  memset(r, 0, sizeof *r);
  struct sigaction sa = {.sa_handler = wake}; /* no SA_RESTART: nanosleep returns */
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);
  CHECK(pipe(r->pipe_fd) == 0 && pipe(r->poll_fd) == 0);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, r->sock) == 0);
  pthread_mutex_init(&r->lock, NULL);
  pthread_mutex_lock(&r->lock); /* W_MUTEX waits on it */
  int fds[W_COUNT] = {r->pipe_fd[0], r->sock[0], -1, -1, r->poll_fd[0], -1};
  for (int k = 0; k < W_COUNT; k++) {
    r->w[k] = (worker_t){.kind = k, .fd = fds[k], .lock = &r->lock, .stop = &r->stop};
    CHECK(pthread_create(&r->w[k].thread, NULL, worker_main, &r->w[k]) == 0);
  }
  for (int k = 0; k < W_COUNT; k++)
    wait_in_call(&r->w[k]);
}

static void rig_stop(rig_t *r) {
  CHECK(write(r->pipe_fd[1], "x", 1) == 1 && write(r->sock[1], "x", 1) == 1 &&
        write(r->poll_fd[1], "x", 1) == 1);
  pthread_mutex_unlock(&r->lock);
  atomic_store(&r->stop, 1);
  /* Signalled until it is gone: a signal just before its nanosleep is
     not one inside it. */
  for (;;) {
    pthread_kill(r->w[W_SLEEP].thread, SIGUSR2);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 10000000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    if (pthread_timedjoin_np(r->w[W_SLEEP].thread, NULL, &until) == 0) break;
  }
  for (int k = 0; k < W_COUNT; k++)
    if (k != W_SLEEP) pthread_join(r->w[k].thread, NULL);
  int fds[] = {r->pipe_fd[0], r->pipe_fd[1], r->poll_fd[0], r->poll_fd[1], r->sock[0], r->sock[1]};
  for (size_t i = 0; i < ARRAY_LEN(fds); i++)
    close(fds[i]);
  pthread_mutex_destroy(&r->lock);
}

static const perf__sample_state_t EXPECTED[W_COUNT] = {
    [W_PIPE] = {PERF__STATE_IO, PERF__FD_PIPE, SYS_read},
    [W_SOCKET] = {PERF__STATE_IO, PERF__FD_SOCKET, SYS_read},
    [W_MUTEX] = {PERF__STATE_LOCK, PERF__FD_NONE, SYS_futex},
    [W_SLEEP] = {PERF__STATE_SLEEP, PERF__FD_NONE, SYS_clock_nanosleep},
    [W_POLL] = {PERF__STATE_POLL, PERF__FD_NONE, SYS_poll},
    [W_SPIN] = {PERF__STATE_RUNNING, PERF__FD_NONE, -1},
};

static void expect_state(perf__sample_state_t got, int k) {
  perf__sample_state_t want = EXPECTED[k];
  CHECKF(got.state == want.state && got.fd_kind == want.fd_kind && got.syscall == want.syscall,
         "worker %d: state %d fd %d syscall %d, want %d %d %d", k, got.state, got.fd_kind,
         got.syscall, want.state, want.fd_kind, want.syscall);
}

/* One capture of each worker, alone and as one snapshot: every state
   exact, three rounds each. */
static void case_shot_states(void) {
  rig_t r;
  rig_start(&r);
  perf__modules_t *mods = perf__modules_acquire();
  CHECK(mods != NULL);
  static uintptr_t pcs[W_COUNT][256];
  for (int round = 0; round < 3; round++) {
    for (int k = 0; k < W_COUNT; k++) {
      perf__sampler_shot_t shot = {.tid = atomic_load(&r.w[k].tid), .pcs = pcs[k], .max = 256};
      int err = perf__sampler_capture_shot(mods, &shot);
      CHECKF(err == PERF_OK || err == PERF_E_TRUNCATED, "worker %d: %s", k, perf_strerror(err));
      expect_state(shot.state, k);
    }
    perf__sampler_shot_t shots[W_COUNT];
    for (int k = 0; k < W_COUNT; k++)
      shots[k] = (perf__sampler_shot_t){.tid = atomic_load(&r.w[k].tid), .pcs = pcs[k], .max = 256};
    CHECK_EQ_INT(perf__sampler_capture_threads(mods, shots, W_COUNT, W_COUNT), PERF_OK);
    for (int k = 0; k < W_COUNT; k++) {
      CHECKF(shots[k].err == PERF_OK || shots[k].err == PERF_E_TRUNCATED, "worker %d: %s", k,
             perf_strerror(shots[k].err));
      expect_state(shots[k].state, k);
    }
  }
  /* The caller itself runs. */
  perf__sampler_shot_t self = {.tid = 0, .pcs = pcs[0], .max = 256};
  CHECK_EQ_INT(perf__sampler_capture_shot(mods, &self), PERF_OK);
  CHECK_EQ_INT(self.state.state, PERF__STATE_RUNNING);
  perf__modules_release(mods);
  rig_stop(&r);
}

/* Two samples of each worker in an event: the wire carries every state,
   call name and descriptor kind; the report says them per thread and
   per stack. */
static void case_event_states(void) {
  rig_t r;
  rig_start(&r);
  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *ev = perf__event_new(PERF__EVENT_MANUAL, mods);
  CHECK(ev != NULL);
  ev->start_mono_ns = now_ns();
  ev->start_wall_ns = 1795000000000000000LL;
  pid_t tids[W_COUNT];
  for (int k = 0; k < W_COUNT; k++)
    tids[k] = atomic_load(&r.w[k].tid);
  ev->tid = tids[W_PIPE];
  perf__stats_t stats;
  memset(&stats, 0, sizeof stats);
  for (int round = 0; round < 2; round++)
    CHECK_EQ_INT(perf__capture_samples(ev, tids, W_COUNT, &stats), PERF_OK);
  perf__event_finish(ev);
  CHECK_EQ_INT(ev->sample_count, 2 * W_COUNT);
  for (size_t i = 0; i < ev->sample_count; i++) {
    CHECKF(ev->samples[i].stack >= 0, "sample %zu failed: %s", i,
           perf_strerror(ev->samples[i].error));
    expect_state(ev->samples[i].state, (int)(i % W_COUNT));
  }

  /* The report. */
  perf__strbuf_t sb;
  perf__strbuf_init(&sb, 1u << 22);
  CHECK_EQ_INT(perf__format_event_stacks(&sb, ev), PERF_OK);
  const char *stack_words[W_COUNT] = {
      "waiting in read() (pipe) 100%", "waiting in read() (socket) 100%",
      "waiting in futex() 100%",       "waiting in clock_nanosleep() 100%",
      "waiting in poll() 100%",        "running 100%"};
  for (int k = 0; k < W_COUNT; k++) {
    char line[128];
    snprintf(line, sizeof line, " thread=%d state=\"%s\"\n", (int)tids[k], stack_words[k]);
    CHECKF(strstr(sb.data, line), "no \"%s\" in:\n%s", line, sb.data);
  }
  perf__strbuf_free(&sb);

  /* The wire. */
  perf__batch_resource_t res = {0};
  res.app_name = "test_states";
  perf__batch_builder_t *b = NULL;
  CHECK_EQ_INT(perf__batch_builder_new(&res, NULL, &b), PERF_OK);
  perf__event_encoder_t *enc = perf__event_encoder_new();
  CHECK_EQ_INT(perf__event_encode(enc, b, ev), PERF_OK);
  uint8_t *out = NULL;
  size_t len = 0;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, NULL), PERF_OK);
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(out, len, 64u << 20, &bt), PERF_OK);
  const Perf__V1__Event *e = bt->events[0];
  CHECK_EQ_INT(e->n_sample_states, 2 * W_COUNT);
  CHECK_EQ_INT(e->n_sample_syscalls, 2 * W_COUNT);
  CHECK_EQ_INT(e->n_sample_fds, 2 * W_COUNT);
  const char *names[W_COUNT] = {"read", "read", "futex", "clock_nanosleep", "poll", ""};
  for (size_t i = 0; i < e->n_sample_states; i++) {
    int k = (int)(i % W_COUNT);
    CHECK_EQ_INT(e->sample_states[i], EXPECTED[k].state);
    CHECK_EQ_INT(e->sample_fds[i], EXPECTED[k].fd_kind);
    CHECK_EQ_STR(bt->strings[e->sample_syscalls[i]], names[k]);
  }
  perf__v1__batch__free_unpacked(bt, NULL);
  free(out);
  perf__event_encoder_free(enc);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
  rig_stop(&r);
}

/* Shares in words: rounded, most samples first, ties in the order seen;
   more distinct states than a tally keeps end as "waiting elsewhere". */
static void case_tally_text(void) {
  perf__state_tally_t t = {0};
  for (int i = 0; i < 5; i++)
    perf__state_tally_add(&t, PERF__STATE_IO, PERF__FD_PIPE, "read");
  for (int i = 0; i < 2; i++)
    perf__state_tally_add(&t, PERF__STATE_LOCK, PERF__FD_NONE, "futex");
  for (int i = 0; i < 2; i++)
    perf__state_tally_add(&t, PERF__STATE_RUNNING, PERF__FD_NONE, NULL);
  perf__state_tally_add(&t, PERF__STATE_OTHER, PERF__FD_NONE, "syscall 100000");
  perf__state_tally_add(&t, PERF__STATE_OTHER, PERF__FD_NONE, "");
  perf__state_tally_add(&t, PERF__STATE_UNKNOWN, PERF__FD_NONE, NULL);
  perf__strbuf_t sb;
  perf__strbuf_init(&sb, 4096);
  CHECK_EQ_INT(perf__format_state_tally(&sb, &t), PERF_OK);
  CHECK_EQ_STR(sb.data, "waiting in read() (pipe) 42%, waiting in futex() 17%, running 17%, "
                        "waiting in syscall 100000 8%, waiting outside a system call 8%, "
                        "unknown 8%");
  perf__strbuf_free(&sb);
  /* The sampler's names for the wire: a name, a number, none. */
  char call[PERF__STATE_CALL_MAX];
  perf__syscall_label(SYS_clock_nanosleep, call, sizeof call);
  CHECK_EQ_STR(call, "clock_nanosleep");
  perf__syscall_label(100000, call, sizeof call);
  CHECK_EQ_STR(call, "syscall 100000");
  perf__syscall_label(-1, call, sizeof call);
  CHECK_EQ_STR(call, "");
  /* Nothing known: nothing said. */
  perf__state_tally_t none = {0};
  perf__state_tally_add(&none, PERF__STATE_UNKNOWN, PERF__FD_NONE, NULL);
  perf__strbuf_init(&sb, 4096);
  CHECK_EQ_INT(perf__format_state_tally(&sb, &none), PERF_OK);
  CHECK(sb.data == NULL || sb.data[0] == '\0');
  perf__strbuf_free(&sb);
  /* 30 distinct calls, one sample each: 23 shown, the rest as one. */
  perf__state_tally_t many = {0};
  for (int i = 0; i < 30; i++) {
    snprintf(call, sizeof call, "syscall %d", 1000 + i);
    perf__state_tally_add(&many, PERF__STATE_OTHER, PERF__FD_NONE, call);
  }
  perf__strbuf_init(&sb, 4096);
  CHECK_EQ_INT(perf__format_state_tally(&sb, &many), PERF_OK);
  CHECKF(strncmp(sb.data, "waiting elsewhere 23%, waiting in syscall 1000 3%", 49) == 0 &&
             strstr(sb.data, "syscall 1022 3%") && !strstr(sb.data, "syscall 1023"),
         "%s", sb.data);
  perf__strbuf_free(&sb);
}

/* ---- one blocked thread: its state through the event, wire and report --- */

/* Thread tid, blocked as want says, captured twice into an event: each
   sample's state is want; the report's line for its stack says
   `words 100%`; the wire carries the state, `name` and the kind. */
static void expect_thread_state(pid_t tid, perf__sample_state_t want, const char *words,
                                const char *name) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *ev = perf__event_new(PERF__EVENT_MANUAL, mods);
  CHECK(ev != NULL);
  ev->start_mono_ns = now_ns();
  ev->start_wall_ns = 1795000000000000000LL;
  ev->tid = tid;
  perf__stats_t stats;
  memset(&stats, 0, sizeof stats);
  for (int round = 0; round < 2; round++)
    CHECK_EQ_INT(perf__capture_samples(ev, &tid, 1, &stats), PERF_OK);
  perf__event_finish(ev);
  CHECK_EQ_INT(ev->sample_count, 2);
  for (size_t i = 0; i < ev->sample_count; i++) {
    perf__sample_state_t got = ev->samples[i].state;
    CHECKF(got.state == want.state && got.fd_kind == want.fd_kind && got.syscall == want.syscall,
           "sample %zu: state %d fd %d syscall %d, want %d %d %d", i, got.state, got.fd_kind,
           got.syscall, want.state, want.fd_kind, want.syscall);
  }
  perf__strbuf_t sb;
  perf__strbuf_init(&sb, 1u << 22);
  CHECK_EQ_INT(perf__format_event_stacks(&sb, ev), PERF_OK);
  char line[160];
  snprintf(line, sizeof line, " thread=%d state=\"%s 100%%\"\n", (int)tid, words);
  CHECKF(strstr(sb.data, line), "no \"%s\" in:\n%s", line, sb.data);
  perf__strbuf_free(&sb);

  perf__batch_resource_t res = {0};
  res.app_name = "test_states";
  perf__batch_builder_t *b = NULL;
  CHECK_EQ_INT(perf__batch_builder_new(&res, NULL, &b), PERF_OK);
  perf__event_encoder_t *enc = perf__event_encoder_new();
  CHECK_EQ_INT(perf__event_encode(enc, b, ev), PERF_OK);
  uint8_t *out = NULL;
  size_t len = 0;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, NULL), PERF_OK);
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(out, len, 64u << 20, &bt), PERF_OK);
  const Perf__V1__Event *e = bt->events[0];
  CHECK_EQ_INT(e->n_sample_states, 2);
  for (size_t i = 0; i < 2; i++) {
    CHECK_EQ_INT(e->sample_states[i], want.state);
    CHECK_EQ_INT(e->sample_fds[i], want.fd_kind);
    CHECK_EQ_STR(bt->strings[e->sample_syscalls[i]], name);
  }
  perf__v1__batch__free_unpacked(bt, NULL);
  free(out);
  perf__event_encoder_free(enc);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

typedef struct blocked_s {
  int fd; /* read: the descriptor */
  atomic_int stop;
  _Atomic pid_t tid;
} blocked_t;

static void *read_one(void *arg) {
  blocked_t *w = arg;
  atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
  char c;
  if (read(w->fd, &c, 1) != 1) abort();
  return NULL;
}

/* A named FIFO (mkfifo) is a pipe: a thread blocked in read() on one is
   waiting in read() (pipe). */
static void case_fifo_read(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/fifo", tempdir_make("perf-states"));
  CHECK(mkfifo(path, 0600) == 0);
  int rd = open(path, O_RDONLY | O_NONBLOCK);
  CHECK(rd >= 0);
  int wr = open(path, O_WRONLY);
  CHECK(wr >= 0);
  CHECK(fcntl(rd, F_SETFL, 0) == 0); /* blocking reads from here on */
  blocked_t w = {.fd = rd};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, read_one, &w) == 0);
  while (!atomic_load(&w.tid))
    sleep_ms(1);
  wait_in_syscall(atomic_load(&w.tid), SYS_read, WAIT_MS);
  expect_thread_state(atomic_load(&w.tid),
                      (perf__sample_state_t){PERF__STATE_IO, PERF__FD_PIPE, SYS_read},
                      "waiting in read() (pipe)", "read");
  CHECK(write(wr, "x", 1) == 1);
  pthread_join(t, NULL);
  close(rd);
  close(wr);
}

/* Each kind of descriptor as its file's type says it. */
static void case_fd_kinds(void) {
  int p[2], sv[2];
  CHECK(pipe(p) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  const char *dir = tempdir_make("perf-states");
  char path[256];
  snprintf(path, sizeof path, "%s/fifo", dir);
  CHECK(mkfifo(path, 0600) == 0);
  int fifo = open(path, O_RDWR); /* Linux: a FIFO opened for both ends does not block */
  snprintf(path, sizeof path, "%s/file", dir);
  int file = open(path, O_CREAT | O_RDWR, 0600);
  int d = open(dir, O_RDONLY | O_DIRECTORY);
  int null = open("/dev/null", O_RDONLY);
  int ev = eventfd(0, 0), ep = epoll_create1(0);
  CHECK(fifo >= 0 && file >= 0 && d >= 0 && null >= 0 && ev >= 0 && ep >= 0);
  struct {
    int fd;
    perf__fd_kind_t kind;
    const char *what;
  } want[] = {
      {p[0], PERF__FD_PIPE, "a pipe"},          {fifo, PERF__FD_PIPE, "a named FIFO"},
      {sv[0], PERF__FD_SOCKET, "a socket"},     {file, PERF__FD_FILE, "a regular file"},
      {d, PERF__FD_FILE, "a directory"},        {null, PERF__FD_OTHER, "/dev/null"},
      {ev, PERF__FD_OTHER, "an eventfd"},       {ep, PERF__FD_OTHER, "an epoll"},
      {100000, PERF__FD_NONE, "no descriptor"}, {-1, PERF__FD_NONE, "-1"},
  };
  for (size_t i = 0; i < ARRAY_LEN(want); i++)
    CHECKF(perf__fd_kind(want[i].fd) == want[i].kind, "%s: kind %d, want %d", want[i].what,
           (int)perf__fd_kind(want[i].fd), (int)want[i].kind);
  int fds[] = {p[0], p[1], sv[0], sv[1], fifo, file, d, null, ev, ep};
  for (size_t i = 0; i < ARRAY_LEN(fds); i++)
    close(fds[i]);
}

static void *sleep_until_stopped(void *arg) {
  blocked_t *w = arg;
  atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
  struct timespec hour = {3600, 0};
  while (!atomic_load(&w->stop))
    nanosleep(&hour, NULL); /* ended by SIGUSR2 (EINTR) once stop is set */
  return NULL;
}

/* This process stopped (SIGSTOP) and continued (SIGCONT, from a child that
   waits to see it stopped): its thread that slept in clock_nanosleep
   sleeps on in restart_syscall, which is named. */
static void case_restart_syscall(void) {
  struct sigaction sa = {.sa_handler = wake};
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);
  blocked_t w = {.fd = -1};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, sleep_until_stopped, &w) == 0);
  while (!atomic_load(&w.tid))
    sleep_ms(1);
  pid_t tid = atomic_load(&w.tid);
  wait_in_syscall(tid, SYS_clock_nanosleep, WAIT_MS);
  pid_t self = getpid(), child = fork();
  CHECK(child >= 0);
  if (child == 0) { /* async-signal-safe calls only */
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)self);
    for (int i = 0; i < WAIT_MS; i++) {
      int fd = open(path, O_RDONLY);
      ssize_t n = fd >= 0 ? read(fd, stat, sizeof stat - 1) : -1;
      if (fd >= 0) close(fd);
      stat[n > 0 ? n : 0] = '\0';
      const char *end = strrchr(stat, ')');
      if (end && end[1] == ' ' && end[2] == 'T') break;
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    kill(self, SIGCONT);
    _exit(0);
  }
  CHECK(kill(self, SIGSTOP) == 0); /* returns once the child continued us */
  int status;
  CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status));
  wait_in_syscall(tid, SYS_restart_syscall, WAIT_MS);
  expect_thread_state(tid,
                      (perf__sample_state_t){PERF__STATE_OTHER, PERF__FD_NONE, SYS_restart_syscall},
                      "waiting in restart_syscall()", "restart_syscall");
  atomic_store(&w.stop, 1);
  for (;;) {
    pthread_kill(t, SIGUSR2);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 10000000;
    if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
    if (pthread_timedjoin_np(t, NULL, &until) == 0) break;
  }
}

/* ---- a hang under the SDK: every sample's state --------------------------- */

/* What a sample taken at `t` (monotonic ns, within `margin`) may be: the
   phase's state only, or at a transition either neighbour or running. */
static void expect_sample(const hang_phases_t *p, int64_t t, int64_t margin, int state,
                          const char *call, int fd, size_t i) {
  bool io = state == PERF__STATE_IO && strcmp(call, "read") == 0 && fd == PERF__FD_PIPE;
  bool lock = state == PERF__STATE_LOCK && strcmp(call, "futex") == 0 && fd == PERF__FD_NONE;
  bool running = state == PERF__STATE_RUNNING && !call[0] && fd == PERF__FD_NONE;
  bool ok;
  const char *phase;
  if (t > p->read_at + margin && t < p->write_lo - margin) {
    ok = io, phase = "read";
  } else if (t > p->futex_seen + margin && t < p->unlock_at - margin) {
    ok = lock, phase = "futex";
  } else if (t > p->spin_at + margin && t < p->idle_at - margin) {
    ok = running, phase = "spin";
  } else if (t <= p->read_at + margin) {
    ok = running || io, phase = "busy -> read";
  } else if (t <= p->futex_seen + margin) {
    ok = io || running || lock, phase = "read -> futex";
  } else {
    ok = lock || running, phase = "futex -> spin";
  }
  CHECKF(ok, "sample %zu at +%.3f ms (%s phase): state %d \"%s\" fd %d", i,
         (double)(t - p->busy_lo) / 1e6, phase, state, call, fd);
}

static void case_hang_samples(void) {
  char sink[256];
  hang_phases_t p;
  hang_phases_run_to_file(&p, 8, "test_states", tempdir_make("perf-states"), sink, sizeof sink);

  Perf__V1__Batch *bt = NULL;
  const Perf__V1__Event *e = hang_phases_read_event(sink, &bt);
  size_t count = e->n_sample_stacks;
  CHECK_EQ_INT(e->n_sample_states, count);
  /* The event starts at perf_sdk_loop_busy: between busy_lo and busy_hi;
     sample times are whole microseconds after it. */
  int64_t margin = (p.busy_hi - p.busy_lo) + 2000, t_us = 0;
  size_t seen[3] = {0}, failed = 0; /* io, lock, running */
  perf__state_tally_t tally = {0};
  for (size_t i = 0; i < count; i++) {
    t_us += e->sample_offsets_micros[i];
    int state = e->sample_states[i], fd = e->sample_fds[i];
    const char *call = bt->strings[e->sample_syscalls[i]];
    perf__state_tally_add(&tally, state, fd, call);
    if (e->sample_stacks[i] == 0) {
      CHECK_EQ_INT(state, PERF__STATE_UNKNOWN); /* a failed capture */
      if (getenv("STATES_DEBUG"))
        fprintf(stderr, "failed sample %zu at +%.3f ms: %s\n", i, (double)t_us / 1e3,
                perf_strerror(e->sample_errors[failed]));
      failed++;
      continue;
    }
    expect_sample(&p, p.busy_lo + t_us * 1000, margin, state, call, fd, i);
    seen[0] += state == PERF__STATE_IO;
    seen[1] += state == PERF__STATE_LOCK;
    seen[2] += state == PERF__STATE_RUNNING;
  }
  CHECKF(seen[0] >= 8 && seen[1] >= 8 && seen[2] >= 8, "read %zu, futex %zu, running %zu of %zu",
         seen[0], seen[1], seen[2], count);
  /* The report's line for the thread: exactly these samples' shares. */
  perf__strbuf_t want;
  perf__strbuf_init(&want, 4096);
  CHECK_EQ_INT(perf__strbuf_appendf(&want, "\nstates thread=%d ", (int)p.tid), PERF_OK);
  CHECK_EQ_INT(perf__format_state_tally(&want, &tally), PERF_OK);
  CHECK_EQ_INT(perf__strbuf_appendf(&want, "\n"), PERF_OK);
  char *report = read_text(sink);
  CHECKF(strstr(report, want.data), "no \"%s\" in:\n%s", want.data, report);
  fprintf(stderr, "read %zu, futex %zu, running %zu of %zu samples:%s", seen[0], seen[1], seen[2],
          count, want.data);
  free(report);
  perf__strbuf_free(&want);
  perf__v1__batch__free_unpacked(bt, NULL);
}

static const test_case_t g_cases[] = {
    TEST_CASE(shot_states),     TEST_CASE(event_states), TEST_CASE(tally_text),
    TEST_CASE(hang_samples),    TEST_CASE(fifo_read),    TEST_CASE(fd_kinds),
    TEST_CASE(restart_syscall),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
