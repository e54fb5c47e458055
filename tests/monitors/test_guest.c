/*
 * test_guest.c - the SDK as a good guest of the app, through the shared
 * library as an app links it: fork (the daemonize pattern, forks while the
 * monitors sample, fork + exec, fork right after init, init and shutdown in
 * a child), exit (what was recorded arrives; exit stays bounded with a dead
 * collector or a writer stuck in I/O), calls from signal handlers that
 * interrupted the SDK, nested loops, the state directory made only when
 * needed, and which libraries are mapped per sink.
 *
 * Each case runs in its own process (`test_guest <case>`) and forks the
 * apps it needs: real processes, real signals, real threads, files in a
 * temporary directory and the scriptable HTTP server on 127.0.0.1. Every
 * wait has a deadline; durations are measured on CLOCK_MONOTONIC.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "error_texts.h"
#include "http_server.h"
#include "perf_sdk.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/spool.h"
#include "sdk_util.h"
#include "tempdir.h"
#include "test_util.h"

#define WAIT_MS 45000 /* every wait for a process or a file gives up after this */
#define THRESHOLD_MS 200

static pid_t g_case_pid; /* the case's own process */

/* LeakSanitizer (the ASan build) checks the case's own process only. In a
   child forked from a multithreaded app, whatever the parent's other
   threads held only on their stacks or in their thread-local storage (an
   event being captured by a monitor, OpenSSL's per-thread state of the
   uploader) is unreachable: those threads do not exist in the child, which
   must not free what they were using. That memory is the parent's pages,
   copied on write; reporting it would fail every fork of a running app. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) {
  return getpid() != g_case_pid;
}

static volatile unsigned long g_sink;
static char **g_argv;
static char g_dir[PATH_MAX];

/* ---- clocks, chains, files ----------------------------------------------- */

static unsigned long burn_until(int64_t deadline) {
  unsigned long x = 7;
  do {
    for (int i = 0; i < 4096; i++)
      x = x * 2862933555777941757UL + 3;
  } while (now_ns() < deadline);
  return x;
}

static CHAIN unsigned long daemon_hang_leaf(int ms) {
  return burn_until(now_ns() + (int64_t)ms * 1000000) + 1;
}
static CHAIN unsigned long daemon_hang(int ms) {
  return daemon_hang_leaf(ms) + 1;
}
static CHAIN unsigned long exit_hang(int ms) {
  return daemon_hang_leaf(ms) + 1;
}

static void path_in_dir(char *out, const char *name) {
  int n = snprintf(out, PATH_MAX, "%s/%s", g_dir, name);
  CHECK(n > 0 && n < PATH_MAX);
}

static void make_dir(void) {
  snprintf(g_dir, sizeof g_dir, "%s", tempdir_make("test_guest"));
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* ---- processes ----------------------------------------------------------- */

/* Fork a process that runs fn() and then exits with exit(0) (so that the
   SDK's exit handler runs, as after a return from main). */
static pid_t run_app(void (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    fn();
    exit(0);
  }
  return pid;
}

/* Wait for pid (a child, or an orphan we reap as subreaper) to exit 0 by
   the deadline; kill it and fail otherwise. Returns when it ended. */
static int64_t expect_exit_ok(pid_t pid, const char *what) {
  long long deadline = now_ms() + WAIT_MS;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    CHECKF(r >= 0, "waitpid(%d): %s", (int)pid, strerror(errno));
    if (r == pid) break;
    if (now_ms() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      CHECKF(false, "%s (pid %d) still running after %d ms: deadlocked?", what, (int)pid, WAIT_MS);
    }
    sleep_ms(2);
  }
  int64_t ended = now_ns();
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (pid %d) ended with status 0x%x", what,
         (int)pid, status);
  return ended;
}

/* ---- SDK helpers --------------------------------------------------------- */

static void base_config(perf_sdk_config_t *cfg) {
  perf_sdk_config_init(cfg);
  cfg->app_name = "test_guest";
  cfg->hang_threshold_ms = THRESHOLD_MS;
  cfg->hang_sample_interval_ms = 50;
  cfg->cpu_threshold_percent = 25600;
  static char data[PATH_MAX];
  path_in_dir(data, "data");
  cfg->data_dir = data;
}

static void file_config(perf_sdk_config_t *cfg, const char *report) {
  base_config(cfg);
  cfg->sink = PERF_SINK_FILE;
  cfg->sink_path = report;
}

static void http_config(perf_sdk_config_t *cfg, const char *endpoint) {
  base_config(cfg);
  cfg->sink = PERF_SINK_HTTP;
  cfg->endpoint = endpoint;
  cfg->api_key = "test-key";
  cfg->backoff_base_ms = 10;
  cfg->backoff_cap_ms = 100;
  cfg->batch_max_delay_ms = 100;
}

/* "event hang ..." headers of the report with their thread and duration. */
static size_t report_hangs(const char *text, int *threads, long *durations, size_t max) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, "event hang ")) != NULL; p++) {
    long ms = -1;
    int tid = -1;
    const char *d = strstr(p, "duration_ms="), *t = strstr(p, "thread=");
    if (d) ms = strtol(d + 12, NULL, 10);
    if (t) tid = (int)strtol(t + 7, NULL, 10);
    if (n < max) {
      threads[n] = tid;
      durations[n] = ms;
    }
    n++;
  }
  return n;
}

/* A hang event found in a batch: who sent it and how long it lasted. */
typedef struct {
  uint32_t pid, tid;
  long duration_ms;
} batch_hang_t;

/* The hang events of one batch payload (zstd protobuf). */
static size_t batch_hangs(const uint8_t *payload, size_t len, batch_hang_t *out, size_t max) {
  Perf__V1__Batch *b = NULL;
  CHECK_EQ_INT(perf__batch_decode_stored(payload, len, 64u << 20, &b), PERF_OK);
  size_t n = 0;
  for (size_t i = 0; i < b->n_events; i++) {
    if (b->events[i]->kind != PERF__V1__EVENT_KIND__EVENT_KIND_HANG || n >= max) continue;
    out[n].pid = b->resource ? b->resource->pid : 0;
    out[n].tid = b->events[i]->tid;
    out[n].duration_ms = (long)(b->events[i]->duration_nanos / 1000000);
    n++;
  }
  perf__v1__batch__free_unpacked(b, NULL);
  return n;
}

/* The hang events of every batch file under `dir` (recursively). */
static size_t spool_hangs(const char *dir, batch_hang_t *out, size_t max) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  size_t n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    size_t len = strlen(de->d_name);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      n += spool_hangs(path, out + n, max - n);
    } else if (len > 6 && strcmp(de->d_name + len - 6, ".batch") == 0) {
      uint8_t *payload = NULL;
      size_t plen = 0;
      const char *reason = NULL;
      if (perf__spool_read_file(path, NULL, NULL, &payload, &plen, &reason) == PERF_OK)
        n += batch_hangs(payload, plen, out + n, max - n);
      free(payload);
    }
  }
  closedir(d);
  return n;
}

/* The hang events of every POST the server has received. */
static size_t server_hangs(http_server_t *srv, batch_hang_t *out, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < http_server_request_count(srv) && n < max; i++) {
    http_request_t r;
    if (!http_server_request(srv, i, &r)) continue;
    if (r.body_len) n += batch_hangs(r.body, r.body_len, out + n, max - n);
    http_request_free(&r);
  }
  return n;
}

