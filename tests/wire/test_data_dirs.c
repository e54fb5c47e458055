/*
 * test_data_dirs.c - what the SDK trusts about its directories and
 * descriptors (docs/operations.md, "Security"), with real files, real
 * processes and the tests' HTTP server:
 * - links planted under the SDK's names (spool/drops.new, spool/LOCK, a
 *   hang marker's temporary file, sink_path, a journal) are never
 *   followed: their targets keep their content and mtime, and the log says
 *   what failed;
 * - with umask 000 the SDK's files are 0600 and its directories 0700;
 * - a data_dir or spool directory writable by group or others (without
 *   the sticky bit), or another user's (root only), is refused at init
 *   with PERF_E_INVALID_CONFIG and a log line naming it and why;
 * - a child that chroots into an empty directory after init (root only)
 *   still gets every hang into its report and batch records (file sink) or
 *   its spool (http sink), and nothing is created inside the jail;
 * - a child that closes every descriptor from 3 up after init and opens
 *   files of its own (which take the SDK's old numbers) gets its files
 *   back with exactly its own bytes, and every hang delivered (file sink,
 *   http sink); also when it then closes two of the SDK's descriptors so
 *   that data_dir, opened again, gets the spool directory's old number:
 *   the spool keeps its batches in its own directory;
 * - a disk full for a few seconds (a small tmpfs, root only) loses none of
 *   the events already journaled: delivered once space returns.
 * Each case runs in its own process: `test_data_dirs <case>`.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "http_server.h"
#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/journal.h"
#include "sdk/wire/spool.h"
#include "sdk_log.h"
#include "sdk_util.h"
#include "tempdir.h"
#include "test_util.h"

#define PATH_LEN 256
#define WAIT_MS 30000
#define DECODE_MAX (64u << 20)
#define HANGS 3
#define APP_FILES 12
#define SECRET "a file of root's, outside the data_dir\n"

static char g_dir[64];

static void make_dir(void) {
  snprintf(g_dir, sizeof g_dir, "%s", tempdir_make("perf-dirs"));
}

static void path_in(char *out, const char *dir, const char *name) {
  CHECK(snprintf(out, PATH_LEN, "%s/%s", dir, name) < PATH_LEN);
}

/* Short hangs; sink http to `endpoint`, or with endpoint NULL the file
   sink <dir>/report.txt; data in <dir>/data. */
static void config(perf_sdk_config_t *cfg, const char *endpoint, char *data_dir, char *report) {
  sdk_config_short_hangs(cfg);
  cfg->app_name = "dirs-test";
  path_in(data_dir, g_dir, "data");
  cfg->data_dir = data_dir;
  if (endpoint) {
    cfg->sink = PERF_SINK_HTTP;
    cfg->endpoint = endpoint;
    cfg->api_key = "k";
  } else {
    path_in(report, g_dir, "report.txt");
    cfg->sink = PERF_SINK_FILE;
    cfg->sink_path = report;
  }
  cfg->batch_max_delay_ms = 100;
  cfg->backoff_base_ms = 50;
  cfg->backoff_cap_ms = 200;
  cfg->request_timeout_ms = 2000;
  cfg->log_fn = sdk_log_keep;
}

/* A file outside the data_dir with known content and an mtime long past:
   any write through a link shows. */
static void make_secret(char *out, const char *name) {
  path_in(out, g_dir, name);
  int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0);
  CHECK(write(fd, SECRET, strlen(SECRET)) == (ssize_t)strlen(SECRET));
  close(fd);
  struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
  CHECK(utimensat(AT_FDCWD, out, old, 0) == 0);
}

static void check_secret(const char *path) {
  char *text = read_text(path);
  CHECKF(text && strcmp(text, SECRET) == 0, "%s now holds: %s", path, text ? text : "(nothing)");
  free(text);
  struct stat st;
  CHECK(stat(path, &st) == 0);
  CHECKF(st.st_mtime == 1000000000, "%s was modified (mtime %lld)", path, (long long)st.st_mtime);
}

static void check_mode(const char *path, unsigned mode, bool dir) {
  struct stat st;
  CHECKF(lstat(path, &st) == 0, "%s: %s", path, strerror(errno));
  CHECKF(dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode), "%s: not a %s", path,
         dir ? "directory" : "regular file");
  CHECKF((st.st_mode & 07777) == mode, "%s: mode %04o, expected %04o", path,
         (unsigned)(st.st_mode & 07777), mode);
}

static void mkdir_mode(const char *path, unsigned mode) {
  CHECKF(mkdir(path, 0700) == 0 || errno == EEXIST, "%s: %s", path, strerror(errno));
  CHECK(chmod(path, mode) == 0);
}

static size_t count_text(const char *text, const char *what) {
  size_t n = 0;
  for (const char *p = text; p && (p = strstr(p, what)) != NULL; p += strlen(what))
    n++;
  return n;
}

/* Hang events in the batch files of a spool directory (the file sink's
   batch records). */
