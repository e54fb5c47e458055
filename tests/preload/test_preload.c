/*
 * test_preload.c - libperfsdk-preload.so and perf-run on programs that
 * know nothing of the SDK: Debian's own redis-server and memcached
 * (unmodified, stripped), and wait_app.c (not linked with the SDK). Each
 * case starts the real program under the real perf-run with the file
 * sink, drives it over real sockets or signals, and reads the report.
 *
 * redis-server and memcached come from scripts/deps.sh's packages; where
 * one is missing the case says so and passes, except under CI (the CI
 * variable set), where a missing one fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "sdk_report.h"
#include "tempdir.h"
#include "test_util.h"

#define START_MS 20000 /* a program up and answering, on a loaded machine */
#define EVENT_MS 20000 /* an event in the report after its hang ended */
#define EXIT_MS 20000
#define PRELOAD_WAITS_TO_REGISTER 3 /* PERF__PRELOAD_WAITS_TO_REGISTER, sdk/preload/preload.h */

static const char *g_dir;
static pid_t g_children[8]; /* killed at exit if still there (a failed check exits) */
static size_t g_child_count;

static void kill_children(void) {
  for (size_t i = 0; i < g_child_count; i++)
    if (waitpid(g_children[i], NULL, WNOHANG) == 0) {
      kill(g_children[i], SIGKILL);
      waitpid(g_children[i], NULL, 0);
    }
}

static void note_child(pid_t pid) {
  if (g_child_count == 0) atexit(kill_children);
  if (g_child_count < ARRAY_LEN(g_children)) g_children[g_child_count++] = pid;
}

/* ---- processes ---------------------------------------------------------- */

/* Start argv with `env` (NAME=VALUE..., NULL-terminated) added, its stdout
   and stderr into `out`. Under the sanitizers the ASan runtime is preloaded
   first: an uninstrumented program loading the instrumented library needs
   it. */
static pid_t start(char *const argv[], const char *const *env, const char *out) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(120);
    dup2(fd, 1);
    dup2(fd, 2);
    for (const char *const *e = env; e && *e; e++)
      putenv((char *)*e);
#ifdef PERF_TEST_ASAN_RUNTIME
    setenv("LD_PRELOAD", PERF_TEST_ASAN_RUNTIME, 1);
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
#endif
    execv(argv[0], argv);
    _exit(121);
  }
  note_child(pid);
  return pid;
}

/* The exit status of pid, waiting at most ms (then SIGKILL and a failure). */
static int wait_exit(pid_t pid, int ms) {
  long long deadline = now_ms() + ms;
  for (;;) {
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    CHECK(r >= 0);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (now_ms() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      CHECKF(false, "pid %d did not exit within %d ms", (int)pid, ms);
    }
    sleep_ms(5);
  }
}

/* A path in the test's directory; lives as long as the process. */
static char *path_in_dir(const char *name) {
  static char paths[16][256];
  static size_t used;
  CHECK(used < ARRAY_LEN(paths));
  char *p = paths[used++];
  CHECK((size_t)snprintf(p, sizeof paths[0], "%s/%s", g_dir, name) < sizeof paths[0]);
  return p;
}

/* The report once it holds `want` events of `kind` (or the deadline). */
static char *report_with(const char *report, const char *kind, size_t want) {
  long long deadline = now_ms() + EVENT_MS;
  for (;;) {
    char *text = read_text(report);
    if (text && count_events(text, kind) >= want) return text;
    if (now_ms() > deadline) return text ? text : strdup("");
    free(text);
    sleep_ms(20);
  }
}

/* The program is installed; else the case is skipped (false), or fails in CI. */
static bool have_program(const char *path) {
  if (access(path, X_OK) == 0) return true;
  CHECKF(!getenv("CI"), "%s is missing (scripts/deps.sh installs it)", path);
  printf("note: skipped: %s is not installed (apt-get install it; scripts/deps.sh)\n", path);
  return false;
}

/* ---- sockets ------------------------------------------------------------ */

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  socklen_t len = sizeof a;
  CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

