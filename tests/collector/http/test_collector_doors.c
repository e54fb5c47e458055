/*
 * test_collector_doors.c - what a newcomer meets first with the real
 * perf-collector binary: --version, a host name in --listen (localhost
 * resolves; an unresolvable one is named), the log's lines (an RFC 3339
 * timestamp with its UTC offset on each, libmicrohttpd's own error pages
 * reduced to one plain line), and the database's directory (made when its
 * parent exists, else named with the system's reason; not writable: named
 * too), the symbols directory made at start or named (not writable: said,
 * the collector serves). Each case in its own process.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "collector_rig.h"
#include "tempdir.h"

#define START_DEADLINE_S 30.0
#define RUN_DEADLINE_S 30.0
#define LOG_MAX 65536

static char g_log[LOG_MAX]; /* the last run's stdout and stderr */

static void read_log(const char *path) {
  FILE *f = fopen(path, "r");
  CHECKF(f != NULL, "%s: %s", path, strerror(errno));
  size_t len = fread(g_log, 1, sizeof g_log - 1, f);
  g_log[len] = '\0';
  fclose(f);
}

/* perf-collector with args (NULL-ended) run to its end: its exit status,
   its output in g_log. prefix (NULL: none) runs it through a command
   (setpriv, to drop root). */
static int run_to_end(const char *const *prefix, const char *const *args) {
  char *argv[MAX_ARGS];
  size_t n = 0;
  for (size_t i = 0; prefix && prefix[i]; i++)
    argv[n++] = (char *)prefix[i];
  argv[n++] = PERF_COLLECTOR_PATH;
  for (size_t i = 0; args[i] && n < MAX_ARGS - 1; i++)
    argv[n++] = (char *)args[i];
  argv[n] = NULL;
  char out[256];
  snprintf(out, sizeof out, "%s/out.txt", tempdir_make("perf-doors"));
  int status = spawn_wait(spawn(argv, out), RUN_DEADLINE_S);
  read_log(out);
  fprintf(stderr, "perf-collector -> %d:\n%s", status, g_log);
  return status;
}

/* perf-collector serving on a free port of 127.0.0.1 named as host
   ("127.0.0.1" or "localhost"), db in dir, its log in log_path. */
static void start_logged(collector_t *c, const char *host, const char *log_path) {
  memset(c, 0, sizeof *c);
  snprintf(c->dir, sizeof c->dir, "%s", tempdir_make("perf-doors"));
  snprintf(c->db, sizeof c->db, "%s/collector.db", c->dir);
  for (int attempt = 0; attempt < 5; attempt++) {
    char listen[96];
    c->port = free_port();
    snprintf(listen, sizeof listen, "%s:%u", host, (unsigned)c->port);
    snprintf(c->url, sizeof c->url, "http://127.0.0.1:%u", (unsigned)c->port);
    char *argv[] = {PERF_COLLECTOR_PATH, "--listen", listen, "--db", c->db, "--threads", "2", NULL};
    c->pid = g_running = spawn(argv, log_path);
    if (healthy_within(c, START_DEADLINE_S)) return;
    kill(c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
  }
  CHECKF(false, "perf-collector did not start");
}

static void stop_logged(collector_t *c, const char *log_path) {
  CHECK(kill(c->pid, SIGTERM) == 0);
  CHECK_EQ_INT(spawn_wait(c->pid, RUN_DEADLINE_S), 0);
  g_running = 0;
  read_log(log_path);
  fprintf(stderr, "perf-collector's log:\n%s", g_log);
}

static bool matches(const char *text, const char *pattern) {
  regex_t re;
  CHECK(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB | REG_NEWLINE) == 0);
  bool ok = regexec(&re, text, 0, NULL, 0) == 0;
  regfree(&re);
  return ok;
}

/* Every line of g_log starts with an RFC 3339 time and its UTC offset. */
static void every_line_timestamped(void) {
  char copy[LOG_MAX];
  snprintf(copy, sizeof copy, "%s", g_log);
  size_t lines = 0;
  for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save), lines++)
    CHECKF(matches(line, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}"
                         "[+-][0-9]{2}:[0-9]{2} perf-collector: "),
           "not a timestamped log line: '%s'", line);
  CHECK(lines >= 2); /* at least the start and the stop */
}