static size_t count_batch_hangs(const char *dir) {
  DIR *d = opendir(dir);
  CHECKF(d != NULL, "%s: %s", dir, strerror(errno));
  size_t hangs = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    if (n < 6 || strcmp(de->d_name + n - 6, ".batch") != 0) continue;
    char path[PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    uint8_t *payload = NULL;
    size_t len = 0;
    const char *reason = NULL;
    CHECKF(perf__spool_read_file(path, NULL, NULL, &payload, &len, &reason) == PERF_OK, "%s: %s",
           path, reason ? reason : strerror(errno));
    Perf__V1__Batch *b = NULL;
    CHECK_EQ_INT(perf__batch_decode_stored(payload, len, DECODE_MAX, &b), PERF_OK);
    for (size_t e = 0; e < b->n_events; e++)
      hangs += b->events[e]->kind == PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
    perf__v1__batch__free_unpacked(b, NULL);
    free(payload);
  }
  closedir(d);
  return hangs;
}

/* Hang events the server received, batches deduplicated by id. */
static size_t count_server_hangs(http_server_t *srv) {
  uint8_t ids[256][16];
  size_t n_ids = 0, hangs = 0;
  for (size_t i = 0; i < http_server_request_count(srv); i++) {
    http_request_t q;
    CHECK(http_server_request(srv, i, &q));
    Perf__V1__Batch *b = NULL;
    CHECK_EQ_INT(perf__batch_decode_stored(q.body, q.body_len, DECODE_MAX, &b), PERF_OK);
    bool seen = false;
    for (size_t k = 0; k < n_ids && !seen; k++)
      seen = memcmp(ids[k], b->batch_id.data, 16) == 0;
    if (!seen && n_ids < ARRAY_LEN(ids)) {
      memcpy(ids[n_ids++], b->batch_id.data, 16);
      for (size_t e = 0; e < b->n_events; e++)
        hangs += b->events[e]->kind == PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
    }
    perf__v1__batch__free_unpacked(b, NULL);
    http_request_free(&q);
  }
  return hangs;
}

/* The watched loop busy for 120 ms (threshold 20 ms): one hang, waited
   for until it is recorded. */
static void one_hang(uint64_t recorded_before) {
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  sleep_ms(120);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  perf_sdk_stats_t st;
  SDK_WAIT_FOR_STATS(st, st.events_recorded >= recorded_before + 1, WAIT_MS, 5);
}

static bool skip_unless_root(const char *why) {
  if (geteuid() == 0) return false;
  printf("note: skipped, not root: %s\n", why);
  return true;
}

/* Run fn in a forked child; it passes by returning. */
static void in_child(void (*fn)(void)) {
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    fn();
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
}

/* ---- links are never followed ------------------------------------------- */

static int count_record(void *ctx, const uint8_t *payload, size_t len) {
  (void)ctx, (void)payload, (void)len;
  return PERF_OK;
}

/* spool/drops.new planted as a link to a file of root's: the drop counts
   saved at shutdown go into a new file of the SDK's, never through it. */
static void case_drops_new_link_not_followed(void) {
  make_dir();
  char data_dir[PATH_LEN], report[PATH_LEN], spool[PATH_LEN], link[PATH_LEN], secret[PATH_LEN],
      drops[PATH_LEN];
  perf_sdk_config_t cfg;
  config(&cfg, "http://127.0.0.1:1", data_dir, report);
  cfg.max_events_per_hour = 1;
  path_in(spool, data_dir, "spool");
  mkdir_mode(data_dir, 0700);
  mkdir_mode(spool, 0700);
  make_secret(secret, "secret");
  path_in(link, spool, "drops.new");
  CHECK(symlink(secret, link) == 0);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("kept"), PERF_OK);
  perf_sdk_flush(300); /* its batch into the spool; nothing listens at port 1 */
  perf_sdk_stats_t st;
  SDK_WAIT_FOR_STATS(st, st.batches_written == 1, WAIT_MS, 5);
  /* No batch carries this drop: its count is saved at shutdown. */
  CHECK_EQ_INT(perf_sdk_capture_now("rate limited"), PERF_E_RATE_LIMITED);
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_OK);
  check_secret(secret);
  path_in(drops, spool, "drops");
  check_mode(drops, 0600, false);
  char *text = read_text(drops);
  CHECKF(text && strstr(text, "rate_limited 1\n"), "drops: %s", text ? text : "(none)");
  free(text);
}

/* spool/LOCK planted as a link: nothing is created at its target, the
   spool is not opened, and the log and flush say so. */
static void case_lock_link_not_followed(void) {
  make_dir();
  char data_dir[PATH_LEN], report[PATH_LEN], spool[PATH_LEN], link[PATH_LEN], target[PATH_LEN];
  perf_sdk_config_t cfg;
  config(&cfg, "http://127.0.0.1:1", data_dir, report);
  path_in(spool, data_dir, "spool");
  mkdir_mode(data_dir, 0700);
  mkdir_mode(spool, 0700);
  path_in(target, g_dir, "created-by-root");
  path_in(link, spool, "LOCK");
  CHECK(symlink(target, link) == 0);
  sdk_log_clear();
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("no spool"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_E_SINK_FAILED);
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_OK);
  CHECKF(access(target, F_OK) != 0, "%s was created through the link", target);
  CHECKF(strstr(g_log, "LOCK") && strstr(g_log, "Too many levels of symbolic links"), "log: %s",
         g_log);
}