static int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return -1;
  }
  struct timeval tv = {30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/* Send `request`, read until the reply ends with `end`; the reply. */
static char *ask(int fd, const char *request, const char *end) {
  size_t n = strlen(request);
  CHECK(write(fd, request, n) == (ssize_t)n);
  static char reply[65536];
  size_t got = 0;
  for (;;) {
    ssize_t r = read(fd, reply + got, sizeof reply - 1 - got);
    CHECKF(r > 0, "no reply to %s", request);
    got += (size_t)r;
    reply[got] = '\0';
    size_t e = strlen(end);
    if (got >= e && strcmp(reply + got - e, end) == 0) return reply;
    CHECK(got < sizeof reply - 1);
  }
}

/* Connected once the program answers (or the deadline). */
static int connect_when_up(int port, pid_t pid) {
  long long deadline = now_ms() + START_MS;
  for (;;) {
    int fd = connect_to(port);
    if (fd >= 0) return fd;
    CHECKF(waitpid(pid, NULL, WNOHANG) == 0, "the program under perf-run exited early");
    CHECKF(now_ms() < deadline, "nothing listens on port %d after %d ms", port, START_MS);
    sleep_ms(20);
  }
}

/* ---- redis -------------------------------------------------------------- */

typedef struct {
  pid_t pid;
  int port;
  int fd;
  char *report;
  char *out;
} server_t;

static void redis_start(server_t *s) {
  g_dir = tempdir_make("preload");
  s->port = free_port();
  s->report = path_in_dir("redis-report.txt");
  s->out = path_in_dir("redis.out");
  char port[16];
  snprintf(port, sizeof port, "%d", s->port);
  char *argv[] = {PERF_RUN,
                  "--sink",
                  "file",
                  "--sink-path",
                  s->report,
                  "--app-name",
                  "redis-server",
                  "--",
                  "/usr/bin/redis-server",
                  "--port",
                  port,
                  "--bind",
                  "127.0.0.1",
                  "--save",
                  "",
                  "--appendonly",
                  "no",
                  "--enable-debug-command",
                  "local",
                  "--dir",
                  (char *)g_dir,
                  NULL};
  s->pid = start(argv, NULL, s->out);
  s->fd = connect_when_up(s->port, s->pid);
  /* Each PING after the first ends at least one blocking wait of redis's
     loop: a watched loop from the third one on (however many of its waits
     had a zero timeout, a timer being due). */
  for (int i = 0; i < 2 + PRELOAD_WAITS_TO_REGISTER; i++)
    CHECK(strcmp(ask(s->fd, "*1\r\n$4\r\nPING\r\n", "\r\n"), "+PONG\r\n") == 0);
}

static void redis_stop(server_t *s) {
  const char *shutdown = "*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n";
  CHECK(write(s->fd, shutdown, strlen(shutdown)) == (ssize_t)strlen(shutdown));
  int status = wait_exit(s->pid, EXIT_MS);
  close(s->fd);
  CHECKF(status == 0, "redis-server exited with %d:\n%s", status, read_text(s->out));
}

/* The event's duration within 10% of what the client measured. */
static void expect_duration_near(const event_t *ev, long long client_ms) {
  CHECKF(ev->duration_ms >= client_ms * 9 / 10 && ev->duration_ms <= client_ms * 11 / 10,
         "hang of %ld ms, the client waited %lld ms:\n%s", ev->duration_ms, client_ms, ev->text);
}

/* DEBUG SLEEP 1: exactly one hang of the loop "redis-server" (its main
   thread's name), stuck in libc's nanosleep under redis's command path
   (names from redis-server's .dynsym: Debian links it -rdynamic), lasting
   what the client waited. */
static void case_redis_debug_sleep(void) {
  if (!have_program("/usr/bin/redis-server")) return;
  server_t s;
  redis_start(&s);
  long long t0 = now_ms();
  CHECK(strcmp(ask(s.fd, "*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$1\r\n1\r\n", "\r\n"), "+OK\r\n") ==
        0);
  long long client_ms = now_ms() - t0;
  free(report_with(s.report, "hang", 1));
  redis_stop(&s);
  char *text = read_text(s.report);
  CHECK(text != NULL);
  CHECKF(count_events(text, "hang") == 1, "want exactly one hang:\n%s", text);
  event_t ev;
  find_event(text, "hang", 0, &ev);
  CHECKF(strstr(ev.text, "loop name=\"redis-server\"") != NULL, "not redis's loop:\n%s", ev.text);
  expect_duration_near(&ev, client_ms);
  const char *chain[] = {"__nanosleep|nanosleep", "debugCommand",       "call",
                         "processCommand",        "processInputBuffer", "readQueryFromClient"};
  expect_chain(&ev, 0, chain, ARRAY_LEN(chain));
  const char *main_chain[] = {"aeMain", "main"};
  expect_chain(&ev, 0, main_chain, ARRAY_LEN(main_chain));
  event_free(&ev);
  free(text);
}

/* A Lua script busy for about a second: one hang, in the script's call
   path (evalGenericCommand, luaCallFunction), as long as the client
   waited. */
static void case_redis_slow_lua(void) {
  if (!have_program("/usr/bin/redis-server")) return;
  server_t s;
  redis_start(&s);
  /* A loop the client times itself: busy until a second has passed. */
  const char *script = "local t0 = redis.call('TIME') local n = 0 "
                       "repeat n = n + 1 local t = redis.call('TIME') "
                       "until (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) >= 1000000 return n";
  char request[1024];
  snprintf(request, sizeof request, "*3\r\n$4\r\nEVAL\r\n$%zu\r\n%s\r\n$1\r\n0\r\n", strlen(script),
           script);
  long long t0 = now_ms();
  char *reply = ask(s.fd, request, "\r\n");
  long long client_ms = now_ms() - t0;
  CHECKF(reply[0] == ':', "EVAL answered %s", reply);
  free(report_with(s.report, "hang", 1));
  redis_stop(&s);
  char *text = read_text(s.report);
  CHECK(text != NULL);
  CHECKF(count_events(text, "hang") == 1, "want exactly one hang:\n%s", text);
  event_t ev;
  find_event(text, "hang", 0, &ev);
  expect_duration_near(&ev, client_ms);
  const char *chain[] = {"luaCallFunction", "evalGenericCommand"};
  expect_chain(&ev, 0, chain, ARRAY_LEN(chain));
  event_free(&ev);
  free(text);
}

/* ---- memcached ---------------------------------------------------------- */

#define MC_STALL_MS 1000
static const char k_mc_value[] = "VALUE k 0 1\r\nx\r\nEND\r\n"; /* "get k" answered */

static void *drain_main(void *arg) {
  int fd = *(int *)arg;
  char buf[4096];
  while (read(fd, buf, sizeof buf) > 0) {
  }
  return NULL;
}

/* Read what is in the pipe now (non-blocking). */
static void drain_now(int fd) {
  char buf[4096];
  while (read(fd, buf, sizeof buf) > 0) {
  }
}

/* memcached -t 4 -vv logs each command from the worker serving it, on
   stderr: here a pipe of one page the test stops reading, so the worker
   blocks in write() for a second. Exactly one hang, of a loop "mc-worker"
   on that worker's thread (named mc-worker), stuck in libc's write. */
static void case_memcached_worker_stall(void) {
  if (!have_program("/usr/bin/memcached")) return;
  g_dir = tempdir_make("preload");
  char *report = path_in_dir("mc-report.txt");
  int port = free_port();
  char port_text[16];
  snprintf(port_text, sizeof port_text, "%d", port);
  int err_pipe[2];
  CHECK(pipe2(err_pipe, O_CLOEXEC) == 0);
  CHECK(fcntl(err_pipe[0], F_SETPIPE_SZ, 4096) >= 4096);
  CHECK(fcntl(err_pipe[0], F_SETFL, O_NONBLOCK) == 0);
  char *argv[] = {PERF_RUN,
                  "--sink",
                  "file",
                  "--sink-path",
                  report,
                  "--",
                  "/usr/bin/memcached",
                  "-t",
                  "4",
                  "-vv",
                  "-l",
                  "127.0.0.1",
                  "-p",
                  port_text,
                  "-U",
                  "0",
                  geteuid() == 0 ? "-u" : NULL,
                  "root",
                  NULL};
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(err_pipe[1], 2);
#ifdef PERF_TEST_ASAN_RUNTIME
    setenv("LD_PRELOAD", PERF_TEST_ASAN_RUNTIME, 1);
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0:detect_leaks=0", 1);
#endif
    execv(argv[0], argv);
    _exit(121);
  }
  note_child(pid);
  close(err_pipe[1]);
  long long deadline = now_ms() + START_MS;
  int fd;
  while ((fd = connect_to(port)) < 0) {
    drain_now(err_pipe[0]);
    CHECKF(waitpid(pid, NULL, WNOHANG) == 0, "memcached exited early");
    CHECKF(now_ms() < deadline, "memcached does not listen after %d ms", START_MS);
    sleep_ms(20);
  }
  CHECK(strcmp(ask(fd, "set k 0 0 1\r\nx\r\n", "\r\n"), "STORED\r\n") == 0);
  for (int i = 0; i < 2 + PRELOAD_WAITS_TO_REGISTER; i++) { /* its worker a watched loop */
    CHECK(strcmp(ask(fd, "get k\r\n", "END\r\n"), k_mc_value) == 0);
    drain_now(err_pipe[0]);
  }
  /* Nobody reads the log now: gets until one gets no answer (the worker
     blocked in write); that one is answered once the pipe is read again. */
  struct timeval short_wait = {0, 200000};
  CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &short_wait, sizeof short_wait) == 0);
  long long blocked_at = 0;
  char buf[256];
  for (int i = 0; i < 10000 && !blocked_at; i++) {
    CHECK(write(fd, "get k\r\n", 7) == 7);
    size_t got = 0;
    while (got < strlen(k_mc_value)) {
      ssize_t r = read(fd, buf + got, sizeof buf - got);
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        blocked_at = now_ms() - 200;
        break;
      }
      CHECK(r > 0);
      got += (size_t)r;
    }
  }
  CHECKF(blocked_at, "memcached's worker never blocked on its log");
  sleep_ms(MC_STALL_MS);
  CHECK(fcntl(err_pipe[0], F_SETFL, 0) == 0);
  pthread_t drain;
  CHECK(pthread_create(&drain, NULL, drain_main, &err_pipe[0]) == 0);
  struct timeval long_wait = {30, 0};
  CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &long_wait, sizeof long_wait) == 0);
  ssize_t r = read(fd, buf, sizeof buf);
  CHECKF(r > 0, "no answer once the log was read again: %zd %s after %lld ms", r, strerror(errno),
         now_ms() - blocked_at);
  char *text = report_with(report, "hang", 1);
  kill(pid, SIGTERM);
  wait_exit(pid, EXIT_MS);
  pthread_join(drain, NULL);
  close(fd);
  free(text);
  text = read_text(report);
  CHECK(text != NULL);
  CHECKF(count_events(text, "hang") == 1, "want exactly one hang:\n%s", text);
  event_t ev;
  find_event(text, "hang", 0, &ev);
  CHECKF(strstr(ev.text, "loop name=\"mc-worker\"") != NULL, "not a worker's loop:\n%s", ev.text);
  char want[64];
  snprintf(want, sizeof want, "thread tid=%d name=\"mc-worker\"", ev.thread);
  CHECKF(strstr(ev.text, want) != NULL, "want %s:\n%s", want, ev.text);
  CHECKF(ev.duration_ms >= MC_STALL_MS, "a hang of %ld ms:\n%s", ev.duration_ms, ev.text);
  const char *chain[] = {"write|__GI___libc_write|__libc_write|__write"};
  expect_chain(&ev, 0, chain, 1);
  event_free(&ev);
  free(text);
}