/* ---- cases -------------------------------------------------------------------- */

static void case_version(void) {
  CHECK_EQ_INT(run_to_end(NULL, (const char *[]){"--version", NULL}), 0);
  CHECKF(strcmp(g_log, "perf-collector " PERF_PROJECT_VERSION "\n") == 0, "%s", g_log);
}

/* localhost:PORT listens on 127.0.0.1, and says both. */
static void case_listen_localhost(void) {
  collector_t c;
  char log_path[256];
  snprintf(log_path, sizeof log_path, "%s/collector.log", tempdir_make("perf-doors"));
  start_logged(&c, "localhost", log_path);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get(&c, "/healthz", r), 200);
  free(r);
  stop_logged(&c, log_path);
  char want[128];
  snprintf(want, sizeof want, "perf-collector: listening on localhost:%u (127.0.0.1:%u), store ",
           (unsigned)c.port, (unsigned)c.port);
  CHECKF(strstr(g_log, want) != NULL, "'%s' not in the log", want);
}

static void case_listen_unknown_host(void) {
  CHECK_EQ_INT(run_to_end(NULL, (const char *[]){"--listen", "no-such-host.invalid:4318", NULL}),
               2);
  CHECKF(strncmp(g_log,
                 "perf-collector: --listen: host 'no-such-host.invalid' has no IPv4 address (",
                 75) == 0,
         "%s", g_log);
  CHECK(strstr(g_log, "\ntry 'perf-collector --help'\n") != NULL);
  CHECK_EQ_INT(run_to_end(NULL, (const char *[]){"--listen", "localhost", NULL}), 2);
  CHECKF(strcmp(g_log, "perf-collector: --listen: 'localhost' is not HOST:PORT (an IPv4 address "
                       "or host name, a port 1-65535)\ntry 'perf-collector --help'\n") == 0,
         "%s", g_log);
}

/* A raw HTTP/1.1 request to 127.0.0.1:port with a header of header_bytes:
   the status of the answer (0: none). */