/* sink_path is a link to a file of root's: the report is not appended to
   it; the event is dropped, counted and logged. */
/* sink_path names a link to `secret` that another user could have
   planted: the report is never written through it. */
static void sink_link_refused(const char *secret, const char *report) {
  perf_sdk_config_t cfg;
  char data_dir[PATH_LEN], unused[PATH_LEN];
  config(&cfg, NULL, data_dir, unused);
  cfg.sink_path = report;
  sdk_log_clear();
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("into the link"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK); /* the batch record is written */
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_OK);
  check_secret(secret);
  CHECK_EQ_INT(st.events_dropped_sink, 1);
  CHECK_EQ_INT(st.events_written, 0);
  CHECKF(strstr(g_log, report) && strstr(g_log, "Too many levels of symbolic links"), "log: %s",
         g_log);
}

/* The link is this user's, but its directory is writable by others (no
   sticky bit): anyone could have replaced it. */
static void case_sink_path_link_in_shared_dir_not_followed(void) {
  make_dir();
  char secret[PATH_LEN], shared[PATH_LEN], report[PATH_LEN];
  make_secret(secret, "secret");
  path_in(shared, g_dir, "shared");
  mkdir_mode(shared, 0777);
  path_in(report, shared, "report.txt");
  CHECK(symlink(secret, report) == 0);
  sink_link_refused(secret, report);
}

/* The link belongs to another user, in this user's private directory. */
static void case_sink_path_link_of_other_user_not_followed(void) {
  if (skip_unless_root("a link owned by another user")) return;
  make_dir();
  char secret[PATH_LEN], report[PATH_LEN];
  make_secret(secret, "secret");
  path_in(report, g_dir, "report.txt");
  CHECK(symlink(secret, report) == 0);
  CHECK(lchown(report, 65534, 65534) == 0); /* nobody */
  sink_link_refused(secret, report);
}

/* A link this user made in their own directory (as /dev/stderr is root's
   in root's /dev) is the user's choice: the report goes to its target. */
static void case_sink_path_own_link_followed(void) {
  make_dir();
  char target[PATH_LEN], report[PATH_LEN], data_dir[PATH_LEN], unused[PATH_LEN];
  path_in(target, g_dir, "kept-report.txt");
  int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0);
  close(fd);
  path_in(report, g_dir, "report.txt");
  CHECK(symlink(target, report) == 0);
  perf_sdk_config_t cfg;
  config(&cfg, NULL, data_dir, unused);
  cfg.sink_path = report;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("through my link"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_OK);
  CHECK_EQ_INT(st.events_written, 1);
  CHECK_EQ_INT(st.events_dropped_sink, 0);
  char *text = read_text(target);
  CHECKF(text && strstr(text, "through my link"), "%s holds: %s", target, text ? text : "");
  free(text);
  struct stat ls;
  CHECK(lstat(report, &ls) == 0 && S_ISLNK(ls.st_mode)); /* still the link */
}

/* sink_path=/dev/stderr, the way people watch a report: root's link in
   root's /dev, followed to the descriptor 2 of the process. */
static void stderr_child(void) {
  char data_dir[PATH_LEN], unused[PATH_LEN], err_path[PATH_LEN];
  path_in(err_path, g_dir, "stderr.txt");
  int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0 && dup2(fd, 2) == 2);
  close(fd);
  perf_sdk_config_t cfg;
  config(&cfg, NULL, data_dir, unused);
  cfg.sink_path = "/dev/stderr";
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("to stderr"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_OK);
  CHECK_EQ_INT(st.events_written, 1);
}

static void case_sink_path_dev_stderr(void) {
  make_dir();
  in_child(stderr_child);
  char err_path[PATH_LEN];
  path_in(err_path, g_dir, "stderr.txt");
  char *text = read_text(err_path);
  CHECKF(text && strstr(text, "to stderr"), "stderr held: %s", text ? text : "");
  free(text);
}

/* The hang marker's temporary name planted as a link once the SDK runs:
   the marker is made as a new file of the SDK's; the link's target is
   untouched. */
static void marker_child(void) {
  char data_dir[PATH_LEN], report[PATH_LEN], link[PATH_LEN], secret[PATH_LEN], name[64];
  perf_sdk_config_t cfg;
  config(&cfg, NULL, data_dir, report);
  path_in(secret, g_dir, "secret");
  snprintf(name, sizeof name, "hang-%d.tmp", (int)getpid());
  path_in(link, data_dir, name);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK); /* the writer has started */
  CHECK(symlink(secret, link) == 0);
  /* Hung until the marker is on disk (the writer keeps only the latest
     post: a short hang may end before it writes one). */
  char marker[PATH_LEN];
  snprintf(name, sizeof name, "hang-%d.marker", (int)getpid());
  path_in(marker, data_dir, name);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  long long deadline = now_ms() + WAIT_MS;
  struct stat st;
  while (lstat(marker, &st) != 0) {
    CHECKF(now_ms() < deadline, "no marker %s after %d ms", marker, WAIT_MS);
    sleep_ms(5);
  }
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600);
  perf_sdk_stats_t stats;
  SDK_WAIT_FOR_STATS(stats, stats.events_recorded == 1, WAIT_MS, 5);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(2000), PERF_OK);
}

