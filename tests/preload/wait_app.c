/*
 * wait_app.c - a program that knows nothing of the SDK (not linked with
 * it), run by test_preload.c with and without libperfsdk-preload.so:
 *
 *   wait_app calls   every interposed wait with timeouts, ready fds, bad
 *                    arguments and a real signal (EINTR): one line per
 *                    call with its result, errno and what it changed;
 *                    exit 0 when each is what Linux gives
 *   wait_app loops   the main thread and a worker ("app-worker") wait,
 *                    then each stalls 400 ms on the CPU (stall_in_main,
 *                    stall_in_worker), the main thread also spins 400 ms
 *                    on zero-timeout polls (spin_polling) and waits 600
 *                    ms (idle)
 *   wait_app fork    the main thread waits, forks; the child (no exec)
 *                    waits, stalls 400 ms (stall_in_child), waits, exits
 *   wait_app env     prints LD_PRELOAD ("(unset)" when it is not set)
 *   wait_app spawn PROGRAM
 *                    the main thread waits, forks; the child executes
 *                    `PROGRAM grandchild` (a copy of wait_app under
 *                    another name) and the parent waits in poll for its
 *                    end (one wait: never a loop), then prints
 *                    "parent <pid>"
 *   wait_app grandchild
 *                    prints "grandchild <pid> LD_PRELOAD=<value>
 *                    sdk=<yes|no>" (sdk: a libperfsdk library is mapped),
 *                    waits, stalls 1.5 s (stall_in_grandchild), waits,
 *                    exits
 *   wait_app burn    burns 1 s of CPU in burn_in_app, then exits
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STALL_MS 400
#define GRANDCHILD_STALL_MS 1500 /* its SDK just started: its monitor may be slow to run */
#define SIGNAL_AFTER_MS 100
#define LONG_WAIT_MS 5000

static int g_failures;
static pthread_t g_main;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void report(const char *what, int result, int err, int want_result, int want_err) {
  bool ok = result == want_result && (want_result != -1 || err == want_err);
  printf("%s result=%d errno=%s%s\n", what, result, result == -1 ? strerror(err) : "-",
         ok ? "" : " UNEXPECTED");
  if (!ok) g_failures++;
}

/* The call first, then errno (a function's arguments have no order). */
#define CALL(what, call, want_result, want_err)                                                    \
  do {                                                                                             \
    int r_ = (call);                                                                               \
    int e_ = errno;                                                                                \
    report(what, r_, e_, want_result, want_err);                                                   \
  } while (0)

static void on_signal(int sig) {
  (void)sig;
}

static void *send_signal_later(void *arg) {
  (void)arg;
  struct timespec ts = {0, SIGNAL_AFTER_MS * 1000000L};
  nanosleep(&ts, NULL);
  pthread_kill(g_main, SIGUSR1);
  return NULL;
}

/* A real SIGUSR1 (no SA_RESTART) lands during the wait `call`. */
#define EXPECT_EINTR(name, call)                                                                   \
  do {                                                                                             \
    pthread_t killer;                                                                              \
    pthread_create(&killer, NULL, send_signal_later, NULL);                                        \
    long long t0 = now_ms();                                                                       \
    int r = (call);                                                                                \
    int e = errno;                                                                                 \
    long long took = now_ms() - t0;                                                                \
    pthread_join(killer, NULL);                                                                    \
    report(name " interrupted", r, e, -1, EINTR);                                                  \
    if (took >= LONG_WAIT_MS) {                                                                    \
      printf("%s waited its whole timeout UNEXPECTED\n", name);                                    \
      g_failures++;                                                                                \
    }                                                                                              \
  } while (0)