/* ---- wait_app ----------------------------------------------------------- */

/* Every interposed call gives what it gives without the library: the same
   lines (results, errno, EINTR from a real signal, select's rewritten
   timeout), with the calling thread a watched loop. */
static void case_calls_unchanged(void) {
  g_dir = tempdir_make("preload");
  char *plain = path_in_dir("plain.out"), *under = path_in_dir("under.out");
  char *report = path_in_dir("calls-report.txt"), *log = path_in_dir("calls.log");
  char *argv_plain[] = {WAIT_APP, "calls", NULL};
  CHECK_EQ_INT(wait_exit(start(argv_plain, NULL, plain), EXIT_MS), 0);
  char *argv_under[] = {PERF_RUN, "--sink", "file",   "--sink-path", report, "--log",
                        log,      "--",     WAIT_APP, "calls",       NULL};
  const char *env[] = {"PERF_SDK_STRICT_ENV=1", NULL};
  int status = wait_exit(start(argv_under, env, under), EXIT_MS);
  char *a = read_text(plain), *b = read_text(under);
  CHECKF(status == 0, "under perf-run: exit %d:\n%s", status, b);
  CHECKF(strcmp(a, b) == 0, "without the library:\n%s\nwith it:\n%s", a, b);
  /* The SDK ran (the library did not just pass through): its start line. */
  char *log_text = read_text(log);
  CHECKF(log_text && strstr(log_text, "perf sdk 0.1.0 started") != NULL, "log:\n%s",
         log_text ? log_text : "(none)");
  free(a), free(b), free(log_text);
}