static void case_marker_tmp_link_not_followed(void) {
  make_dir();
  char data_dir[PATH_LEN], report[PATH_LEN], secret[PATH_LEN];
  path_in(data_dir, g_dir, "data");
  mkdir_mode(data_dir, 0700);
  make_secret(secret, "secret");
  in_child(marker_child);
  check_secret(secret);
  path_in(report, g_dir, "report.txt");
  char *text = read_text(report);
  CHECK_EQ_INT(count_text(text, "event hang "), 1);
  free(text);
}

/* A journal's name planted as a link (the wire's journal API with a known
   batch id: the SDK's ids are random): never created, read or removed
   through it. */
static void case_journal_link_not_followed(void) {
  make_dir();
  char spool[PATH_LEN], secret[PATH_LEN], link[PATH_LEN], name[64];
  path_in(spool, g_dir, "spool");
  mkdir_mode(spool, 0700);
  make_secret(secret, "secret");
  uint8_t id[16];
  for (int i = 0; i < 16; i++)
    id[i] = (uint8_t)(0xa0 + i);
  snprintf(name, sizeof name, "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf.journal");
  path_in(link, spool, name);
  CHECK(symlink(secret, link) == 0);
  int dirfd = open(spool, O_RDONLY | O_DIRECTORY);
  CHECK(dirfd >= 0);
  perf__log_set(sdk_log_keep, NULL);
  sdk_log_clear();
  perf__journal_t j = PERF__JOURNAL_INIT;
  CHECK_EQ_INT(perf__journal_begin(&j, dirfd, spool, id), PERF_E_SYSTEM);
  CHECKF(strstr(g_log, name) && strstr(g_log, "Too many levels of symbolic links"), "log: %s",
         g_log);
  uint64_t torn = 0;
  CHECK_EQ_INT(perf__journal_read(dirfd, name, 1u << 20, count_record, NULL, &torn), PERF_E_SYSTEM);
  perf__journal_end(&j, dirfd); /* none open: the link stays, its target too */
  struct stat st;
  CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
  close(dirfd);
  check_secret(secret);
}

/* ---- modes whatever the umask ------------------------------------------- */

static void check_batch_modes(const char *dir) {
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  size_t batches = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    if (n < 6 || strcmp(de->d_name + n - 6, ".batch") != 0) continue;
    char path[PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    check_mode(path, 0600, false);
    batches++;
  }
  closedir(d);
  CHECK(batches >= 1);
}

static void case_umask_000_modes(void) {
  make_dir();
  umask(0);
  char data_dir[PATH_LEN], report[PATH_LEN], spool[PATH_LEN], p[PATH_LEN];
  perf_sdk_config_t cfg;
  config(&cfg, "http://127.0.0.1:1", data_dir, report);
  cfg.max_events_per_hour = 1;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("kept"), PERF_OK);
  perf_sdk_flush(300); /* into the spool; nothing listens at port 1 */
  perf_sdk_stats_t st;
  SDK_WAIT_FOR_STATS(st, st.batches_written == 1, WAIT_MS, 5);
  CHECK_EQ_INT(perf_sdk_capture_now("rate limited"), PERF_E_RATE_LIMITED); /* saved in drops */
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_OK);
  path_in(spool, data_dir, "spool");
  check_mode(data_dir, 0700, true);
  check_mode(spool, 0700, true);
  path_in(p, spool, "quarantine");
  check_mode(p, 0700, true);
  path_in(p, spool, "LOCK");
  check_mode(p, 0600, false);
  path_in(p, spool, "drops");
  check_mode(p, 0600, false);
  check_batch_modes(spool);
  /* The file sink: the report, its batch records and their directory. */
  config(&cfg, NULL, data_dir, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("report"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_OK);
  check_mode(report, 0600, false);
  CHECK(snprintf(p, sizeof p, "%s.batches", report) < (int)sizeof p);
  check_mode(p, 0700, true);
  check_batch_modes(p);
}

/* ---- directories other users can write are refused ---------------------- */

static void expect_refused(perf_sdk_config_t *cfg, const char *dir, const char *why) {
  sdk_log_clear();
  CHECK_EQ_INT(perf_sdk_init(cfg), PERF_E_INVALID_CONFIG);
  CHECKF(strstr(g_log, dir) && strstr(g_log, why), "expected \"%s\" and \"%s\" in: %s", dir, why,
         g_log);
  CHECK_EQ_INT(perf_sdk_capture_now("not running"), PERF_E_NOT_INITIALIZED);
}

static void case_writable_dirs_refused(void) {
  make_dir();
  char data_dir[PATH_LEN], report[PATH_LEN], spool[PATH_LEN], batches[PATH_LEN];
  perf_sdk_config_t cfg;
  config(&cfg, "http://127.0.0.1:1", data_dir, report);
  path_in(spool, data_dir, "spool");
  mkdir_mode(data_dir, 0777);
  expect_refused(&cfg, data_dir, "writable by group or others (mode 0777) without the sticky bit");
  mkdir_mode(data_dir, 0775);
  expect_refused(&cfg, data_dir, "(mode 0775)");
  mkdir_mode(data_dir, 0700);
  mkdir_mode(spool, 0770);
  expect_refused(&cfg, spool, "(mode 0770)");
  /* The sticky bit (as /tmp): nobody else can remove or rename the SDK's
     entries. */
  mkdir_mode(spool, 01777);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_OK);
  /* The file sink's batch records. */
  config(&cfg, NULL, data_dir, report);
  CHECK(snprintf(batches, sizeof batches, "%s.batches", report) < (int)sizeof batches);
  mkdir_mode(batches, 0757);
  expect_refused(&cfg, batches, "(mode 0757)");
}