static long raw_request_status(uint16_t port, size_t header_bytes) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(fd >= 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0);
  struct timeval tv = {.tv_sec = 20};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  size_t len = header_bytes + 128;
  char *req = malloc(len);
  CHECK(req != NULL);
  int head = snprintf(req, len, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ");
  memset(req + head, 'a', header_bytes);
  memcpy(req + head + header_bytes, "\r\n\r\n", 4);
  size_t total = (size_t)head + header_bytes + 4, sent = 0;
  while (sent < total) { /* the server may answer and close before the end */
    ssize_t n = send(fd, req + sent, total - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += (size_t)n;
  }
  free(req);
  char answer[256] = "";
  size_t got = 0;
  for (ssize_t n;
       got < sizeof answer - 1 && (n = recv(fd, answer + got, sizeof answer - 1 - got, 0)) > 0;)
    got += (size_t)n;
  answer[got] = '\0';
  close(fd);
  long status = 0;
  sscanf(answer, "HTTP/1.%*d %ld", &status);
  return status;
}

/* A header larger than a connection's memory: libmicrohttpd answers it
   itself (431) and logs it: one plain line, no HTML. */
static void case_log_lines(void) {
  collector_t c;
  char log_path[256];
  snprintf(log_path, sizeof log_path, "%s/collector.log", tempdir_make("perf-doors"));
  start_logged(&c, "127.0.0.1", log_path);
  CHECK_EQ_INT(raw_request_status(c.port, 256 * 1024), 431);
  stop_logged(&c, log_path);
  every_line_timestamped();
  CHECK(strstr(g_log, "<html>") == NULL && strstr(g_log, "<title>") == NULL);
  CHECKF(matches(g_log, "perf-collector: libmicrohttpd: [^<>\n]*431"),
         "libmicrohttpd's answer not logged as one plain line");
  CHECK(strstr(g_log, "perf-collector: Terminated, stopping\n") != NULL);
}

/* The database's directory is made when its parent exists (mode 0750). */
static void case_db_dir_created(void) {
  collector_t c = {0};
  char log_path[256], state[128];
  const char *dir = tempdir_make("perf-doors");
  snprintf(log_path, sizeof log_path, "%s/collector.log", dir);
  snprintf(state, sizeof state, "%s/state", dir);
  snprintf(c.dir, sizeof c.dir, "%s", dir);
  snprintf(c.db, sizeof c.db, "%s/perf-collector.db", state);
  c.port = free_port();
  snprintf(c.url, sizeof c.url, "http://127.0.0.1:%u", (unsigned)c.port);
  char listen[32];
  snprintf(listen, sizeof listen, "127.0.0.1:%u", (unsigned)c.port);
  char *argv[] = {PERF_COLLECTOR_PATH, "--listen", listen, "--db", c.db, NULL};
  c.pid = g_running = spawn(argv, log_path);
  CHECK(healthy_within(&c, START_DEADLINE_S));
  stop_logged(&c, log_path);
  struct stat st;
  CHECK(stat(state, &st) == 0 && S_ISDIR(st.st_mode));
  CHECK_EQ_INT(st.st_mode & 0777, 0750);
  CHECK(stat(c.db, &st) == 0 && S_ISREG(st.st_mode));
  char want[320];
  snprintf(want, sizeof want, "perf-collector: database directory %s: created\n", state);
  CHECKF(strstr(g_log, want) != NULL, "'%s' not in the log", want);
  /* The symbols directory (by default beside the database) too, at start. */
  snprintf(want, sizeof want, "%s.symbols", c.db);
  CHECK(stat(want, &st) == 0 && S_ISDIR(st.st_mode));
  CHECK_EQ_INT(st.st_mode & 0777, 0755);
  snprintf(want, sizeof want, "perf-collector: symbols directory %s.symbols: created\n", c.db);
  CHECKF(strstr(g_log, want) != NULL, "'%s' not in the log", want);
}

/* A symbols directory whose parent is missing stops the start, named. */
static void case_symbols_dir_missing(void) {
  char db[256], symbols[256], want[600];
  const char *dir = tempdir_make("perf-doors");
  snprintf(db, sizeof db, "%s/collector.db", dir);
  snprintf(symbols, sizeof symbols, "%s/no/symbols", dir);
  CHECK_EQ_INT(run_to_end(NULL, (const char *[]){"--listen", "127.0.0.1:1", "--db", db,
                                                 "--symbols-dir", symbols, NULL}),
               1);
  snprintf(want, sizeof want,
           "perf-collector: symbols directory %s: cannot create it: No such file or directory\n",
           symbols);
  CHECKF(strstr(g_log, want) != NULL, "'%s' not in the log", want);
}

/* Its parent missing: exit 1 naming the directory and the reason. */
static void case_db_dir_missing(void) {
  char db[256], want[512];
  const char *dir = tempdir_make("perf-doors");
  snprintf(db, sizeof db, "%s/no/state/perf-collector.db", dir);
  CHECK_EQ_INT(run_to_end(NULL, (const char *[]){"--listen", "127.0.0.1:1", "--db", db, NULL}), 1);
  snprintf(want, sizeof want,
           "perf-collector: database directory %s/no/state: cannot create it: No such file or "
           "directory\n",
           dir);
  CHECKF(strstr(g_log, want) != NULL, "'%s' not in the log", want);
  CHECK(strstr(g_log, "unable to open database file") == NULL);
  /* A file where the directory should be. */
  snprintf(db, sizeof db, "%s/file/perf-collector.db", dir);
  char file[300];
  snprintf(file, sizeof file, "%s/file", dir);
  FILE *f = fopen(file, "w");
  CHECK(f && fclose(f) == 0);
  CHECK_EQ_INT(run_to_end(NULL, (const char *[]){"--listen", "127.0.0.1:1", "--db", db, NULL}), 1);
  snprintf(want, sizeof want, "perf-collector: database directory %s: not a directory\n", file);
  CHECKF(strstr(g_log, want) != NULL, "'%s' not in the log", want);
}

/* The command that runs the collector as a user who cannot write where
   root can: as root, setpriv to nobody (the temp directory opened to it),
   root's access being unbounded; else none (the test's own user, with a
   directory made read-only). *skip when nobody cannot reach the binary. */
static const char *const *unprivileged(const char *dir, bool *skip) {
  static const char *const as_nobody[] = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                          "--clear-groups", NULL};
  *skip = false;
  if (geteuid() != 0) return NULL;
  CHECK(chmod(dir, 0755) == 0);
  CHECKF(access("/usr/bin/setpriv", X_OK) == 0, "setpriv (util-linux) is needed as root");
  char *exe = strdup(PERF_COLLECTOR_PATH);
  for (char *slash = strrchr(exe, '/'); slash && slash != exe; slash = strrchr(exe, '/')) {
    *slash = '\0';
    struct stat st;
    if (stat(exe, &st) == 0 && !(st.st_mode & S_IXOTH)) {
      printf("note: skipped, %s is not searchable by nobody: the collector cannot run as "
             "nobody\n",
             exe);
      *skip = true;
      break;
    }
  }
  free(exe);
  return as_nobody;
}