/* Stalls of 400 ms at a 100 ms threshold: one hang on the main thread's
   loop in stall_in_main, one while it spins on zero-timeout polls
   (spin_polling: busy, not idle), one on the worker's loop "app-worker"
   in stall_in_worker; the 600 ms blocking wait is idle: exactly three. */
static void case_loops_found(void) {
  g_dir = tempdir_make("preload");
  char *out = path_in_dir("loops.out"), *report = path_in_dir("loops-report.txt");
  char *argv[] = {PERF_RUN, "--sink", "file",   "--sink-path", report, "--threshold-ms",
                  "100",    "--",     WAIT_APP, "loops",       NULL};
  int status = wait_exit(start(argv, NULL, out), EXIT_MS);
  CHECKF(status == 0, "exit %d:\n%s", status, read_text(out));
  char *text = read_text(report);
  CHECK(text != NULL);
  CHECKF(count_events(text, "hang") == 3, "want exactly three hangs:\n%s", text);
  const char *const loops[] = {"app-worker", "wait_app", "wait_app"};
  const char *const fns[] = {"stall_in_worker", "stall_in_main", "spin_polling"};
  for (size_t i = 0; i < 3; i++) {
    event_t ev;
    find_event(text, "hang", i, &ev);
    char want[64];
    snprintf(want, sizeof want, "loop name=\"%s\"", loops[i]);
    CHECKF(strstr(ev.text, want) != NULL, "hang %zu: want %s:\n%s", i, want, ev.text);
    const char *chain[] = {fns[i]};
    expect_chain(&ev, 0, chain, 1);
    event_free(&ev);
  }
  free(text);
}