/* Does /proc/self/maps map a file whose path contains `name`? */
static bool maps_contain(const char *name) {
  char *maps = read_text("/proc/self/maps");
  bool found = strstr(maps, name) != NULL;
  free(maps);
  return found;
}

/* Names of this process's threads, joined by spaces. */
static void thread_names(char *out, size_t len) {
  out[0] = '\0';
  DIR *d = opendir("/proc/self/task");
  CHECK(d != NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    char path[300], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, name, sizeof name - 1) : -1;
    if (fd >= 0) close(fd);
    if (n > 0) name[strcspn(name, "\n")] = '\0';
    size_t used = strlen(out);
    snprintf(out + used, len - used, "%s ", name);
  }
  closedir(d);
}

/* ---- fork: the daemonize pattern ----------------------------------------- */

/* The daemon's pid reaches the test through this pipe. */
static int g_pid_pipe[2];
static perf_sdk_config_t g_cfg;

/* The daemon: keeps running after its parent exits, hangs 600 ms inside a
   unit of work, then returns from "main". */
static void daemon_main(void) {
  close(g_pid_pipe[0]);
  pid_t me = getpid();
  CHECK(write(g_pid_pipe[1], &me, sizeof me) == (ssize_t)sizeof me);
  close(g_pid_pipe[1]);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK); /* the SDK restarts here */
  g_sink = daemon_hang(600);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
}

/* The app: init, 300 ms later fork the daemon, and exit. */
static void daemonizing_app(void) {
  CHECK_EQ_INT(perf_sdk_init(&g_cfg), PERF_OK);
  sleep_ms(300);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    daemon_main();
    exit(0); /* its return from main */
  }
}

/* Run the daemonize pattern; returns the daemon's pid once it has exited. */
static pid_t run_daemonize(void) {
  CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0); /* the daemon is ours to reap */
  CHECK(pipe(g_pid_pipe) == 0);
  pid_t app = run_app(daemonizing_app);
  close(g_pid_pipe[1]);
  pid_t daemon = 0;
  CHECK(read(g_pid_pipe[0], &daemon, sizeof daemon) == (ssize_t)sizeof daemon);
  close(g_pid_pipe[0]);
  expect_exit_ok(app, "the daemonizing app");
  expect_exit_ok(daemon, "the daemon");
  return daemon;
}

static void check_daemon_hang(const batch_hang_t *h, size_t n, pid_t daemon) {
  size_t found = 0;
  for (size_t i = 0; i < n; i++)
    if (h[i].pid == (uint32_t)daemon && h[i].tid == (uint32_t)daemon) {
      found++;
      CHECKF(h[i].duration_ms >= 500 && h[i].duration_ms <= 2000,
             "the daemon's hang lasted %ld ms, not ~600", h[i].duration_ms);
    }
  CHECKF(found == 1, "%zu hang events from the daemon (pid %d) among %zu", found, (int)daemon, n);
}

static void case_daemonize_file_sink(void) {
  make_dir();
  static char report[PATH_MAX], batches[PATH_MAX + 16];
  path_in_dir(report, "report.txt");
  snprintf(batches, sizeof batches, "%s.batches", report);
  file_config(&g_cfg, report);
  /* The daemon's hang reaches the report while its exit waits for the
     writer: naming the hang's frames (DWARF read cold in a freshly
     restarted SDK) and writing take longer than the 300 ms default on 2
     loaded cores, and an exit past its bound leaves the hang unwritten. The
     bound is raised so that the exit waits for the writing itself (as
     exit_writes_file_sink): once the daemon has exited, the report is
     whole. */
  g_cfg.exit_timeout_ms = 30000;
  pid_t daemon = run_daemonize();
  char *text = read_text(report);
  int threads[8];
  long durations[8];
  size_t n = report_hangs(text, threads, durations, ARRAY_LEN(threads));
  CHECKF(n == 1, "%zu hangs in the report:\n%s", n, text);
  CHECK_EQ_INT(threads[0], daemon);
  CHECKF(durations[0] >= 500 && durations[0] <= 2000, "duration_ms=%ld", durations[0]);
  CHECKF(strstr(text, "daemon_hang") != NULL, "the daemon's stack is not in:\n%s", text);
  free(text);
  batch_hang_t h[8];
  check_daemon_hang(h, spool_hangs(batches, h, ARRAY_LEN(h)), daemon);
}

static void case_daemonize_http_sink(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  http_config(&g_cfg, http_server_url(srv));
  g_cfg.exit_timeout_ms = 30000; /* as exit_sends_http_sink */
  pid_t daemon = run_daemonize();
  batch_hang_t h[8];
  check_daemon_hang(h, server_hangs(srv, h, ARRAY_LEN(h)), daemon);
  http_server_stop(srv);
}

/* ---- fork: while the monitors sample ------------------------------------- */

static atomic_int g_spin_stop;

static void *spin_main(void *arg) {
  (void)arg;
  while (!atomic_load_explicit(&g_spin_stop, memory_order_relaxed))
    g_sink += burn_until(now_ns() + 1000000);
  return NULL;
}

/* What a forked child does; every kind ends with a clean exit. */
static void forked_child(int kind) {
  uintptr_t pcs[16];
  size_t n;
  switch (kind % 4) {
  case 0: /* exec-less child that never calls the SDK */ _exit(0);
  case 1: /* a loop mark restarts the SDK; exit shuts it down */
    if (perf_sdk_loop_busy() != PERF_OK || perf_sdk_loop_idle() != PERF_OK) _exit(3);
    exit(0);
  case 2: /* the sampler and the module cache, then an explicit shutdown */
    if (perf_backtrace_thread(0, pcs, ARRAY_LEN(pcs), &n) != PERF_OK) _exit(4);
    if (perf_sdk_capture_now("child") != PERF_OK) _exit(5);
    if (perf_sdk_shutdown(5000) != PERF_OK) _exit(6);
    _exit(0);
  default: /* shutdown before the restart cancels it */
    if (perf_sdk_shutdown(5000) != PERF_OK) _exit(7);
    exit(perf_sdk_loop_busy() == PERF_E_NOT_INITIALIZED ? 0 : 8);
  }
}

static void case_fork_while_sampling(void) {
#if defined(__SANITIZE_ADDRESS__)
  /* GCC 12's AddressSanitizer runtime takes no lock of its allocator
     around fork: a child forked while a monitor thread is inside malloc
     inherits that lock held, and its first malloc waits forever (seen: the
     restarted writer in SizeClassAllocator64::GetFromAllocator). glibc's
     malloc is fork-safe; the release build runs this case. */
  fprintf(stderr, "fork_while_sampling: not run under AddressSanitizer (its allocator is not "
                  "fork-safe while other threads allocate)\n");
  return;
#endif
  make_dir();
  perf_sdk_config_t cfg;
  base_config(&cfg);
  cfg.hang_threshold_ms = 20; /* the forking thread hangs: sampled every 5 ms */
  cfg.hang_sample_interval_ms = 5;
  cfg.hang_max_samples = 200;
  cfg.cpu_threshold_percent = 1; /* the spinning thread: bursts at 1000 Hz */
  cfg.cpu_window_ms = 100;
  cfg.cpu_sample_hz = 1000;
  cfg.cpu_burst_ms = 60000;
  cfg.cpu_cooldown_ms = 0;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  pthread_t spinner;
  CHECK(pthread_create(&spinner, NULL, spin_main, NULL) == 0);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  for (int i = 0; i < 60; i++) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) forked_child(i);
    char what[32];
    snprintf(what, sizeof what, "forked child #%d", i);
    expect_exit_ok(pid, what);
  }
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  atomic_store(&g_spin_stop, 1);
  pthread_join(spinner, NULL);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECKF(st.samples_taken > 0, "the monitors took no sample while the test forked");
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

