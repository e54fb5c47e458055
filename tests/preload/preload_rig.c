/*
 * preload_rig.c - processes, files, reports and sockets of the preload
 * tests (preload_rig.h). Runs on the test's main thread.
 */
#include "preload_rig.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "tempdir.h"
#include "test_util.h"

typedef struct {
  pid_t pid;
  bool group;
} child_t;

static child_t g_children[16]; /* killed at exit if still there (a failed check exits) */
static size_t g_child_count;

static void kill_children(void) {
  for (size_t i = 0; i < g_child_count; i++) {
    pid_t pid = g_children[i].pid;
    if (g_children[i].group) kill(-pid, SIGKILL); /* exited or not: its workers */
    if (waitpid(pid, NULL, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
    }
  }
}

static void note(pid_t pid, bool group) {
  if (g_child_count == 0) atexit(kill_children);
  if (g_child_count < ARRAY_LEN(g_children)) g_children[g_child_count++] = (child_t){pid, group};
}

void rig_note_child(pid_t pid) {
  note(pid, false);
}

const char *rig_dir(void) {
  return tempdir_make("preload");
}

char *rig_path(const char *name) {
  static char paths[32][256];
  static size_t used;
  CHECK(used < ARRAY_LEN(paths));
  char *p = paths[used++];
  CHECK((size_t)snprintf(p, sizeof paths[0], "%s/%s", rig_dir(), name) < sizeof paths[0]);
  return p;
}

pid_t rig_start(char *const argv[], const char *const *env, const char *out, bool own_group) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    if (own_group) setpgid(0, 0);
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
  if (own_group) setpgid(pid, pid); /* either side first: the group exists before the kill */
  note(pid, own_group);
  return pid;
}

int rig_wait_exit(pid_t pid, int ms) {
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

bool rig_have_program(const char *path) {
  if (access(path, X_OK) == 0) return true;
  CHECKF(!getenv("CI"), "%s is missing (scripts/deps.sh installs it)", path);
  printf("note: skipped: %s is not installed (apt-get install it; scripts/deps.sh)\n", path);
  return false;
}

char *rig_report_with(const char *report, const char *kind, size_t want) {
  long long deadline = now_ms() + RIG_EVENT_MS;
  for (;;) {
    char *text = read_text(report);
    if (text && count_events(text, kind) >= want) return text;
    if (now_ms() > deadline) return text ? text : strdup("");
    free(text);
    sleep_ms(20);
  }
}

void rig_expect_duration_near(const event_t *ev, long long client_ms) {
  CHECKF(ev->duration_ms >= client_ms * 9 / 10 && ev->duration_ms <= client_ms * 11 / 10,
         "hang of %ld ms, the client waited %lld ms:\n%s", ev->duration_ms, client_ms, ev->text);
}

int rig_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  socklen_t len = sizeof a;
  CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

int rig_connect(int port) {
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

int rig_connect_when_up(int port, pid_t pid) {
  long long deadline = now_ms() + RIG_START_MS;
  for (;;) {
    int fd = rig_connect(port);
    if (fd >= 0) return fd;
    CHECKF(waitpid(pid, NULL, WNOHANG) == 0, "the program under perf-run exited early");
    CHECKF(now_ms() < deadline, "nothing listens on port %d after %d ms", port, RIG_START_MS);
    sleep_ms(20);
  }
}

char *rig_ask(int fd, const char *request, const char *end) {
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