static int calls(void) {
  g_main = pthread_self();
  struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART */
  sigaction(SIGUSR1, &sa, NULL);
  int fds[2];
  if (pipe(fds) != 0) return 2;
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN}, out[4];
  epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev);
  struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
  fd_set set;
  struct timespec ts10 = {0, 10000000}, ts_long = {LONG_WAIT_MS / 1000, 0};
  sigset_t none;
  sigemptyset(&none);

  /* Timeouts: nothing ready; errno left as it was (EDOM). */
  errno = EDOM;
  int r = epoll_wait(ep, out, 4, 10);
  int e = errno;
  report("epoll_wait timeout", r, e, 0, 0);
  report("errno kept", e, 0, EDOM, 0);
  CALL("epoll_pwait timeout", epoll_pwait(ep, out, 4, 10, &none), 0, 0);
  CALL("epoll_pwait2 timeout", epoll_pwait2(ep, out, 4, &ts10, &none), 0, 0);
  CALL("poll timeout", poll(&pfd, 1, 10), 0, 0);
  CALL("ppoll timeout", ppoll(&pfd, 1, &ts10, &none), 0, 0);
  FD_ZERO(&set);
  FD_SET(fds[0], &set);
  struct timeval tv = {0, 10000};
  CALL("select timeout", select(fds[0] + 1, &set, NULL, NULL, &tv), 0, 0);
  report("select rewrote its timeout to", (int)(tv.tv_sec * 1000000 + tv.tv_usec), 0, 0, 0);
  FD_ZERO(&set);
  FD_SET(fds[0], &set);
  CALL("pselect timeout", pselect(fds[0] + 1, &set, NULL, NULL, &ts10, &none), 0, 0);

  /* Ready: the fd and its events as libc gives them. */
  if (write(fds[1], "x", 1) != 1) return 2;
  CALL("epoll_wait ready", epoll_wait(ep, out, 4, 1000), 1, 0);
  report("epoll_wait event", (int)out[0].events, 0, EPOLLIN, 0);
  CALL("poll ready", poll(&pfd, 1, 1000), 1, 0);
  report("poll revents", pfd.revents, 0, POLLIN, 0);
  CALL("poll zero timeout", poll(&pfd, 1, 0), 1, 0);
  FD_ZERO(&set);
  FD_SET(fds[0], &set);
  CALL("select ready", select(fds[0] + 1, &set, NULL, NULL, NULL), 1, 0);
  char c;
  if (read(fds[0], &c, 1) != 1) return 2;

  /* Bad arguments: libc's errors. */
  CALL("epoll_wait bad fd", epoll_wait(-1, out, 4, 10), -1, EBADF);
  CALL("epoll_wait bad count", epoll_wait(ep, out, 0, 10), -1, EINVAL);
  /* More fds than RLIMIT_NOFILE allows, all of them readable memory (a
     sanitizer's poll reads the array before the call). */
  struct rlimit lim;
  getrlimit(RLIMIT_NOFILE, &lim);
  struct rlimit low = {.rlim_cur = 64, .rlim_max = lim.rlim_max};
  setrlimit(RLIMIT_NOFILE, &low);
  struct pollfd many[65];
  for (size_t i = 0; i < 65; i++)
    many[i] = (struct pollfd){.fd = fds[0], .events = POLLIN};
  CALL("poll too many fds", poll(many, 65, 10), -1, EINVAL);
  setrlimit(RLIMIT_NOFILE, &lim);
  CALL("select bad nfds", select(-1, NULL, NULL, NULL, &tv), -1, EINVAL);

  /* A real signal: EINTR, at once. */
  EXPECT_EINTR("epoll_wait", epoll_wait(ep, out, 4, LONG_WAIT_MS));
  EXPECT_EINTR("epoll_pwait", epoll_pwait(ep, out, 4, LONG_WAIT_MS, &none));
  EXPECT_EINTR("epoll_pwait2", epoll_pwait2(ep, out, 4, &ts_long, &none));
  EXPECT_EINTR("poll", poll(&pfd, 1, LONG_WAIT_MS));
  EXPECT_EINTR("ppoll", ppoll(&pfd, 1, &ts_long, &none));
  FD_ZERO(&set);
  FD_SET(fds[0], &set);
  struct timeval tv_long = {LONG_WAIT_MS / 1000, 0};
  EXPECT_EINTR("select", select(fds[0] + 1, &set, NULL, NULL, &tv_long));
  FD_ZERO(&set);
  FD_SET(fds[0], &set);
  EXPECT_EINTR("pselect", pselect(fds[0] + 1, &set, NULL, NULL, &ts_long, &none));
  printf("failures=%d\n", g_failures);
  return g_failures ? 1 : 0;
}

static volatile unsigned long g_sink;

static void spin_ms(int ms) {
  long long end = now_ms() + ms;
  while (now_ms() < end)
    g_sink++;
}

__attribute__((noinline, noipa)) static void stall_in_main(void) {
  spin_ms(STALL_MS);
}

__attribute__((noinline, noipa)) static void stall_in_worker(void) {
  spin_ms(STALL_MS);
}

__attribute__((noinline, noipa)) static void spin_polling(int fd) {
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  long long end = now_ms() + STALL_MS;
  while (now_ms() < end)
    poll(&pfd, 1, 0);
}

__attribute__((noinline, noipa)) static void stall_in_child(void) {
  spin_ms(STALL_MS);
}