static void case_other_users_dirs_refused(void) {
  if (skip_unless_root("chown to another user")) return;
  make_dir();
  char data_dir[PATH_LEN], report[PATH_LEN], spool[PATH_LEN];
  perf_sdk_config_t cfg;
  config(&cfg, "http://127.0.0.1:1", data_dir, report);
  path_in(spool, data_dir, "spool");
  mkdir_mode(data_dir, 0700);
  CHECK(chown(data_dir, 65534, 65534) == 0);
  expect_refused(&cfg, data_dir, "is owned by uid 65534, not by this process's user 0");
  CHECK(chown(data_dir, 0, 0) == 0);
  mkdir_mode(spool, 0700);
  CHECK(chown(spool, 65534, 65534) == 0);
  expect_refused(&cfg, spool, "is owned by uid 65534");
  CHECK(chown(spool, 0, 0) == 0);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_OK);
}

/* ---- chroot after init -------------------------------------------------- */

static char g_jail[PATH_LEN];

static void chroot_child(void) {
  char data_dir[PATH_LEN], report[PATH_LEN];
  perf_sdk_config_t cfg;
  config(&cfg, NULL, data_dir, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK); /* the writer has started */
  CHECKF(chroot(g_jail) == 0 && chdir("/") == 0, "chroot %s: %s", g_jail, strerror(errno));
  for (uint64_t i = 0; i < HANGS; i++)
    one_hang(i);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(perf_sdk_shutdown(2000), PERF_OK);
  CHECK_EQ_INT(st.events_written, HANGS);
  CHECK_EQ_INT(st.events_dropped_sink, 0);
  /* data_dir did not exist at init: its hang markers cannot be made in
     the jail, said once, with the reason. */
  CHECKF(count_text(g_log, "changed its root directory (chroot)") == 1, "log: %s", g_log);
}

static void check_jail_empty(void) {
  DIR *d = opendir(g_jail);
  CHECK(d != NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    CHECKF(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0,
           "%s was created inside the jail", de->d_name);
  closedir(d);
}

static void case_chroot_file_sink(void) {
  if (skip_unless_root("chroot")) return;
  make_dir();
  path_in(g_jail, g_dir, "jail");
  mkdir_mode(g_jail, 0755);
  in_child(chroot_child);
  char report[PATH_LEN], batches[PATH_LEN];
  path_in(report, g_dir, "report.txt");
  char *text = read_text(report);
  CHECK_EQ_INT(count_text(text, "event hang "), HANGS);
  free(text);
  CHECK(snprintf(batches, sizeof batches, "%s.batches", report) < (int)sizeof batches);
  CHECK_EQ_INT(count_batch_hangs(batches), HANGS);
  check_jail_empty();
}

/* The http sink: every hang reaches the spool (its batches sent, or kept
   there when the upload cannot start inside the jail: the uploader's own
   part). */
static const char *g_chroot_endpoint;

static void chroot_http_child(void) {
  char data_dir[PATH_LEN], report[PATH_LEN];
  perf_sdk_config_t cfg;
  config(&cfg, g_chroot_endpoint, data_dir, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK); /* the writer has started */
  CHECKF(chroot(g_jail) == 0 && chdir("/") == 0, "chroot %s: %s", g_jail, strerror(errno));
  for (uint64_t i = 0; i < HANGS; i++)
    one_hang(i);
  perf_sdk_flush(3000); /* into the spool; sent if the uploader can */
  perf_sdk_stats_t st = sdk_stats();
  /* The uploader tries until the deadline: generous, for a loaded machine. */
  CHECK_EQ_INT(perf_sdk_shutdown(10000), PERF_OK);
  CHECK_EQ_INT(st.events_written, HANGS);
  CHECK_EQ_INT(st.events_dropped_sink, 0);
  CHECK_EQ_INT(st.batches_write_failed, 0);
  /* Nothing sent from the jail (neither perf-upload nor libcurl can be
     started there): the log says why. */
  CHECKF(st.batches_sent > 0 || strstr(g_log, "changed its root directory (chroot) after init"),
         "log: %s", g_log);
}

static void case_chroot_http_sink(void) {
  if (skip_unless_root("chroot")) return;
  make_dir();
  path_in(g_jail, g_dir, "jail");
  mkdir_mode(g_jail, 0755);
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  g_chroot_endpoint = http_server_url(srv);
  in_child(chroot_http_child);
  char spool[PATH_LEN];
  path_in(spool, g_dir, "data/spool");
  size_t sent = count_server_hangs(srv), kept = count_batch_hangs(spool);
  printf("note: %zu hangs sent, %zu kept in the spool\n", sent, kept);
  CHECK_EQ_INT(sent + kept, HANGS);
  check_jail_empty();
  http_server_stop(srv);
}

/* ---- the app closes every descriptor after init ------------------------- */

static const char *g_endpoint; /* NULL: the file sink */

static void app_file(char *out, int i) {
  char name[32];
  snprintf(name, sizeof name, "app-%d.txt", i);
  path_in(out, g_dir, name);
}

static void closefrom_child(void) {
  char data_dir[PATH_LEN], report[PATH_LEN];
  perf_sdk_config_t cfg;
  config(&cfg, g_endpoint, data_dir, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK); /* the writer has opened its files */
  /* A daemon's closefrom(3): its own files then take the SDK's numbers. */
  CHECK(syscall(SYS_close_range, 3u, ~0u, 0) == 0);
  int fds[APP_FILES];
  for (int i = 0; i < APP_FILES; i++) {
    char path[PATH_LEN], line[32];
    app_file(path, i);
    fds[i] = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fds[i] >= 0);
    int n = snprintf(line, sizeof line, "app file %d\n", i);
    CHECK(write(fds[i], line, (size_t)n) == n);
  }
  for (uint64_t i = 0; i < HANGS; i++)
    one_hang(i);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  for (int i = 0; i < APP_FILES; i++) {
    char line[32];
    int n = snprintf(line, sizeof line, "more %d\n", i);
    CHECK(write(fds[i], line, (size_t)n) == n);
    CHECK(close(fds[i]) == 0);
  }
  CHECK_EQ_INT(st.events_written, HANGS);
  CHECK_EQ_INT(st.events_dropped_sink, 0);
}

