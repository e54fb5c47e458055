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
#include "preload_rig.h"
#include "sdk_report.h"
#include "test_util.h"

/* ---- redis -------------------------------------------------------------- */

typedef struct {
  pid_t pid;
  int port;
  int fd;
  char *report;
  char *out;
} server_t;

static void redis_start(server_t *s) {
  s->port = rig_free_port();
  s->report = rig_path("redis-report.txt");
  s->out = rig_path("redis.out");
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
                  (char *)rig_dir(),
                  NULL};
  s->pid = rig_start(argv, NULL, s->out, false);
  s->fd = rig_connect_when_up(s->port, s->pid);
  /* Each PING after the first ends at least one blocking wait of redis's
     loop: a watched loop from the third one on (however many of its waits
     had a zero timeout, a timer being due). */
  for (int i = 0; i < 2 + RIG_WAITS_TO_REGISTER; i++)
    CHECK(strcmp(rig_ask(s->fd, "*1\r\n$4\r\nPING\r\n", "\r\n"), "+PONG\r\n") == 0);
}

static void redis_stop(server_t *s) {
  const char *shutdown = "*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n";
  CHECK(write(s->fd, shutdown, strlen(shutdown)) == (ssize_t)strlen(shutdown));
  int status = rig_wait_exit(s->pid, RIG_EXIT_MS);
  close(s->fd);
  CHECKF(status == 0, "redis-server exited with %d:\n%s", status, read_text(s->out));
}

/* Once the report holds a hang: the server stopped, its report, which
   must hold exactly one hang, that hang in *ev. */
static char *redis_one_hang(server_t *s, event_t *ev) {
  free(rig_report_with(s->report, "hang", 1));
  redis_stop(s);
  char *text = read_text(s->report);
  CHECK(text != NULL);
  CHECKF(count_events(text, "hang") == 1, "want exactly one hang:\n%s", text);
  find_event(text, "hang", 0, ev);
  return text;
}

/* DEBUG SLEEP 1: exactly one hang of the loop "redis-server" (its main
   thread's name), stuck in libc's nanosleep under redis's command path
   (names from redis-server's .dynsym: Debian links it -rdynamic), lasting
   what the client waited. */