/* ---- fork right after init (the old deadlock) ---------------------------- */

static void case_fork_right_after_init(void) {
  make_dir();
  perf_sdk_config_t cfg;
  base_config(&cfg);
  for (int round = 0; round < 50; round++) {
    CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
    fflush(NULL);
    pid_t pid = fork(); /* while the writer compiles the unwind rules */
    CHECK(pid >= 0);
    if (pid == 0) forked_child(2);
    char what[32];
    snprintf(what, sizeof what, "child of round %d", round);
    expect_exit_ok(pid, what);
    CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  }
}

/* ---- fork: init and shutdown in the child -------------------------------- */

static void child_init_again(void) {
  perf_sdk_config_t cfg;
  base_config(&cfg);
  cfg.app_name = "test_guest_child";
  /* Before the restart: init starts with the new configuration. */
  if (perf_sdk_init(&cfg) != PERF_OK) _exit(10);
  if (perf_sdk_init(&cfg) != PERF_E_ALREADY_INITIALIZED) _exit(11);
  char names[1024];
  thread_names(names, sizeof names);
  if (!strstr(names, "perf-writer") || !strstr(names, "perf-hang-mon")) _exit(12);
  if (perf_sdk_shutdown(5000) != PERF_OK) _exit(13);
  if (perf_sdk_shutdown(5000) != PERF_E_NOT_INITIALIZED) _exit(14);
}

static void child_restart_then_shutdown(void) {
  if (perf_sdk_loop_busy() != PERF_OK) _exit(20);
  char names[1024];
  thread_names(names, sizeof names);
  if (!strstr(names, "perf-writer") || !strstr(names, "perf-cpu-mon")) _exit(21);
  perf_sdk_stats_t st;
  if (perf_sdk_get_stats(&st) != PERF_OK || st.events_recorded != 0) _exit(22);
  if (perf_sdk_init(&g_cfg) != PERF_E_ALREADY_INITIALIZED) _exit(23);
  if (perf_sdk_shutdown(5000) != PERF_OK) _exit(24);
  if (perf_sdk_loop_busy() != PERF_E_NOT_INITIALIZED) _exit(25);
}

/* Before any SDK call: the parent's descriptors are closed, its spool lock
   is still held (by the parent), no SDK thread runs here. */
static void child_descriptors(void) {
  char lock[PATH_MAX];
  snprintf(lock, sizeof lock, "%s/spool/LOCK", g_cfg.data_dir);
  DIR *d = opendir("/proc/self/fd");
  if (!d) _exit(30);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char link[PATH_MAX + 32], target[PATH_MAX] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) target[n] = '\0';
    if (strstr(target, "/spool") || strstr(target, ".marker")) _exit(31);
  }
  closedir(d);
  int fd = open(lock, O_RDWR | O_CLOEXEC);
  if (fd < 0) _exit(32);
  if (flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK) _exit(33);
  close(fd);
  char names[1024];
  thread_names(names, sizeof names);
  if (strstr(names, "perf-")) _exit(34);
}

static void case_fork_child_lifecycle(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  http_config(&g_cfg, http_server_url(srv));
  CHECK_EQ_INT(perf_sdk_init(&g_cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK); /* the spool is open */
  expect_exit_ok(run_app(child_descriptors), "child_descriptors");
  expect_exit_ok(run_app(child_init_again), "child_init_again");
  expect_exit_ok(run_app(child_restart_then_shutdown), "child_restart_then_shutdown");
  /* The parent's SDK never noticed. */
  CHECK_EQ_INT(perf_sdk_capture_now("parent"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.events_recorded, 1);
  CHECK(st.batches_sent >= 1);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  http_server_stop(srv);
}

/* ---- fork + exec ---------------------------------------------------------- */

/* `test_guest exec_probe <dir>`: what an exec'd program inherits from an
   app running the SDK: no pending or blocked signal, one thread, and no
   descriptor of the SDK's (nothing under the test's directory, no socket). */
static int exec_probe(const char *dir) {
  char *status = read_text("/proc/self/status");
  int bad = 0;
  const char *keys[] = {"SigPnd:\t0000000000000000", "ShdPnd:\t0000000000000000",
                        "SigBlk:\t0000000000000000", "Threads:\t1\n"};
  for (size_t i = 0; i < ARRAY_LEN(keys); i++)
    if (!strstr(status, keys[i])) {
      fprintf(stderr, "exec_probe: no \"%s\" in /proc/self/status:\n%s", keys[i], status);
      bad = 1;
    }
  free(status);
  DIR *d = opendir("/proc/self/fd");
  struct dirent *de;
  while (d && (de = readdir(d)) != NULL) {
    char link[PATH_MAX], target[PATH_MAX] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0) target[n] = '\0';
    if (strstr(target, dir) || strncmp(target, "socket:", 7) == 0) {
      fprintf(stderr, "exec_probe: inherited descriptor %s -> %s\n", de->d_name, target);
      bad = 1;
    }
  }
  if (d) closedir(d);
  return bad;
}

static void case_fork_exec(void) {
  make_dir();
  static char report[PATH_MAX];
  path_in_dir(report, "report.txt");
  perf_sdk_config_t cfg;
  file_config(&cfg, report);
  cfg.hang_threshold_ms = 20;
  cfg.hang_sample_interval_ms = 5;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("before exec"), PERF_OK); /* the sink file is open */
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK); /* and the monitor samples this thread */
  for (int i = 0; i < 10; i++) {
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      char *argv[] = {g_argv[0], "exec_probe", g_dir, NULL};
      char *envp[] = {NULL};
      execve("/proc/self/exe", argv, envp);
      _exit(127);
    }
    expect_exit_ok(pid, "the exec'd probe");
  }
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

/* ---- exit ----------------------------------------------------------------- */

static int g_time_pipe[2];

/* Tell the test when the app is about to leave main. */
static void note_exit_time(void) {
  int64_t t = now_ns();
  CHECK(write(g_time_pipe[1], &t, sizeof t) == (ssize_t)sizeof t);
}

/* Records a 1 s hang (samples from 200 ms on: room for a loaded machine
   to schedule the monitor), then returns from "main" without shutdown. */