static void check_app_files(void) {
  for (int i = 0; i < APP_FILES; i++) {
    char path[PATH_LEN], want[64];
    app_file(path, i);
    snprintf(want, sizeof want, "app file %d\nmore %d\n", i, i);
    char *text = read_text(path);
    CHECKF(text && strcmp(text, want) == 0, "%s holds %zu bytes: %.200s", path,
           text ? strlen(text) : 0, text ? text : "(nothing)");
    free(text);
  }
}

static void case_closefrom_file_sink(void) {
  make_dir();
  g_endpoint = NULL;
  in_child(closefrom_child);
  check_app_files();
  char report[PATH_LEN], batches[PATH_LEN];
  path_in(report, g_dir, "report.txt");
  char *text = read_text(report);
  CHECK_EQ_INT(count_text(text, "event hang "), HANGS);
  free(text);
  CHECK(snprintf(batches, sizeof batches, "%s.batches", report) < (int)sizeof batches);
  CHECK_EQ_INT(count_batch_hangs(batches), HANGS);
}

static void case_closefrom_http_sink(void) {
  make_dir();
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  g_endpoint = http_server_url(srv);
  in_child(closefrom_child);
  check_app_files();
  CHECK_EQ_INT(count_server_hangs(srv), HANGS);
  http_server_stop(srv);
}

/* ---- one number, two parts of the SDK ----------------------------------- */

#define SWAP_APP_FILES 48

/* The descriptor of this process that names `path` (a directory), the
   only one; -1 when none does. */
static int fd_naming(const char *path) {
  char want[PATH_MAX];
  CHECKF(realpath(path, want) != NULL, "%s: %s", path, strerror(errno));
  int found = -1, count = 0;
  DIR *d = opendir("/proc/self/fd");
  CHECK(d != NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char target[PATH_MAX];
    ssize_t n = readlinkat(dirfd(d), de->d_name, target, sizeof target - 1);
    if (n <= 0 || de->d_name[0] == '.') continue;
    target[n] = '\0';
    if (strcmp(target, want) != 0) continue;
    found = atoi(de->d_name);
    count++;
  }
  closedir(d);
  CHECKF(count <= 1, "%d descriptors name %s", count, path);
  return found;
}

/* A hang held until its marker is in data_dir: the writer has opened
   data_dir (again) for it, then recorded. */
static void hang_with_marker(const char *data_dir, uint64_t recorded_before) {
  char name[64], marker[PATH_LEN];
  snprintf(name, sizeof name, "hang-%d.marker", (int)getpid());
  path_in(marker, data_dir, name);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  long long deadline = now_ms() + WAIT_MS;
  struct stat st;
  while (lstat(marker, &st) != 0) {
    CHECKF(now_ms() < deadline, "no marker %s after %d ms", marker, WAIT_MS);
    sleep_ms(5);
  }
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  perf_sdk_stats_t stats;
  SDK_WAIT_FOR_STATS(stats, stats.events_recorded >= recorded_before + 1, WAIT_MS, 5);
}

typedef struct {
  int fd[SWAP_APP_FILES]; /* -1: closed by the app */
  int n;
} app_files_t;

/* The app's next file (app-<i>.txt, "app file <i>\n"): its descriptor. */
static int app_open(app_files_t *f) {
  CHECK(f->n < SWAP_APP_FILES);
  char path[PATH_LEN], line[32];
  app_file(path, f->n);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  CHECKF(fd >= 0, "%s: %s", path, strerror(errno));
  int len = snprintf(line, sizeof line, "app file %d\n", f->n);
  CHECK(write(fd, line, (size_t)len) == len);
  f->fd[f->n++] = fd;
  return fd;
}