static void case_redis_debug_sleep(void) {
  if (!rig_have_program("/usr/bin/redis-server")) return;
  server_t s;
  redis_start(&s);
  long long t0 = now_ms();
  CHECK(strcmp(rig_ask(s.fd, "*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n$1\r\n1\r\n", "\r\n"),
               "+OK\r\n") == 0);
  long long client_ms = now_ms() - t0;
  event_t ev;
  char *text = redis_one_hang(&s, &ev);
  CHECKF(strstr(ev.text, "loop name=\"redis-server\"") != NULL, "not redis's loop:\n%s", ev.text);
  rig_expect_duration_near(&ev, client_ms);
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
  if (!rig_have_program("/usr/bin/redis-server")) return;
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
  char *reply = rig_ask(s.fd, request, "\r\n");
  long long client_ms = now_ms() - t0;
  CHECKF(reply[0] == ':', "EVAL answered %s", reply);
  event_t ev;
  char *text = redis_one_hang(&s, &ev);
  rig_expect_duration_near(&ev, client_ms);
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
  if (!rig_have_program("/usr/bin/memcached")) return;
  char *report = rig_path("mc-report.txt");
  int port = rig_free_port();
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
  rig_note_child(pid);
  close(err_pipe[1]);
  long long deadline = now_ms() + RIG_START_MS;
  int fd;
  while ((fd = rig_connect(port)) < 0) {
    drain_now(err_pipe[0]);
    CHECKF(waitpid(pid, NULL, WNOHANG) == 0, "memcached exited early");
    CHECKF(now_ms() < deadline, "memcached does not listen after %d ms", RIG_START_MS);
    sleep_ms(20);
  }
  CHECK(strcmp(rig_ask(fd, "set k 0 0 1\r\nx\r\n", "\r\n"), "STORED\r\n") == 0);
  for (int i = 0; i < 2 + RIG_WAITS_TO_REGISTER; i++) { /* its worker a watched loop */
    CHECK(strcmp(rig_ask(fd, "get k\r\n", "END\r\n"), k_mc_value) == 0);
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
  char *text = rig_report_with(report, "hang", 1);
  kill(pid, SIGTERM);
  rig_wait_exit(pid, RIG_EXIT_MS);
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
  char *plain = rig_path("plain.out"), *under = rig_path("under.out");
  char *report = rig_path("calls-report.txt"), *log = rig_path("calls.log");
  char *argv_plain[] = {WAIT_APP, "calls", NULL};
  CHECK_EQ_INT(rig_wait_exit(rig_start(argv_plain, NULL, plain, false), RIG_EXIT_MS), 0);
  char *argv_under[] = {PERF_RUN, "--sink", "file",   "--sink-path", report, "--log",
                        log,      "--",     WAIT_APP, "calls",       NULL};
  const char *env[] = {"PERF_SDK_STRICT_ENV=1", NULL};
  int status = rig_wait_exit(rig_start(argv_under, env, under, false), RIG_EXIT_MS);
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
  char *out = rig_path("loops.out"), *report = rig_path("loops-report.txt");
  char *argv[] = {PERF_RUN, "--sink", "file",   "--sink-path", report, "--threshold-ms",
                  "100",    "--",     WAIT_APP, "loops",       NULL};
  int status = rig_wait_exit(rig_start(argv, NULL, out, false), RIG_EXIT_MS);
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
  char *out = rig_path("fork.out"), *report = rig_path("fork-report.txt");
  char *argv[] = {PERF_RUN, "--sink", "file",   "--sink-path", report, "--threshold-ms",
                  "100",    "--",     WAIT_APP, "fork",        NULL};
  int status = rig_wait_exit(rig_start(argv, NULL, out, false), RIG_EXIT_MS);
  char *printed = read_text(out);
  CHECKF(status == 0, "exit %d:\n%s", status, printed);
  int child = 0;
  CHECKF(sscanf(printed, "child %d", &child) == 1, "%s", printed);
  char *text = rig_report_with(report, "hang", 1);
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
  char *out = rig_path("profile.out"), *report = rig_path("profile-report.txt");
  char *argv[] = {PERF_RUN, "--sink", "file", "--sink-path", report, "--", WAIT_APP, "burn", NULL};
  const char *env[] = {"PERF_SDK_CPU_PROFILE_HZ=97", "PERF_SDK_EXIT_TIMEOUT_MS=20000",
                       "PERF_SDK_CPU_THRESHOLD_PERCENT=25600", "PERF_SDK_STRICT_ENV=1", NULL};
  int status = rig_wait_exit(rig_start(argv, env, out, false), RIG_EXIT_MS);
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
  char *out = rig_path("env.out");
  const char *other = "LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6";
  const char *env_other[] = {other, NULL};
#ifdef PERF_TEST_ASAN_RUNTIME
  printf("note: skipped: the sanitizer build sets LD_PRELOAD itself\n");
  return;
#endif
  char *argv[] = {PERF_RUN, "--", WAIT_APP, "env", NULL};
  CHECK_EQ_INT(rig_wait_exit(rig_start(argv, NULL, out, false), RIG_EXIT_MS), 0);
  char *text = read_text(out);
  CHECKF(strcmp(text, "LD_PRELOAD=(unset)\n") == 0, "%s", text);
  free(text);
  CHECK_EQ_INT(rig_wait_exit(rig_start(argv, env_other, out, false), RIG_EXIT_MS), 0);
  text = read_text(out);
  CHECKF(strcmp(text, "LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6\n") == 0, "%s", text);
  free(text);
  char *follow[] = {PERF_RUN, "--follow-exec", "--", WAIT_APP, "env", NULL};
  CHECK_EQ_INT(rig_wait_exit(rig_start(follow, env_other, out, false), RIG_EXIT_MS), 0);
  text = read_text(out);
  char want[4200];
  snprintf(want, sizeof want, "LD_PRELOAD=%s:/lib/x86_64-linux-gnu/libm.so.6\n", PRELOAD_LIB);
  CHECKF(strcmp(text, want) == 0, "want %s got %s", want, text);
  free(text);
}

/* wait_app forks and its child executes a grandchild (a copy of wait_app
   named wait_grandchild) that stalls 1.5 s in stall_in_grandchild. With
   --follow-exec the grandchild runs the SDK of its own: exactly one hang,
   on the grandchild's thread, of the app wait_grandchild (its executable's
   name), LD_PRELOAD as perf-run set it. Without it the grandchild has no
   LD_PRELOAD of ours, no SDK mapped, and no hang is recorded. */
static void case_follow_exec_grandchild(void) {
  char *copy = rig_path("wait_grandchild"), *out = rig_path("spawn.out");
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "cp %s %s", WAIT_APP, copy);
  CHECK(system(cmd) == 0);
#ifdef PERF_TEST_ASAN_RUNTIME
  const char *before = PERF_TEST_ASAN_RUNTIME; /* rig_start preloads it */
#else
  const char *before = NULL;
#endif
  for (int follow = 0; follow < 2; follow++) {
    char *report = rig_path(follow ? "follow-report.txt" : "plain-report.txt");
    char *plain[] = {PERF_RUN, "--sink", "file",   "--sink-path", report, "--threshold-ms",
                     "100",    "--",     WAIT_APP, "spawn",       copy,   NULL};
    char *followed[] = {PERF_RUN, "--sink",        "file", "--sink-path", report,  "--threshold-ms",
                        "100",    "--follow-exec", "--",   WAIT_APP,      "spawn", copy,
                        NULL};
    char **argv = follow ? followed : plain;
    /* The grandchild exits right after its stall: its writer, which names
       the frames on a loaded machine, gets the time it needs at exit. */
    const char *env[] = {"PERF_SDK_EXIT_TIMEOUT_MS=20000", NULL};
    int status = rig_wait_exit(rig_start(argv, env, out, false), RIG_EXIT_MS);
    char *printed = read_text(out);
    CHECKF(status == 0, "exit %d:\n%s", status, printed);
    int grandchild = 0, parent = 0;
    char preload[4200] = "", sdk[8] = "";
    const char *line = strstr(printed, "grandchild ");
    CHECKF(line && sscanf(line, "grandchild %d LD_PRELOAD=%4199s sdk=%7s", &grandchild, preload,
                          sdk) == 3,
           "%s", printed);
    const char *pline = strstr(printed, "parent ");
    CHECKF(pline && sscanf(pline, "parent %d", &parent) == 1 && parent != grandchild, "%s",
           printed);
    char want[4200];
    if (follow)
      snprintf(want, sizeof want, "%s%s%s", PRELOAD_LIB, before ? ":" : "", before ? before : "");
    else
      snprintf(want, sizeof want, "%s", before ? before : "(unset)");
    CHECKF(strcmp(preload, want) == 0, "grandchild's LD_PRELOAD=%s, want %s", preload, want);
    CHECKF(strcmp(sdk, follow ? "yes" : "no") == 0, "grandchild's sdk=%s (follow-exec %d)", sdk,
           follow);
    char *text = follow ? rig_report_with(report, "hang", 1) : read_text(report);
    if (!follow) {
      CHECKF(count_events(text, "hang") == 0, "a hang without --follow-exec:\n%s", text);
    } else {
      CHECKF(count_events(text, "hang") == 1, "want exactly one hang:\n%s", text);
      event_t ev;
      find_event(text, "hang", 0, &ev);
      CHECKF(ev.thread == grandchild, "the hang is of thread %d, the grandchild is %d:\n%s",
             ev.thread, grandchild, ev.text);
      CHECKF(strstr(ev.text, "app name=wait_grandchild ") != NULL, "not the grandchild's app:\n%s",
             ev.text);
      const char *chain[] = {"stall_in_grandchild"};
      expect_chain(&ev, 0, chain, 1);
      event_free(&ev);
    }
    free(text);
    free(printed);
  }
}