/* fork without exec: the child's SDK restarts at its first mark (the
   SDK's fork rule), the forking thread still a loop there: the child's
   400 ms stall is exactly one hang, on the child's thread, in
   stall_in_child; none of the parent's is that stall. */
static void case_fork_child_watched(void) {
  g_dir = tempdir_make("preload");
  char *out = path_in_dir("fork.out"), *report = path_in_dir("fork-report.txt");
  char *argv[] = {PERF_RUN, "--sink", "file",   "--sink-path", report, "--threshold-ms",
                  "100",    "--",     WAIT_APP, "fork",        NULL};
  int status = wait_exit(start(argv, NULL, out), EXIT_MS);
  char *printed = read_text(out);
  CHECKF(status == 0, "exit %d:\n%s", status, printed);
  int child = 0;
  CHECKF(sscanf(printed, "child %d", &child) == 1, "%s", printed);
  char *text = report_with(report, "hang", 1);
  /* Exactly one hang of the child's thread, in stall_in_child. The
     parent's loop is busy in fork() itself, which a sanitizer's build on a
     loaded machine can make longer than the threshold: a hang of the
     parent's, if any, is that, never the child's stall. */
  size_t of_child = 0, hangs = count_events(text, "hang");
  for (size_t i = 0; i < hangs; i++) {
    event_t ev;
    find_event(text, "hang", i, &ev);
    if (ev.thread == child) {
      of_child++;
      const char *chain[] = {"stall_in_child"};
      expect_chain(&ev, 0, chain, 1);
    } else {
      CHECKF(strstr(ev.text, "stall_in_child") == NULL, "the child's stall on thread %d:\n%s",
             ev.thread, ev.text);
    }
    event_free(&ev);
  }
  CHECKF(of_child == 1, "want exactly one hang of the child %d:\n%s", child, text);
  free(text);
  free(printed);
}

/* The continuous CPU profile from the environment alone: a program that
   burns a second of CPU in burn_in_app under perf-run with
   PERF_SDK_CPU_PROFILE_HZ=97 has one profile event (the window the exit
   closed, written by the SDK's exit handler) with burn_in_app in it. */