static void hang_then_exit_app(void) {
  CHECK_EQ_INT(perf_sdk_init(&g_cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  g_sink = exit_hang(1000);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  note_exit_time();
}

/* Run `app` and return how long its exit took (from note_exit_time). */
static long exit_ms(void (*app)(void)) {
  CHECK(pipe(g_time_pipe) == 0);
  pid_t pid = run_app(app);
  close(g_time_pipe[1]);
  int64_t ended = expect_exit_ok(pid, "the app");
  int64_t leaving = 0;
  CHECK(read(g_time_pipe[0], &leaving, sizeof leaving) == (ssize_t)sizeof leaving);
  close(g_time_pipe[0]);
  return (long)((ended - leaving) / 1000000);
}

static void case_exit_writes_file_sink(void) {
  make_dir();
  static char report[PATH_MAX];
  path_in_dir(report, "report.txt");
  file_config(&g_cfg, report);
  /* Writing at exit names the hang's frames (DWARF read cold) and writes
     the report: the 300 ms default is usually enough, not on 2 loaded
     cores. Raised so that the test sees the writing itself; exit_bounded_*
     test the bound. */
  g_cfg.exit_timeout_ms = 30000;
  long took = exit_ms(hang_then_exit_app);
  char *text = read_text(report);
  int threads[4];
  long durations[4];
  CHECKF(report_hangs(text, threads, durations, 4) == 1, "no hang in:\n%s", text);
  CHECKF(durations[0] >= 950, "duration_ms=%ld for a 1 s hang", durations[0]);
  CHECKF(strstr(text, "exit_hang") != NULL, "the hang's stack is not in:\n%s", text);
  free(text);
  CHECKF(took < 30000 + 2000, "exit took %ld ms (exit_timeout_ms 30000)", took);
}

static void case_exit_sends_http_sink(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  http_config(&g_cfg, http_server_url(srv));
  g_cfg.batch_max_delay_ms = 10000; /* only exit closes the batch */
  /* Sending at exit takes naming the hang's frames (libc's DWARF read
     cold: seconds under ASan), a batch, an fsync'd spool file and a POST:
     the 300 ms default is usually enough, but not for an ASan build beside
     a -j8 suite on 2 cores. What is not sent in time stays spooled for the
     next run; here the bound is raised so that the test sees the sending
     itself (exit_bounded_* test the bound). */
  g_cfg.exit_timeout_ms = 30000;
  long took = exit_ms(hang_then_exit_app);
  batch_hang_t h[4];
  size_t n = server_hangs(srv, h, ARRAY_LEN(h));
  CHECKF(n == 1, "%zu hangs reached the collector", n);
  CHECKF(h[0].duration_ms >= 950, "duration %ld ms for a 1 s hang", h[0].duration_ms);
  CHECKF(took < 30000 + 2000, "exit took %ld ms (exit_timeout_ms 30000)", took);
  http_server_stop(srv);
}

/* A collector that accepts connections and never answers. */
static int dead_collector(char *url, size_t len) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  CHECK(listen(fd, 16) == 0);
  socklen_t alen = sizeof a;
  CHECK(getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
  snprintf(url, len, "http://127.0.0.1:%d", ntohs(a.sin_port));
  return fd;
}

static void capture_then_exit_app(void) {
  CHECK_EQ_INT(perf_sdk_init(&g_cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("last words"), PERF_OK);
  note_exit_time();
}

static void case_exit_bounded_dead_collector(void) {
  make_dir();
  char url[64];
  int listener = dead_collector(url, sizeof url);
  http_config(&g_cfg, url);
  g_cfg.request_timeout_ms = 600000;
  long took = exit_ms(capture_then_exit_app);
  /* 300 ms, and room for a loaded machine to schedule the exit. */
  CHECKF(took < 300 + 1500, "exit took %ld ms with a dead collector", took);
  close(listener);
}

static void case_exit_bounded_stuck_writer(void) {
  make_dir();
  static char fifo[PATH_MAX];
  path_in_dir(fifo, "report.fifo"); /* opening it for writing blocks: nobody reads */
  CHECK(mkfifo(fifo, 0600) == 0);
  file_config(&g_cfg, fifo);
  long took = exit_ms(capture_then_exit_app);
  CHECKF(took < 300 + 1500, "exit took %ld ms with the writer stuck in open()", took);
}

/* ---- signal handlers ------------------------------------------------------ */

static atomic_int g_busy_answers, g_other_answers, g_handler_calls;
static atomic_int g_capturing; /* the capturing thread's tid */
static atomic_int g_stop_capturing;

static void reentry_handler(int signo) {
  (void)signo;
  int saved = errno;
  atomic_fetch_add(&g_handler_calls, 1);
  /* Each of these, called while the interrupted thread is inside an SDK
     call, must answer PERF_E_BUSY at once. */
  perf_sdk_stats_t st;
  uintptr_t pcs[4];
  size_t n;
  int rc[] = {perf_sdk_flush(0), perf_sdk_get_stats(&st), perf_sdk_capture_now("handler"),
              perf_backtrace_thread(0, pcs, 4, &n), perf_sdk_shutdown(1000)};
  bool all_busy = true;
  for (size_t i = 0; i < ARRAY_LEN(rc); i++)
    all_busy = all_busy && rc[i] == PERF_E_BUSY;
  atomic_fetch_add(all_busy ? &g_busy_answers : &g_other_answers, 1);
  errno = saved;
}

static void *capturing_main(void *arg) {
  const perf_sdk_config_t *cfg = arg;
  atomic_store(&g_capturing, (int)syscall(SYS_gettid));
  while (!atomic_load(&g_stop_capturing)) {
    int err = perf_sdk_capture_now("loop");
    /* A handler that landed between two calls really shut down: go on. */
    if (err == PERF_E_NOT_INITIALIZED) CHECK_EQ_INT(perf_sdk_init(cfg), PERF_OK);
  }
  return NULL;
}

static void case_signal_handler_reentry(void) {
  make_dir();
  perf_sdk_config_t cfg;
  base_config(&cfg);
  cfg.max_events_per_hour = 100000;
  cfg.queue_capacity = 4096;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = reentry_handler;
  sigemptyset(&sa.sa_mask);
  CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, capturing_main, &cfg) == 0);
  while (!atomic_load(&g_capturing))
    sleep_ms(1);
  long long deadline = now_ms() + WAIT_MS;
  while (atomic_load(&g_busy_answers) < 20 && now_ms() < deadline) {
    int before = atomic_load(&g_handler_calls);
    CHECK(pthread_kill(t, SIGUSR1) == 0);
    while (atomic_load(&g_handler_calls) == before && now_ms() < deadline)
      sleep_ms(1);
  }
  atomic_store(&g_stop_capturing, 1);
  pthread_join(t, NULL);
  CHECKF(atomic_load(&g_busy_answers) >= 20,
         "%d handlers inside an SDK call answered PERF_E_BUSY, %d landed elsewhere",
         atomic_load(&g_busy_answers), atomic_load(&g_other_answers));
  perf_sdk_shutdown(5000);
}

/* The log callback runs inside perf_sdk_init, under its lock: a call back
   into the SDK from there is the same re-entry. */
static atomic_int g_log_reentry_rc;

static void reentering_log(perf_log_level_t level, const char *message, void *user) {
  (void)level, (void)message, (void)user;
  atomic_store(&g_log_reentry_rc, perf_sdk_shutdown(1000));
}

static void case_log_callback_reentry(void) {
  make_dir();
  perf_sdk_config_t cfg;
  base_config(&cfg);
  cfg.log_fn = reentering_log;
  atomic_store(&g_log_reentry_rc, 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK); /* logs "started" */
  CHECK_EQ_INT(atomic_load(&g_log_reentry_rc), PERF_E_BUSY);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

/* ---- nested loops --------------------------------------------------------- */

/* The script: 1.5 s of work that runs the event loop every 100 ms (redis
   answering BUSY), with the loop's own busy/idle marks. */
static CHAIN unsigned long outer_script(bool nested_marks) {
  unsigned long x = 0;
  int64_t end = now_ns() + 1500 * 1000000LL;
  for (int i = 0; i < 15; i++) {
    x += burn_until(now_ns() + 95 * 1000000LL);
    if (nested_marks) CHECK_EQ_INT(perf_sdk_loop_nested_begin(), PERF_OK);
    CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK); /* the nested loop's event */
    x += burn_until(now_ns() + 1000000);
    CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
    if (nested_marks) CHECK_EQ_INT(perf_sdk_loop_nested_end(), PERF_OK);
  }
  return x + burn_until(end);
}

static void run_script(const char *report, bool nested_marks, int *hangs, long *longest) {
  perf_sdk_config_t cfg;
  file_config(&cfg, report);
  cfg.hang_threshold_ms = 50;
  cfg.hang_sample_interval_ms = 100;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  g_sink = outer_script(nested_marks);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  char *text = read_text(report);
  int threads[64];
  long durations[64];
  size_t n = report_hangs(text, threads, durations, ARRAY_LEN(threads));
  *hangs = (int)n;
  *longest = 0;
  for (size_t i = 0; i < n && i < ARRAY_LEN(durations); i++)
    if (durations[i] > *longest) *longest = durations[i];
  if (nested_marks)
    CHECKF(strstr(text, "outer_script") != NULL, "the outer stack is not in:\n%s", text);
  free(text);
}

static void case_nested_loop_one_hang(void) {
  make_dir();
  char report[PATH_MAX];
  path_in_dir(report, "nested.txt");
  int hangs;
  long longest;
  run_script(report, true, &hangs, &longest);
  CHECKF(hangs == 1, "%d hangs for one 1.5 s script with a nested loop", hangs);
  CHECKF(longest >= 1400 && longest <= 1500 + 1000, "the script's hang lasted %ld ms", longest);
  /* Without the nested marks, the same script is cut at every nested idle. */
  path_in_dir(report, "flat.txt");
  run_script(report, false, &hangs, &longest);
  CHECKF(longest < 1000, "without nested_begin the hang lasted %ld ms", longest);
}

static void case_nested_loop_errors(void) {
  make_dir();
  CHECK_EQ_INT(perf_sdk_loop_nested_begin(), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_loop_nested_end(), PERF_E_NOT_INITIALIZED);
  perf_sdk_config_t cfg;
  base_config(&cfg);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_nested_end(), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_loop_nested_begin(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_nested_begin(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_nested_end(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_nested_end(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_nested_end(), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

/* ---- the state directory -------------------------------------------------- */

static void case_data_dir_only_when_needed(void) {
  make_dir();
  char report[PATH_MAX], marker[PATH_MAX + 32];
  path_in_dir(report, "report.txt");
  perf_sdk_config_t cfg;
  file_config(&cfg, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("no hang"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECKF(!exists(cfg.data_dir), "%s was made without a hang", cfg.data_dir);
  /* A hang in progress needs it for its marker. */
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  snprintf(marker, sizeof marker, "%s/hang-%d.marker", cfg.data_dir, (int)getpid());
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  long long deadline = now_ms() + WAIT_MS;
  while (!exists(marker) && now_ms() < deadline)
    g_sink += burn_until(now_ns() + 5000000);
  CHECKF(exists(marker), "no hang marker %s during a hang", marker);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECKF(!exists(marker), "the marker outlived the hang");
}

/* ---- libraries ------------------------------------------------------------ */

static void expect_no_libcurl_with(perf_sink_t sink, bool disabled) {
  make_dir();
  char report[PATH_MAX];
  path_in_dir(report, "report.txt");
  perf_sdk_config_t cfg;
  file_config(&cfg, report);
  cfg.sink = sink;
  if (disabled) setenv("PERF_SDK_DISABLED", "1", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  if (!disabled) {
    CHECK_EQ_INT(perf_sdk_capture_now("x"), PERF_OK);
    CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK); /* the writer opened its sink */
  }
  CHECKF(!maps_contain("libcurl"), "libcurl is mapped with sink %d%s", (int)sink,
         disabled ? " (disabled)" : "");
  CHECKF(maps_contain("libperfsdk.so"), "the test does not use the shared library");
  if (!disabled) CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

static void case_file_sink_no_libcurl(void) {
  expect_no_libcurl_with(PERF_SINK_FILE, false);
}

static void case_none_sink_no_libcurl(void) {
  expect_no_libcurl_with(PERF_SINK_NONE, false);
}

static void case_disabled_no_libcurl(void) {
  expect_no_libcurl_with(PERF_SINK_HTTP, true);
}

/* The SDK's log, kept (from any of its threads). */
static char g_log[4096];
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;

static void keep_log(perf_log_level_t level, const char *message, void *user) {
  (void)level;
  (void)user;
  pthread_mutex_lock(&g_log_lock);
  size_t used = strlen(g_log);
  snprintf(g_log + used, sizeof g_log - used, "%s\n", message);
  pthread_mutex_unlock(&g_log_lock);
}

/* Whether the kept log has a line holding `what`. */
static bool log_has(const char *what) {
  pthread_mutex_lock(&g_log_lock);
  bool has = strstr(g_log, what) != NULL;
  pthread_mutex_unlock(&g_log_lock);
  return has;
}

/* An http-sink SDK started on a fresh test server (libcurl not mapped yet),
   with libcurl in this process ("off") or in the upload helper (NULL). */
static http_server_t *start_http_sdk(const char *upload_helper) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  CHECK(!maps_contain("libcurl"));
  perf_sdk_config_t cfg;
  http_config(&cfg, http_server_url(srv));
  cfg.upload_helper = upload_helper;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  return srv;
}

/* One batch sent: libcurl is mapped now. Then the SDK and srv stopped. */
static void send_one_with_libcurl(http_server_t *srv) {
  CHECK_EQ_INT(perf_sdk_capture_now("x"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK(http_server_request_count(srv) >= 1);
  CHECKF(maps_contain("libcurl"), "libcurl is not mapped after a batch was sent");
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  http_server_stop(srv);
}

static void case_http_sink_in_process_loads_libcurl(void) {
  send_one_with_libcurl(start_http_sdk("off"));
}

/* In process, the http sink loads libcurl when it first has a batch to
   send, not when it starts: an app with nothing to report never maps it. */
static void case_http_sink_idle_no_libcurl(void) {
  http_server_t *srv = start_http_sdk("off");
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK); /* the sink and its uploader started */
  CHECKF(!maps_contain("libcurl"), "libcurl is mapped with nothing to send");
  CHECK_EQ_INT((int)http_server_request_count(srv), 0);
  send_one_with_libcurl(srv);
}

/* ---- the upload helper's process ----------------------------------------- */

static atomic_int g_sigchld;
static void on_sigchld(int sig) {
  (void)sig;
  atomic_fetch_add(&g_sigchld, 1);
}

/* The pid of a live upload helper started by process `app` (perf-upload,
   its argv[1] the app's pid), or 0. */
static pid_t helper_of(pid_t app) {
  DIR *d = opendir("/proc");
  pid_t found = 0;
  struct dirent *e;
  char want[32];
  snprintf(want, sizeof want, "%d", (int)app);
  while (d && !found && (e = readdir(d)) != NULL) {
    char path[300], state = 0, cmd[512];
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    bool named = fscanf(f, "%*d (perf-upload) %c", &state) == 1 && state != 'Z';
    fclose(f);
    if (!named) continue;
    snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, cmd, sizeof cmd - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) continue;
    cmd[n] = '\0';
    const char *arg1 = cmd + strlen(cmd) + 1;
    if (arg1 < cmd + n && strcmp(arg1, want) == 0) found = (pid_t)atoi(e->d_name);
  }
  if (d) closedir(d);
  return found;
}

/* Whether process pid has ended: gone, or a zombie waiting for its reaper
   (init, or a subreaper, adopts the helper). */
static bool proc_ended(pid_t pid) {
  char path[64], state = 0;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return true;
  if (fscanf(f, "%*d %*s %c", &state) != 1) state = 'Z';
  fclose(f);
  return state == 'Z' || state == 'X';
}

/* What descriptor fd of process pid is (readlink of /proc/PID/fd/FD). */
static void fd_target(pid_t pid, int fd, char *out, size_t len) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)pid, fd);
  ssize_t k = readlink(path, out, len - 1);
  out[k > 0 ? k : 0] = '\0';
}

/* Whether process pid holds a descriptor that is `target`. */
static bool proc_holds(pid_t pid, const char *target) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
  bool found = false;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && !found && (e = readdir(d)) != NULL) {
    char t[PATH_MAX];
    fd_target(pid, atoi(e->d_name), t, sizeof t);
    found = e->d_name[0] != '.' && strcmp(t, target) == 0;
  }
  if (d) closedir(d);
  return found;
}

/* Wait (polling, deadline) until the helper `pid` has ended. */
static bool helper_gone(pid_t pid, unsigned ms) {
  long long deadline = now_ms() + ms;
  while (!proc_ended(pid) && now_ms() < deadline)
    sleep_ms(20);
  return proc_ended(pid);
}

/* The default http sink: libcurl runs in the upload helper, a process the
   app never notices (not its child: no SIGCHLD, nothing for waitpid(-1);
   none of its descriptors), which ends when the spool stays empty and
   comes back for the next batch. */
static void case_http_sink_helper(void) {
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigchld;
  sigaction(SIGCHLD, &sa, &old);
  /* An app descriptor without FD_CLOEXEC, as old code opens them. */
  int app_fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(app_fd >= 0);
  http_server_t *srv = start_http_sdk(NULL);
  CHECK_EQ_INT(perf_sdk_capture_now("helper-1"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT((int)http_server_request_count(srv), 1);
  CHECKF(!maps_contain("libcurl"), "libcurl is mapped in the app with the upload helper");
  pid_t helper = helper_of(getpid());
  CHECKF(helper > 0, "no upload helper after a batch was sent");
  char target[PATH_MAX];
  for (int fd = 0; fd < 3; fd++) {
    fd_target(helper, fd, target, sizeof target);
    CHECKF(strcmp(target, "/dev/null") == 0, "the helper's descriptor %d is %s", fd, target);
  }
  fd_target(helper, 3, target, sizeof target);
  CHECKF(strncmp(target, "socket:", 7) == 0, "the helper's descriptor 3 is %s", target);
  /* None of the app's: its socket, its standard error, its test server. */
  int app_fds[] = {app_fd, 2, 0};
  for (size_t i = 0; i < ARRAY_LEN(app_fds); i++) {
    fd_target(getpid(), app_fds[i], target, sizeof target);
    CHECKF(!target[0] || strcmp(target, "/dev/null") == 0 || !proc_holds(helper, target),
           "the helper holds the app's descriptor %d (%s)", app_fds[i], target);
  }
  /* Idle: it ends, unseen by the app. */
  CHECKF(helper_gone(helper, 20000), "the helper %d outlived the idle spool", (int)helper);
  CHECK_EQ_INT(waitpid(-1, NULL, WNOHANG), -1);
  CHECK_EQ_INT(errno, ECHILD);
  /* The next batch: a new helper sends it. */
  CHECK_EQ_INT(perf_sdk_capture_now("helper-2"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT((int)http_server_request_count(srv), 2);
  pid_t second = helper_of(getpid());
  CHECKF(second > 0 && second != helper, "no new helper for the second batch");
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECKF(helper_gone(second, 10000), "the helper %d outlived shutdown", (int)second);
  CHECK_EQ_INT(atomic_load(&g_sigchld), 0);
  CHECK(!maps_contain("libcurl"));
  close(app_fd);
  sigaction(SIGCHLD, &old, NULL);
  http_server_stop(srv);
}

/* A helper killed between batches, and one killed while the collector
   holds its request: every batch still arrives (the same batch id sent
   again), and the spool ends empty. */
static void case_http_sink_helper_killed(void) {
  http_server_t *srv = start_http_sdk(NULL);
  CHECK_EQ_INT(perf_sdk_capture_now("killed-1"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  pid_t helper = helper_of(getpid());
  CHECK(helper > 0);
  CHECK_EQ_INT(kill(helper, SIGKILL), 0);
  CHECK_EQ_INT(perf_sdk_capture_now("killed-2"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT((int)http_server_request_count(srv), 2);
  /* The collector holds the third batch's answer 3 s; the helper dies meanwhile. */
  http_response_t slow = {.delay_ms = 3000};
  CHECK(http_server_push(srv, &slow));
  CHECK_EQ_INT(perf_sdk_capture_now("killed-3"), PERF_OK);
  CHECK(http_server_wait_requests(srv, 3, 10000));
  helper = helper_of(getpid());
  CHECK(helper > 0);
  CHECK_EQ_INT(kill(helper, SIGKILL), 0);
  CHECK_EQ_INT(perf_sdk_flush(20000), PERF_OK);
  size_t n = http_server_request_count(srv);
  CHECKF(n == 4, "%zu requests: want 4 (the third batch again)", n);
  http_request_t third, fourth;
  CHECK(http_server_request(srv, 2, &third) && http_server_request(srv, 3, &fourth));
  const char *id3 = http_request_header(&third, "X-Perf-Batch-Id"),
             *id4 = http_request_header(&fourth, "X-Perf-Batch-Id");
  CHECK(id3 && id4);
  CHECKF(strcmp(id3, id4) == 0, "the batch sent again has id %s, first %s", id4, id3);
  http_request_free(&third);
  http_request_free(&fourth);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  http_server_stop(srv);
}

/* The app killed with SIGKILL: its helper ends too. */
static void case_http_sink_helper_ends_with_app(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  int report[2];
  CHECK_EQ_INT(pipe(report), 0);
  pid_t app = fork();
  CHECK(app >= 0);
  if (app == 0) {
    perf_sdk_config_t cfg;
    http_config(&cfg, http_server_url(srv));
    if (perf_sdk_init(&cfg) != PERF_OK || perf_sdk_capture_now("app") != PERF_OK ||
        perf_sdk_flush(10000) != PERF_OK)
      _exit(3);
    pid_t h = helper_of(getpid());
    if (write(report[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(4);
    pause();
    _exit(0);
  }
  close(report[1]);
  pid_t helper = 0;
  ssize_t got = read(report[0], &helper, sizeof helper);
  CHECK_EQ_INT(kill(app, SIGKILL), 0);
  CHECK_EQ_INT(waitpid(app, NULL, 0), app);
  CHECK_EQ_INT((int)got, (int)sizeof helper);
  CHECKF(helper > 0, "the app saw no helper");
  CHECKF(helper_gone(helper, 10000), "the helper %d still runs after the app died", (int)helper);
  close(report[0]);
  http_server_stop(srv);
}

static void case_upload_helper_not_executable(void) {
  make_dir();
  perf_sdk_config_t cfg;
  http_config(&cfg, "http://127.0.0.1:9");
  cfg.upload_helper = "/nonexistent/perf-upload";
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_INVALID_CONFIG);
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_E_NOT_INITIALIZED);
}

/* An http-sink SDK whose upload helper is a file `name` holding `text`
   (mode 0755), its log kept; one batch captured and flushed. */
static http_server_t *send_one_with_helper_file(const char *name, const char *text) {
  make_dir();
  char path[PATH_MAX];
  path_in_dir(path, name);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fputs(text, f);
  fclose(f);
  CHECK_EQ_INT(chmod(path, 0755), 0);
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  perf_sdk_config_t cfg;
  http_config(&cfg, http_server_url(srv));
  cfg.upload_helper = path;
  cfg.log_fn = keep_log;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now(name), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(20000), PERF_OK);
  CHECK_EQ_INT((int)http_server_request_count(srv), 1);
  return srv;
}

/* The batch went with libcurl in this process, the log saying why. */
static void expect_sent_in_process(http_server_t *srv, const char *why) {
  CHECKF(log_has(why), "log: %s", g_log);
  CHECKF(maps_contain("libcurl"), "libcurl is not mapped after the in-process fallback");
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  http_server_stop(srv);
}

/* A helper that cannot start for good (here, a file execve does not run:
   ENOEXEC; also a seccomp filter, a sandbox, an emulator): the SDK says so
   once and sends with libcurl in the app. */
static void case_upload_helper_cannot_start(void) {
  http_server_t *srv = send_one_with_helper_file("not-a-program", "\x7f"
                                                                  "ELF but not really\n");
  expect_sent_in_process(
      srv, "could not start: Exec format error; libcurl loads in this process instead");
}

/* A helper that starts but ends at once, every time (its own libraries
   missing, say): after three in a row the SDK sends in the app. */
static void case_upload_helper_ends_at_start(void) {
  http_server_t *srv = send_one_with_helper_file("quits", "#!/bin/sh\nexit 1\n");
  expect_sent_in_process(srv, "3 in a row ended before their first answer");
}

/* ---- a stopped process is not hung ------------------------------------- */

#define STOP_MS 2000
static int g_ask_stop[2], g_resumed[2]; /* app -> test, test -> app */

/* Burn this thread's CPU for ms of CPU time (a stop or a loaded machine
   does not count), or until a byte arrives on fd (fd >= 0). */
static void burn_cpu(int ms, int fd) {
  int64_t end = thread_cpu_ns() + (int64_t)ms * 1000000;
  for (;;) {
    g_sink += burn_until(0);
    char byte;
    if (fd >= 0 && read(fd, &byte, 1) == 1) return;
    if (fd < 0 && thread_cpu_ns() >= end) return;
  }
}

/* Ask the test to stop this process; keep burning until it was resumed.
   Returns how long that took (the stop and the test's reaction times). */
static int64_t stopped_meanwhile(void) {
  int64_t asked = now_ns();
  CHECK(write(g_ask_stop[1], "s", 1) == 1);
  burn_cpu(0, g_resumed[0]);
  return now_ns() - asked;
}

/* Two units of work, each stopped for STOP_MS in its middle: 20 ms of CPU
   (not a hang at 800 ms, even on a loaded machine), then 1 s of CPU (a
   hang). Tells the test the second unit's wall time and its stop's. */
static void stopped_app(void) {
  CHECK(fcntl(g_resumed[0], F_SETFL, O_NONBLOCK) == 0);
  CHECK_EQ_INT(perf_sdk_init(&g_cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  burn_cpu(10, -1);
  stopped_meanwhile();
  burn_cpu(10, -1);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  int64_t spans[2], began = now_ns();
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  burn_cpu(50, -1); /* stopped before it becomes a hang: no capture in flight */
  spans[1] = stopped_meanwhile();
  burn_cpu(950, -1);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  spans[0] = now_ns() - began;
  CHECK(write(g_ask_stop[1], "e", 1) == 1);
  CHECK(write(g_ask_stop[1], spans, sizeof spans) == (ssize_t)sizeof spans);
  CHECK_EQ_INT(perf_sdk_shutdown(10000), PERF_OK);
}

/* SIGSTOP / SIGCONT in the middle of units of work: the stopped time is
   neither a hang nor part of one. */
static void case_stopped_is_not_hang(void) {
  make_dir();
  static char report[PATH_MAX];
  path_in_dir(report, "report.txt");
  file_config(&g_cfg, report);
  g_cfg.hang_threshold_ms = 800;
  CHECK(pipe(g_ask_stop) == 0 && pipe(g_resumed) == 0);
  pid_t app = run_app(stopped_app);
  int64_t spans[2] = {0, 0}; /* the hang's unit, its stop (ns) */
  for (int stops = 0;; stops++) {
    char what = 0;
    CHECK(read(g_ask_stop[0], &what, 1) == 1);
    if (what == 'e') {
      CHECK_EQ_INT(stops, 2);
      CHECK(read(g_ask_stop[0], spans, sizeof spans) == (ssize_t)sizeof spans);
      break;
    }
    CHECK(kill(app, SIGSTOP) == 0);
    int status = 0;
    CHECK(waitpid(app, &status, WUNTRACED) == app && WIFSTOPPED(status));
    sleep_ms(STOP_MS);
    CHECK(kill(app, SIGCONT) == 0);
    CHECK(write(g_resumed[1], "c", 1) == 1);
  }
  expect_exit_ok(app, "the stopped app");
  char *text = read_text(report);
  int threads[4];
  long durations[4];
  size_t n = report_hangs(text, threads, durations, 4);
  CHECKF(n == 1, "%zu hangs (expected the second unit only) in:\n%s", n, text);
  /* The unit's wall time less its stop: less at most what the monitor
     cannot see of a stop (a quarter of the threshold), give or take the
     test's reaction times (within the stop span the app measured) and
     100 ms of scheduling. Counted with the stop it would be the wall time. */
  long wall = (long)(spans[0] / 1000000), stop = (long)(spans[1] / 1000000);
  long most = wall - STOP_MS + 800 / 4 + 100, least = wall - stop - 100;
  CHECKF(durations[0] >= least && durations[0] <= most,
         "the hang lasted %ld ms: its unit took %ld ms, stopped %d ms (%ld ms from asking to "
         "resumed); expected %ld..%ld",
         durations[0], wall, STOP_MS, stop, least, most);
  free(text);
}

/* ---- the front: the core is loaded only when the SDK is enabled ---------- */

#define CORE_NAME "libperfsdk-core.so"

/* What every call answers before any perf_sdk_init, argument checks first. */
static void expect_never_initialized_answers(void) {
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_heartbeat(), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_loop_nested_begin(), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_loop_nested_end(), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_pause(), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_resume(), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_watch_current_thread(), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_capture_now("x"), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_flush(-1), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_flush(10), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_get_stats(NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_sdk_shutdown(600001), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_shutdown(10), PERF_E_NOT_INITIALIZED);
  CHECK_EQ_INT(perf_main_thread_id(), getpid());
}

/* PERF_SDK_DISABLED=1: init succeeds, says so, and maps the front only. */
static void case_front_disabled(void) {
  CHECKF(!maps_contain(CORE_NAME), "the core is mapped before any call");
  make_dir();
  perf_sdk_config_t cfg;
  base_config(&cfg);
  cfg.log_fn = keep_log;
  setenv("PERF_SDK_DISABLED", "1", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECKF(strstr(g_log, "perf sdk disabled by PERF_SDK_DISABLED") != NULL, "log: %s", g_log);
  expect_never_initialized_answers();
  CHECKF(maps_contain("libperfsdk.so"), "the test does not use the shared library");
  CHECKF(!maps_contain(CORE_NAME), "the core is mapped with the SDK disabled");
  CHECKF(!maps_contain("libdw"), "libdw is mapped with the SDK disabled");
}

/* A configuration the SDK rejects is rejected by the front, with the same
   error and message, and nothing more is loaded. */
static void case_front_bad_config(void) {
  make_dir();
  perf_sdk_config_t cfg;
  base_config(&cfg);
  cfg.log_fn = keep_log;
  cfg.hang_threshold_ms = 1;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_INVALID_CONFIG);
  CHECKF(strstr(g_log, "hang_threshold_ms") != NULL, "the log does not name the field: %s", g_log);
  CHECKF(!maps_contain(CORE_NAME), "the core is mapped for a rejected configuration");
}

/* The front answers as the core does before init; a sampler call loads the
   core, which then answers the same; no frame of the front is on a stack
   captured through it (its forwarders are tail calls). */
static void case_front_answers_as_core(void) {
  expect_never_initialized_answers();
  CHECK(!maps_contain(CORE_NAME));
  uintptr_t pcs[64];
  size_t n = 0;
  CHECK_EQ_INT(perf_backtrace_thread(0, pcs, ARRAY_LEN(pcs), &n), PERF_OK);
  CHECKF(maps_contain(CORE_NAME), "a capture did not load the core");
  CHECK(n >= 2);
  for (size_t i = 0; i < n; i++) {
    Dl_info info;
    if (!dladdr((void *)pcs[i], &info) || !info.dli_fname) continue;
    CHECKF(!strstr(info.dli_fname, "libperfsdk.so"), "frame %zu (%#lx) is in the front (%s)", i,
           (unsigned long)pcs[i], info.dli_fname);
  }
  expect_never_initialized_answers();
}

/* The front's own perf_strerror (error.c is built into it) gives every
   code's text; a running SDK's codes reach the app through the front: the
   rate limit, the queue, a flush's deadline. */
static void case_front_error_codes(void) {
  Dl_info info;
  CHECK(dladdr((void *)perf_strerror, &info) && info.dli_fname);
  CHECKF(strstr(info.dli_fname, "libperfsdk.so") != NULL, "perf_strerror is %s's", info.dli_fname);
  check_error_texts();
  CHECK_ERROR(perf_sdk_capture_now("x"), PERF_E_NOT_INITIALIZED);
  make_dir();
  char report[PATH_MAX];
  path_in_dir(report, "report.txt");
  perf_sdk_config_t cfg;
  file_config(&cfg, report);
  cfg.max_events_per_hour = 1;
  CHECK_ERROR(perf_sdk_init(&cfg), PERF_OK);
  CHECKF(maps_contain(CORE_NAME), "init did not load the core");
  CHECK_ERROR(perf_sdk_init(&cfg), PERF_E_ALREADY_INITIALIZED);
  CHECK_ERROR(perf_sdk_capture_now("first"), PERF_OK);
  CHECK_ERROR(perf_sdk_capture_now("second"), PERF_E_RATE_LIMITED);
  CHECK_ERROR(perf_sdk_loop_nested_end(), PERF_E_INVALID_ARGUMENT);
  CHECK_ERROR(perf_sdk_flush(10000), PERF_OK);
  CHECK_ERROR(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_ERROR(perf_sdk_shutdown(5000), PERF_E_NOT_INITIALIZED);
  /* The queue: the report file is a FIFO nobody reads yet, so the writer
     waits in its open() with the first event; the second fills the queue
     (one place), the third finds it full. */
  char fifo[PATH_MAX];
  path_in_dir(fifo, "report.fifo");
  CHECK(mkfifo(fifo, 0600) == 0);
  file_config(&cfg, fifo);
  cfg.queue_capacity = 1;
  CHECK_ERROR(perf_sdk_init(&cfg), PERF_OK);
  CHECK_ERROR(perf_sdk_capture_now("taken"), PERF_OK);
  pid_t writer = thread_named("perf-writer");
  CHECK(writer != 0);
  wait_in_syscall(writer, SYS_openat, WAIT_MS); /* the writer holds it: the queue is empty */
  perf_sdk_stats_t st;
  CHECK_ERROR(perf_sdk_capture_now("queued"), PERF_OK);
  CHECK_ERROR(perf_sdk_capture_now("dropped"), PERF_E_QUEUE_FULL);
  CHECK_ERROR(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.events_dropped_queue, 1);
  int rd = open(fifo, O_RDONLY | O_NONBLOCK); /* the writer goes on */
  CHECK(rd >= 0);
  CHECK_ERROR(perf_sdk_shutdown(5000), PERF_OK);
  close(rd);
}

static const test_case_t g_cases[] = {
    TEST_CASE(front_error_codes),
    TEST_CASE(front_disabled),
    TEST_CASE(stopped_is_not_hang),
    TEST_CASE(front_bad_config),
    TEST_CASE(front_answers_as_core),
    TEST_CASE(daemonize_file_sink),
    TEST_CASE(daemonize_http_sink),
    TEST_CASE(fork_while_sampling),
    TEST_CASE(fork_right_after_init),
    TEST_CASE(fork_child_lifecycle),
    TEST_CASE(fork_exec),
    TEST_CASE(exit_writes_file_sink),
    TEST_CASE(exit_sends_http_sink),
    TEST_CASE(exit_bounded_dead_collector),
    TEST_CASE(exit_bounded_stuck_writer),
    TEST_CASE(signal_handler_reentry),
    TEST_CASE(log_callback_reentry),
    /* The hang's length is measured against a 1.5 s script that must get a
       core throughout. */
    TEST_CASE_SERIAL(nested_loop_one_hang, "a 1.5 s unit of work timed to 100 ms"),
    TEST_CASE(nested_loop_errors),
    TEST_CASE(data_dir_only_when_needed),
    TEST_CASE(file_sink_no_libcurl),
    TEST_CASE(none_sink_no_libcurl),
    TEST_CASE(disabled_no_libcurl),
    TEST_CASE(http_sink_in_process_loads_libcurl),
    TEST_CASE(http_sink_idle_no_libcurl),
    TEST_CASE(http_sink_helper),
    TEST_CASE(http_sink_helper_killed),
    TEST_CASE(http_sink_helper_ends_with_app),
    TEST_CASE(upload_helper_not_executable),
    TEST_CASE(upload_helper_cannot_start),
    TEST_CASE(upload_helper_ends_at_start),
};

/* The cases set what they test; nothing comes from the caller's
   environment. */
static void clear_sdk_environment(void) {
  extern char **environ;
  char names[64][128];
  size_t n = 0;
  for (char **e = environ; *e && n < ARRAY_LEN(names); e++)
    if (strncmp(*e, "PERF_SDK_", 9) == 0) {
      snprintf(names[n], sizeof names[0], "%.*s", (int)strcspn(*e, "="), *e);
      n++;
    }
  for (size_t i = 0; i < n; i++)
    unsetenv(names[i]);
}

int main(int argc, char **argv) {
  g_case_pid = getpid();
  g_argv = argv;
  if (argc == 3 && strcmp(argv[1], "exec_probe") == 0) return exec_probe(argv[2]);
  clear_sdk_environment();
  /* The front_ cases see what is mapped before any sampler call. */
  if (argc >= 2 && strncmp(argv[1], "front_", 6) == 0)
    return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
  /* Captures on a loaded machine (ASan, ctest -j8 on 2 cores) may wait for
     their thread longer than the default 100 ms. */
  perf_sampler_options_t opts;
  perf_sampler_options_init(&opts);
  opts.timeout_ms = 2000;
  CHECK_EQ_INT(perf_sampler_configure(&opts), PERF_OK);
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