/* perf-run refuses what the loader would run without LD_PRELOAD: a static
   program, a setuid one; exit 126 and the reason. */
static void case_refuses_static_and_setuid(void) {
  char *out = rig_path("refused.out");
  char *argv_static[] = {PERF_RUN, "--", WAIT_APP_STATIC, "env", NULL};
  CHECK_EQ_INT(rig_wait_exit(rig_start(argv_static, NULL, out, false), RIG_EXIT_MS), 126);
  char *text = read_text(out);
  CHECKF(strstr(text, "is statically linked") != NULL, "%s", text);
  free(text);
  char *copy = rig_path("wait_app_setuid");
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "cp %s %s && chmod 4755 %s", WAIT_APP, copy, copy);
  CHECK(system(cmd) == 0);
  char *argv_suid[] = {PERF_RUN, "--", copy, "env", NULL};
  CHECK_EQ_INT(rig_wait_exit(rig_start(argv_suid, NULL, out, false), RIG_EXIT_MS), 126);
  text = read_text(out);
  CHECKF(strstr(text, "is setuid: the dynamic loader ignores LD_PRELOAD") != NULL, "%s", text);
  free(text);
  char *argv_missing[] = {PERF_RUN, "--", "no-such-program-here", NULL};
  CHECK_EQ_INT(rig_wait_exit(rig_start(argv_missing, NULL, out, false), RIG_EXIT_MS), 127);
  char *argv_usage[] = {PERF_RUN, "--sink", "file", "--", WAIT_APP, "env", NULL};
  CHECK_EQ_INT(rig_wait_exit(rig_start(argv_usage, NULL, out, false), RIG_EXIT_MS), 2);
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
    TEST_CASE(follow_exec_grandchild),
    TEST_CASE(refuses_static_and_setuid),
    TEST_CASE(continuous_profile),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