/* A database directory this user may not write: named with EACCES. */
static void case_db_dir_not_writable(void) {
  char ro[256], db[300], want[512];
  const char *dir = tempdir_make("perf-doors");
  snprintf(ro, sizeof ro, "%s/readonly", dir);
  CHECK(mkdir(ro, 0755) == 0);
  snprintf(db, sizeof db, "%s/perf-collector.db", ro);
  bool skip;
  const char *const *prefix = unprivileged(dir, &skip);
  if (skip) return;
  if (!prefix) CHECK(chmod(ro, 0555) == 0);
  CHECK_EQ_INT(run_to_end(prefix, (const char *[]){"--listen", "127.0.0.1:1", "--db", db, NULL}),
               1);
  snprintf(want, sizeof want,
           "perf-collector: database directory %s: not writable: Permission denied\n", ro);
  CHECKF(strstr(g_log, want) != NULL, "'%s' not in the log", want);
  chmod(ro, 0755);
}

/* A symbols directory this user may not write: said once, and the
   collector serves (its debug files can still be read). */
static void case_symbols_dir_not_writable(void) {
  char data[128], symbols[128], log_path[256], want[700];
  collector_t c = {0};
  const char *dir = tempdir_make("perf-doors");
  snprintf(data, sizeof data, "%s/data", dir);
  snprintf(symbols, sizeof symbols, "%s/symbols", dir);
  snprintf(log_path, sizeof log_path, "%s/collector.log", dir);
  CHECK(mkdir(data, 0755) == 0 && mkdir(symbols, 0755) == 0);
  bool skip;
  const char *const *prefix = unprivileged(dir, &skip);
  if (skip) return;
  if (prefix)
    CHECK(chown(data, 65534, 65534) == 0);
  else
    CHECK(chmod(symbols, 0555) == 0);
  snprintf(c.db, sizeof c.db, "%s/collector.db", data);
  c.port = free_port();
  snprintf(c.url, sizeof c.url, "http://127.0.0.1:%u", (unsigned)c.port);
  char listen[32];
  snprintf(listen, sizeof listen, "127.0.0.1:%u", (unsigned)c.port);
  char *argv[MAX_ARGS];
  size_t n = 0;
  for (size_t i = 0; prefix && prefix[i]; i++)
    argv[n++] = (char *)prefix[i];
  const char *args[] = {PERF_COLLECTOR_PATH, "--listen", listen, "--db", c.db,
                        "--symbols-dir",     symbols,    NULL};
  for (size_t i = 0; i < ARRAY_LEN(args); i++)
    argv[n++] = (char *)args[i];
  c.pid = g_running = spawn(argv, log_path);
  CHECK(healthy_within(&c, START_DEADLINE_S));
  stop_logged(&c, log_path);
  snprintf(want, sizeof want,
           "perf-collector: symbols directory %s: not writable: Permission denied (debug files "
           "are read from it; POST /v1/symbols and debuginfod's downloads fail)\n",
           symbols);
  CHECKF(strstr(g_log, want) != NULL, "'%s' not in the log", want);
  chmod(symbols, 0755);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(version),
      TEST_CASE(listen_localhost),
      TEST_CASE(listen_unknown_host),
      TEST_CASE(log_lines),
      TEST_CASE(db_dir_created),
      TEST_CASE(db_dir_missing),
      TEST_CASE(db_dir_not_writable),
      TEST_CASE(symbols_dir_missing),
      TEST_CASE(symbols_dir_not_writable),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