static void swap_child(void) {
  char data_dir[PATH_LEN], report[PATH_LEN], spool[PATH_LEN];
  perf_sdk_config_t cfg;
  config(&cfg, NULL, data_dir, report);
  /* The loop's stats go to the writer once a batch period: not during the
     case, so that the writer's first open in a hang is data_dir's (for
     its marker), not the spool's (for the stats' journal record). The
     flushes close the batches. */
  cfg.batch_max_delay_ms = 600000;
  CHECK(snprintf(spool, sizeof spool, "%s.batches", report) < (int)sizeof spool);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK); /* the writer has opened its files */
  /* closefrom(3) and the app's own files at the SDK's old numbers; a first
     hang makes every part of the SDK open its files again (at higher
     numbers). */
  CHECK(syscall(SYS_close_range, 3u, ~0u, 0) == 0);
  app_files_t app = {.n = 0};
  for (int i = 0; i < APP_FILES; i++)
    app_open(&app);
  hang_with_marker(data_dir, 0);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  /* The app closes two descriptors it did not open: data_dir's and the
     spool directory's. Its next files take both numbers (and every free
     one below them); it closes the one at the spool directory's old
     number, so that the SDK's next open gets it: data_dir's, opened again
     for the next hang's marker. The spool's stale descriptor then has a
     number that names another directory of the SDK's. */
  int data_fd = fd_naming(data_dir), spool_fd = fd_naming(spool);
  CHECKF(data_fd >= 0 && spool_fd >= 0, "data_dir at %d, spool at %d", data_fd, spool_fd);
  CHECK(close(data_fd) == 0 && close(spool_fd) == 0);
  int got_data = -1, got_spool = -1;
  while (got_data < 0 || got_spool < 0) {
    int fd = app_open(&app);
    if (fd == data_fd) got_data = app.n - 1;
    if (fd == spool_fd) got_spool = app.n - 1;
  }
  CHECK(close(app.fd[got_spool]) == 0);
  app.fd[got_spool] = -1;
  hang_with_marker(data_dir, 1);
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  int data_now = fd_naming(data_dir);
  if (data_now != spool_fd) /* another open of the SDK's (the sampler's) came first */
    printf("note: data_dir opened again at %d, not at the spool's old number %d\n", data_now,
           spool_fd);
  perf_sdk_stats_t st = sdk_stats();
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  for (int i = 0; i < app.n; i++) {
    char line[32];
    int n = snprintf(line, sizeof line, "more %d\n", i);
    if (app.fd[i] < 0) continue;
    CHECK(write(app.fd[i], line, (size_t)n) == n);
    CHECK(close(app.fd[i]) == 0);
  }
  CHECK_EQ_INT(st.events_written, 2);
  CHECK_EQ_INT(st.events_dropped_sink, 0);
  /* The app's files: exactly its own bytes ("more" in those it kept). */
  for (int i = 0; i < app.n; i++) {
    char path[PATH_LEN], want[64];
    app_file(path, i);
    if (i == got_spool)
      snprintf(want, sizeof want, "app file %d\n", i);
    else
      snprintf(want, sizeof want, "app file %d\nmore %d\n", i, i);
    char *text = read_text(path);
    CHECKF(strcmp(text, want) == 0, "%s holds %zu bytes: %.200s", path, strlen(text), text);
    free(text);
  }
  /* data_dir is empty: no batch, journal or LOCK of the spool's in it,
     the markers gone with their hangs. */
  DIR *d = opendir(data_dir);
  CHECK(d != NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    CHECKF(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0,
           "%s/%s: not the data_dir's", data_dir, de->d_name);
  closedir(d);
}

/* The app's closefrom(3), its own files, then two descriptors of the SDK
   closed and one number given back: the SDK's next open (data_dir's) gets
   the spool directory's old number. The spool tells its own directory
   from data_dir by identity: batches, journals and LOCK stay in the
   spool, the app's files keep exactly their bytes, both hangs are
   delivered once. */
static void case_number_of_another_part(void) {
  make_dir();
  char data_dir[PATH_LEN], report[PATH_LEN], batches[PATH_LEN];
  path_in(data_dir, g_dir, "data");
  mkdir_mode(data_dir, 0700); /* opened at init */
  in_child(swap_child);
  path_in(report, g_dir, "report.txt");
  char *text = read_text(report);
  CHECK_EQ_INT(count_text(text, "event hang "), 2);
  free(text);
  CHECK(snprintf(batches, sizeof batches, "%s.batches", report) < (int)sizeof batches);
  CHECK_EQ_INT(count_batch_hangs(batches), 2);
}

/* ---- a disk full for a few seconds -------------------------------------- */

#define DISK_FULL_EVENTS 5

static char g_mount[PATH_LEN];
static pid_t g_mount_owner;

static void unmount_tmpfs(void) {
  if (g_mount[0] && g_mount_owner == getpid()) umount2(g_mount, MNT_DETACH);
}

/* Write zeros into path until the file system is full. */
static void fill(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0);
  static char zeros[4096];
  while (write(fd, zeros, sizeof zeros) > 0) {
  }
  CHECKF(errno == ENOSPC, "fill %s: %s", path, strerror(errno));
  close(fd);
}