static void case_continuous_profile(void) {
  g_dir = tempdir_make("preload");
  char *out = path_in_dir("profile.out"), *report = path_in_dir("profile-report.txt");
  char *argv[] = {PERF_RUN, "--sink", "file", "--sink-path", report, "--", WAIT_APP, "burn", NULL};
  const char *env[] = {"PERF_SDK_CPU_PROFILE_HZ=97", "PERF_SDK_EXIT_TIMEOUT_MS=20000",
                       "PERF_SDK_CPU_THRESHOLD_PERCENT=25600", "PERF_SDK_STRICT_ENV=1", NULL};
  int status = wait_exit(start(argv, env, out), EXIT_MS);
  CHECKF(status == 0, "exit %d:\n%s", status, read_text(out));
  char *text = read_text(report);
  CHECK(text != NULL);
  CHECKF(count_events(text, "profile") == 1, "want exactly one profile event:\n%s", text);
  CHECKF(strstr(text, "name=\"burn_in_app\"\n") != NULL, "burn_in_app not in:\n%s", text);
  free(text);
}

/* The library leaves LD_PRELOAD to the program's own children as it was
   before perf-run (another library kept, in place), unless --follow-exec. */
static void case_ld_preload_cleaned(void) {
  g_dir = tempdir_make("preload");
  char *out = path_in_dir("env.out");
  const char *other = "LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6";
  const char *env_other[] = {other, NULL};
#ifdef PERF_TEST_ASAN_RUNTIME
  printf("note: skipped: the sanitizer build sets LD_PRELOAD itself\n");
  return;
#endif
  char *argv[] = {PERF_RUN, "--", WAIT_APP, "env", NULL};
  CHECK_EQ_INT(wait_exit(start(argv, NULL, out), EXIT_MS), 0);
  char *text = read_text(out);
  CHECKF(strcmp(text, "LD_PRELOAD=(unset)\n") == 0, "%s", text);
  free(text);
  CHECK_EQ_INT(wait_exit(start(argv, env_other, out), EXIT_MS), 0);
  text = read_text(out);
  CHECKF(strcmp(text, "LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6\n") == 0, "%s", text);
  free(text);
  char *follow[] = {PERF_RUN, "--follow-exec", "--", WAIT_APP, "env", NULL};
  CHECK_EQ_INT(wait_exit(start(follow, env_other, out), EXIT_MS), 0);
  text = read_text(out);
  char want[4200];
  snprintf(want, sizeof want, "LD_PRELOAD=%s:/lib/x86_64-linux-gnu/libm.so.6\n", PRELOAD_LIB);
  CHECKF(strcmp(text, want) == 0, "want %s got %s", want, text);
  free(text);
}

/* perf-run refuses what the loader would run without LD_PRELOAD: a static
   program, a setuid one; exit 126 and the reason. */
static void case_refuses_static_and_setuid(void) {
  g_dir = tempdir_make("preload");
  char *out = path_in_dir("refused.out");
  char *argv_static[] = {PERF_RUN, "--", WAIT_APP_STATIC, "env", NULL};
  CHECK_EQ_INT(wait_exit(start(argv_static, NULL, out), EXIT_MS), 126);
  char *text = read_text(out);
  CHECKF(strstr(text, "is statically linked") != NULL, "%s", text);
  free(text);
  char *copy = path_in_dir("wait_app_setuid");
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "cp %s %s && chmod 4755 %s", WAIT_APP, copy, copy);
  CHECK(system(cmd) == 0);
  char *argv_suid[] = {PERF_RUN, "--", copy, "env", NULL};
  CHECK_EQ_INT(wait_exit(start(argv_suid, NULL, out), EXIT_MS), 126);
  text = read_text(out);
  CHECKF(strstr(text, "is setuid: the dynamic loader ignores LD_PRELOAD") != NULL, "%s", text);
  free(text);
  char *argv_missing[] = {PERF_RUN, "--", "no-such-program-here", NULL};
  CHECK_EQ_INT(wait_exit(start(argv_missing, NULL, out), EXIT_MS), 127);
  char *argv_usage[] = {PERF_RUN, "--sink", "file", "--", WAIT_APP, "env", NULL};
  CHECK_EQ_INT(wait_exit(start(argv_usage, NULL, out), EXIT_MS), 2);
  text = read_text(out);
  CHECKF(strstr(text, "--sink file needs --sink-path FILE") != NULL, "%s", text);
  free(text);
}

static const test_case_t g_cases[] = {
    TEST_CASE(redis_debug_sleep),
    TEST_CASE(redis_slow_lua),
    TEST_CASE(memcached_worker_stall),
    TEST_CASE(calls_unchanged),
    TEST_CASE(loops_found),
    TEST_CASE(fork_child_watched),
    TEST_CASE(ld_preload_cleaned),
    TEST_CASE(refuses_static_and_setuid),
    TEST_CASE(continuous_profile),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