/* Waits for the end of `pid`, whose copy of the pipe's write end closes
   with it, in poll (a loop's idle wait); its exit status. */
static int wait_in_poll(pid_t pid, int gone) {
  struct pollfd end = {.fd = gone, .events = POLLIN};
  while (poll(&end, 1, 30000) == 0 || !(end.revents & POLLHUP)) {
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* A second of this thread's CPU time, however long it takes. */
__attribute__((noinline, noipa)) static void burn_in_app(void) {
  struct timespec ts;
  long long used = 0;
  while (used < 1000000000LL) {
    for (int i = 0; i < 4096; i++)
      g_sink = g_sink * 6364136223846793005UL + 1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    used = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
  }
}

static int fork_child(void) {
  int fds[2], gone[2];
  if (pipe(fds) != 0 || pipe(gone) != 0) return 2;
  struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
  for (int i = 0; i < 5; i++)
    poll(&pfd, 1, 1);
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    close(gone[0]);
    for (int i = 0; i < 5; i++)
      poll(&pfd, 1, 1);
    stall_in_child();
    poll(&pfd, 1, 1);
    exit(0); /* exit, not _exit: the child's SDK writes what it recorded */
  }
  /* The parent's loop waits (idle) for the child's end. */
  close(gone[1]);
  int status = wait_in_poll(pid, gone[0]);
  printf("child %d\n", (int)pid);
  poll(&pfd, 1, 1);
  return status;
}

__attribute__((noinline, noipa)) static void stall_in_grandchild(void) {
  spin_ms(GRANDCHILD_STALL_MS);
}

/* The parent never becomes a loop (one wait): its fork, slow under a
   sanitizer on a loaded machine, is no hang of its own. */
static int spawn(const char *program) {
  int gone[2];
  if (pipe(gone) != 0) return 2;
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    close(gone[0]);
    execl(program, program, "grandchild", (char *)NULL);
    _exit(127);
  }
  close(gone[1]);
  int status = wait_in_poll(pid, gone[0]);
  printf("parent %d\n", (int)getpid());
  return status;
}

/* A libperfsdk library (the preload one or the SDK) in this process. */
static bool sdk_mapped(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f))
    found = strstr(line, "/libperfsdk") != NULL;
  fclose(f);
  return found;
}

static int grandchild(void) {
  const char *v = getenv("LD_PRELOAD");
  printf("grandchild %d LD_PRELOAD=%s sdk=%s\n", (int)getpid(), v ? v : "(unset)",
         sdk_mapped() ? "yes" : "no");
  int fds[2];
  if (pipe(fds) != 0) return 2;
  struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
  for (int i = 0; i < 5; i++)
    poll(&pfd, 1, 1);
  stall_in_grandchild();
  poll(&pfd, 1, 1);
  return 0; /* from main: the SDK, if any, writes what it recorded */
}

static void *worker_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "app-worker");
  int ep = epoll_create1(0);
  struct epoll_event out[1];
  for (int i = 0; i < 5; i++)
    epoll_wait(ep, out, 1, 1);
  stall_in_worker();
  epoll_wait(ep, out, 1, 1);
  close(ep);
  return NULL;
}

static int loops(void) {
  /* The worker first: the main thread joining it while a loop would be
     a hang of its own (busy, blocked in pthread_join). */
  pthread_t worker;
  if (pthread_create(&worker, NULL, worker_main, NULL) != 0) return 2;
  pthread_join(worker, NULL);
  int fds[2];
  if (pipe(fds) != 0) return 2;
  struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
  for (int i = 0; i < 5; i++)
    poll(&pfd, 1, 1);
  stall_in_main();
  poll(&pfd, 1, 1);
  spin_polling(fds[0]);
  poll(&pfd, 1, 600); /* idle: no hang however long */
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 2 && strcmp(argv[1], "calls") == 0) return calls();
  if (argc == 2 && strcmp(argv[1], "loops") == 0) return loops();
  if (argc == 2 && strcmp(argv[1], "fork") == 0) return fork_child();
  if (argc == 2 && strcmp(argv[1], "burn") == 0) {
    burn_in_app();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "env") == 0) {
    const char *v = getenv("LD_PRELOAD");
    printf("LD_PRELOAD=%s\n", v ? v : "(unset)");
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "spawn") == 0) return spawn(argv[2]);
  if (argc == 2 && strcmp(argv[1], "grandchild") == 0) return grandchild();
  fprintf(stderr, "usage: wait_app calls|loops|fork|env|spawn PROGRAM|grandchild|burn\n");
  return 2;
}