/* Events the server received ("seq <n>" into seen[n]), batches
   deduplicated by id. */
static size_t server_events(http_server_t *srv, unsigned seen[DISK_FULL_EVENTS]) {
  memset(seen, 0, DISK_FULL_EVENTS * sizeof *seen);
  size_t events = 0, n_ids = 0;
  uint8_t ids[64][16];
  for (size_t i = 0; i < http_server_request_count(srv); i++) {
    http_request_t q;
    CHECK(http_server_request(srv, i, &q));
    Perf__V1__Batch *b = NULL;
    CHECK_EQ_INT(perf__batch_decode_stored(q.body, q.body_len, DECODE_MAX, &b), PERF_OK);
    bool dup = false;
    for (size_t k = 0; k < n_ids && !dup; k++)
      dup = memcmp(ids[k], b->batch_id.data, 16) == 0;
    if (!dup && n_ids < ARRAY_LEN(ids)) {
      memcpy(ids[n_ids++], b->batch_id.data, 16);
      for (size_t e = 0; e < b->n_events; e++) {
        unsigned seq;
        if (sscanf(b->events[e]->reason, "seq %u", &seq) == 1 && seq < DISK_FULL_EVENTS)
          seen[seq]++;
        events++;
      }
    }
    perf__v1__batch__free_unpacked(b, NULL);
    http_request_free(&q);
  }
  return events;
}

static void case_disk_full_journaled_kept(void) {
  if (skip_unless_root("cannot mount a tmpfs")) return;
  make_dir();
  if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
    printf("note: no private mount namespace (%s)\n", strerror(errno));
  path_in(g_mount, g_dir, "mnt");
  CHECK(mkdir(g_mount, 0700) == 0);
  g_mount_owner = getpid();
  atexit(unmount_tmpfs);
  CHECKF(mount("tmpfs", g_mount, "tmpfs", 0, "size=1m,mode=0700") == 0, "mount: %s",
         strerror(errno));
  http_server_t *srv = http_server_start();
  CHECK(srv != NULL);
  char data_dir[PATH_LEN], report[PATH_LEN], filler[PATH_LEN];
  perf_sdk_config_t cfg;
  config(&cfg, http_server_url(srv), data_dir, report);
  path_in(data_dir, g_mount, "data");
  cfg.batch_max_delay_ms = 3000;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(5000), PERF_OK);
  for (int i = 0; i < DISK_FULL_EVENTS; i++) {
    char reason[16];
    snprintf(reason, sizeof reason, "seq %d", i);
    CHECK_EQ_INT(perf_sdk_capture_now(reason), PERF_OK);
  }
  perf_sdk_stats_t st;
  SDK_WAIT_FOR_STATS(st, st.events_journaled == DISK_FULL_EVENTS, WAIT_MS, 5);
  /* The batch closes while the disk is full: it cannot be put into the
     spool. */
  path_in(filler, g_mount, "filler");
  fill(filler);
  SDK_WAIT_FOR_STATS(st, st.batches_write_failed >= 1, WAIT_MS, 10);
  sleep_ms(3000); /* full for a few seconds: the SDK tries again meanwhile */
  st = sdk_stats();
  CHECK_EQ_INT(st.events_written, 0);
  CHECK(unlink(filler) == 0);
  /* Space is back: exactly the K events, once each. */
  unsigned seen[DISK_FULL_EVENTS];
  long long deadline = now_ms() + WAIT_MS;
  while (server_events(srv, seen) < DISK_FULL_EVENTS) {
    CHECKF(now_ms() < deadline, "not delivered %d ms after space returned", WAIT_MS);
    sleep_ms(20);
  }
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_E_SINK_FAILED); /* the failed put, reported once */
  CHECK_EQ_INT(perf_sdk_flush(15000), PERF_OK);
  st = sdk_stats();
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(st.events_written, DISK_FULL_EVENTS);
  CHECK_EQ_INT(st.events_dropped_sink, 0);
  CHECK_EQ_INT(server_events(srv, seen), DISK_FULL_EVENTS);
  for (int i = 0; i < DISK_FULL_EVENTS; i++)
    CHECK_EQ_INT(seen[i], 1);
  http_server_stop(srv);
}

static const test_case_t g_cases[] = {
    TEST_CASE(drops_new_link_not_followed),
    TEST_CASE(lock_link_not_followed),
    TEST_CASE(sink_path_link_in_shared_dir_not_followed),
    TEST_CASE(sink_path_link_of_other_user_not_followed),
    TEST_CASE(sink_path_own_link_followed),
    TEST_CASE(sink_path_dev_stderr),
    TEST_CASE(marker_tmp_link_not_followed),
    TEST_CASE(journal_link_not_followed),
    TEST_CASE(umask_000_modes),
    TEST_CASE(writable_dirs_refused),
    TEST_CASE(other_users_dirs_refused),
    TEST_CASE(chroot_file_sink),
    TEST_CASE(chroot_http_sink),
    TEST_CASE(closefrom_file_sink),
    TEST_CASE(closefrom_http_sink),
    TEST_CASE(number_of_another_part),
    TEST_CASE(disk_full_journaled_kept),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
