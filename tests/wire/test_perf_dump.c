/*
 * test_perf_dump.c - tools/perf-dump against real batches. Each case makes
 * its batches with the SDK itself (sink = file into a temporary directory,
 * a manual event captured from a function with a distinctive name), then
 * runs the perf-dump executable (PERF_DUMP_PATH) with stdout and stderr in
 * files: on the report path, the .batches directory and one file, as text
 * and as JSON (parsed back with jansson), on corrupted copies, and with bad
 * usage. A run that dies of a signal or reports a sanitizer error fails the
 * case. Each case runs in its own process: `test_perf_dump <case>`.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "perf/v1/perf.pb-c.h"
#include "perf_sdk.h"
#include "sdk/wire/spool.h"
#include "tempdir.h"

#define MAX_ARGS 16
#define ID_HEX 32

static char g_dir[64];
static char g_report[128];     /* the file sink's report path */
static char g_batches[160];    /* its <report>.batches/ */
static char g_batch[PATH_MAX]; /* the first batch file in it */
static char g_out[128], g_err[128];
static char *g_stdout, *g_stderr; /* of the last run */
static unsigned g_symbolize = 1;  /* the SDK's symbolize for the batches made */

/* ---- files --------------------------------------------------------------- */

static void make_dir(void) {
  snprintf(g_dir, sizeof g_dir, "%s", tempdir_make("perf-dump"));
  snprintf(g_report, sizeof g_report, "%s/report.txt", g_dir);
  snprintf(g_batches, sizeof g_batches, "%s.batches", g_report);
  snprintf(g_out, sizeof g_out, "%s/stdout", g_dir);
  snprintf(g_err, sizeof g_err, "%s/stderr", g_dir);
}

static char *read_all(const char *path, size_t *len_out) {
  FILE *f = fopen(path, "rb");
  CHECKF(f != NULL, "%s: %s", path, strerror(errno));
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 + 1 > cap) {
      cap = cap ? cap * 2 : 8192;
      CHECK((buf = realloc(buf, cap)) != NULL);
    }
    size_t n = fread(buf + len, 1, cap - len - 1, f);
    len += n;
    if (n == 0) break;
  }
  fclose(f);
  buf[len] = '\0';
  if (len_out) *len_out = len;
  return buf;
}

static void write_all(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  CHECKF(f != NULL, "%s: %s", path, strerror(errno));
  CHECK(fwrite(data, 1, len, f) == len);
  CHECK(fclose(f) == 0);
}

/* A copy of the good batch at dir/name, changed by `edit` (may be NULL). */
static void copy_batch(char *out, const char *dir, const char *name,
                       void (*edit)(uint8_t *data, size_t *len)) {
  size_t len;
  uint8_t *data = (uint8_t *)read_all(g_batch, &len);
  if (edit) edit(data, &len);
  snprintf(out, PATH_MAX, "%s/%s", dir, name);
  write_all(out, data, len);
  free(data);
}

static void flip_payload_bit(uint8_t *data, size_t *len) {
  CHECK(*len > PERF__SPOOL_HEADER_SIZE + 8);
  data[PERF__SPOOL_HEADER_SIZE + (*len - PERF__SPOOL_HEADER_SIZE) / 2] ^= 0x10;
}

static void truncate_tail(uint8_t *data, size_t *len) {
  (void)data;
  *len -= 10;
}

static void break_magic(uint8_t *data, size_t *len) {
  (void)len;
  data[0] = 'X';
}

static void break_version(uint8_t *data, size_t *len) {
  (void)len;
  data[4] = 9;
}

static void break_header_crc(uint8_t *data, size_t *len) {
  (void)len;
  data[50] ^= 1; /* reserved, covered by the header's CRC */
}

static void cut_in_header(uint8_t *data, size_t *len) {
  (void)data;
  *len = PERF__SPOOL_HEADER_SIZE / 2;
}

static void make_empty(uint8_t *data, size_t *len) {
  (void)data;
  *len = 0;
}

/* ---- batches from the SDK ------------------------------------------------ */

/* The capture happens in code inlined into dump_me_capture_site: its frame
   carries an inline chain (Frame.lines). */
static inline __attribute__((always_inline)) int dump_me_inline_step(const char *reason) {
  return perf_sdk_capture_now(reason) + 1;
}

static CHAIN int dump_me_capture_site(const char *reason) {
  return dump_me_inline_step(reason);
}

/* One SDK run with the file sink: one manual event, one batch. */
static void sdk_run(const char *reason) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "dump-test";
  cfg.app_version = "1.2.3";
  cfg.environment = "ci";
  cfg.tags[0] = (perf_tag_t){"region", "local"};
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = g_report;
  char data_dir[128];
  snprintf(data_dir, sizeof data_dir, "%s/data", g_dir);
  cfg.data_dir = data_dir;
  cfg.symbolize = g_symbolize;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  if (reason) {
    CHECK_EQ_INT(dump_me_capture_site(reason), 1);
  } else { /* one short unit of work: the batch holds the loop stats alone */
    CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
    CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  }
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

static int is_batch(const struct dirent *de) {
  size_t n = strlen(de->d_name);
  return n > 6 && strcmp(de->d_name + n - 6, ".batch") == 0;
}

/* The n-th (0-based, oldest first) batch file of the sink's directory. */
static void nth_batch(size_t n, char *out) {
  struct dirent **names;
  int count = scandir(g_batches, &names, is_batch, by_name);
  CHECKF(count > (int)n, "%d batch files in %s", count, g_batches);
  snprintf(out, PATH_MAX, "%s/%s", g_batches, names[n]->d_name);
  for (int i = 0; i < count; i++)
    free(names[i]);
  free(names);
}

/* The id in a spool file name "<20-digit seq>-<32 hex>.batch". */
static void id_of(const char *path, char id[ID_HEX + 1]) {
  const char *dash = strrchr(path, '-');
  CHECK(dash && strlen(dash + 1) == ID_HEX + 6);
  memcpy(id, dash + 1, ID_HEX);
  id[ID_HEX] = '\0';
}

/* reason NULL: no event, one unit of work (a stats-only batch). */
static void make_batches(const char *reason) {
  make_dir();
  sdk_run(reason);
  nth_batch(0, g_batch);
}

/* ---- running perf-dump --------------------------------------------------- */

/* perf-dump with the arguments (NULL-terminated); its stdout and stderr land
   in g_stdout and g_stderr. Returns its exit status. */
static int run(const char *arg, ...) {
  const char *argv[MAX_ARGS + 2] = {"perf-dump"};
  size_t n = 1;
  va_list ap;
  va_start(ap, arg);
  for (const char *a = arg; a; a = va_arg(ap, const char *)) {
    CHECK(n <= MAX_ARGS);
    argv[n++] = a;
  }
  va_end(ap);
  argv[n] = NULL;
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    int out = open(g_out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(g_err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(127);
    execv(PERF_DUMP_PATH, (char *const *)argv);
    _exit(127);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  free(g_stdout);
  free(g_stderr);
  g_stdout = read_all(g_out, NULL);
  g_stderr = read_all(g_err, NULL);
  CHECKF(WIFEXITED(status), "perf-dump died of signal %d; stderr:\n%s", WTERMSIG(status), g_stderr);
  CHECKF(!strstr(g_stderr, "Sanitizer") && !strstr(g_stderr, "runtime error"),
         "perf-dump: sanitizer report:\n%s", g_stderr);
  CHECKF(WEXITSTATUS(status) != 127, "cannot run %s", PERF_DUMP_PATH);
  return WEXITSTATUS(status);
}

#define CHECK_HAS(text, needle)                                                                    \
  CHECKF(strstr((text), (needle)) != NULL, "\"%s\" not in:\n%s", (needle), (text))

static size_t count_lines_starting(const char *text, const char *prefix) {
  size_t n = 0, len = strlen(prefix);
  for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (strncmp(p, prefix, len) == 0) n++;
  return n;
}

/* The text form of the batch made by make_batches("dump me"). */
static void check_text(const char *id) {
  char header[64];
  snprintf(header, sizeof header, "batch %s sequence=1 created=", id);
  CHECK_HAS(g_stdout, header);
  CHECK_HAS(g_stdout, "\nsdk name=perf-sdk-c version=");
  CHECK_HAS(g_stdout,
            "\nresource app=dump-test version=1.2.3 environment=ci tags=region=local host=");
  CHECK_HAS(g_stdout, " os=linux arch=x86_64\n");
  CHECK_HAS(g_stdout, "\ndrops rate_limited=0 queue_full=0 sink_failed=0 spool_quota=0");
  CHECK_HAS(g_stdout, "\nevent manual start=");
  CHECK_HAS(g_stdout, "\nreason=\"dump me\"\n");
  CHECK_HAS(g_stdout, "\nthread tid=");
  CHECK_HAS(g_stdout, "\nstack samples=1 thread=");
  /* The caller captured itself: running (its thread states line, and its
     stack's). */
  char states[64];
  snprintf(states, sizeof states, "\nstates thread=%d running 100%%\n", (int)syscall(SYS_gettid));
  CHECK_HAS(g_stdout, states);
  CHECK_HAS(g_stdout, " state=\"running 100%\"\n");
  /* "<index> <module> 0x<16 hex> <function> + <offset> <file>:<line>", and
     the function inlined there on a line of its own, before it. */
  CHECK_HAS(g_stdout, " test_perf_dump           0x0");
  const char *in = strstr(g_stdout, " [inline] dump_me_inline_step ");
  const char *site = strstr(g_stdout, " dump_me_capture_site + ");
  CHECKF(in && site && in < site && strstr(in, "test_perf_dump.c:") < site, "%s", g_stdout);
  CHECK(strstr(site, "test_perf_dump.c:") < strchr(site, '\n'));
  CHECKF(g_stderr[0] == '\0', "stderr: %s", g_stderr);
}

/* ---- JSON ---------------------------------------------------------------- */

static json_t *load_json(void) {
  json_error_t je;
  json_t *doc = json_loads(g_stdout, 0, &je);
  CHECKF(doc != NULL, "not JSON: %s (line %d)\n%s", je.text, je.line, g_stdout);
  CHECK(json_is_array(json_object_get(doc, "batches")));
  CHECK(json_is_array(json_object_get(doc, "errors")));
  return doc;
}

static const char *jstring(json_t *obj, const char *key) {
  const char *s = json_string_value(json_object_get(obj, key));
  CHECKF(s != NULL, "no string \"%s\"", key);
  return s;
}

/* Some frame of some stack of the event is named `function`. */
static bool event_has_function(json_t *event, const char *function) {
  json_t *stack, *frame;
  size_t i, k;
  json_array_foreach(json_object_get(event, "stacks"), i, stack) {
    json_array_foreach(json_object_get(stack, "frames"), k, frame) {
      const char *f = json_string_value(json_object_get(frame, "function"));
      if (f && strcmp(f, function) == 0) return true;
    }
  }
  return false;
}

/* The frame of dump_me_capture_site has its chain in "lines": the inlined
   dump_me_inline_step first, then itself, in this file; the stack ended
   "complete". */
static void check_json_lines(json_t *event) {
  json_t *stack, *frame;
  size_t i, k;
  bool found = false;
  json_array_foreach(json_object_get(event, "stacks"), i, stack) {
    CHECK(strcmp(jstring(stack, "end"), "complete") == 0);
    json_array_foreach(json_object_get(stack, "frames"), k, frame) {
      const char *f = json_string_value(json_object_get(frame, "function"));
      if (!f || strcmp(f, "dump_me_capture_site") != 0) continue;
      json_t *lines = json_object_get(frame, "lines");
      CHECK_EQ_INT(json_array_size(lines), 2);
      json_t *l0 = json_array_get(lines, 0), *l1 = json_array_get(lines, 1);
      CHECK(strcmp(jstring(l0, "function"), "dump_me_inline_step") == 0 &&
            json_is_true(json_object_get(l0, "inline")));
      CHECK(strcmp(jstring(l1, "function"), "dump_me_capture_site") == 0 &&
            json_is_false(json_object_get(l1, "inline")));
      CHECK(strstr(jstring(l0, "file"), "test_perf_dump.c") &&
            json_integer_value(json_object_get(l0, "line")) > 0);
      found = true;
    }
  }
  CHECK(found);
}

/* ---- cases --------------------------------------------------------------- */

/* The report path, the .batches directory and the one file: the same. */
static void case_text(void) {
  make_batches("dump me");
  char id[ID_HEX + 1];
  id_of(g_batch, id);
  CHECK_EQ_INT(run(g_report, NULL), 0);
  check_text(id);
  CHECK_EQ_INT(run(g_batches, NULL), 0);
  check_text(id);
  CHECK_EQ_INT(run(g_batch, NULL), 0);
  check_text(id);
  CHECK_EQ_INT(count_lines_starting(g_stdout, "batch "), 1);
}

static void case_json(void) {
  make_batches("dump me");
  char id[ID_HEX + 1];
  id_of(g_batch, id);
  CHECK_EQ_INT(run("--json", g_report, NULL), 0);
  json_t *doc = load_json();
  json_t *batches = json_object_get(doc, "batches");
  CHECK_EQ_INT(json_array_size(batches), 1);
  CHECK_EQ_INT(json_array_size(json_object_get(doc, "errors")), 0);
  json_t *b = json_array_get(batches, 0);
  CHECK(strcmp(jstring(b, "batch_id"), id) == 0);
  CHECK(strcmp(jstring(b, "file"), g_batch) == 0);
  CHECK_EQ_INT(json_integer_value(json_object_get(b, "sequence")), 1);
  CHECK(strcmp(jstring(json_object_get(b, "sdk"), "name"), "perf-sdk-c") == 0);
  json_t *r = json_object_get(b, "resource");
  CHECK(strcmp(jstring(r, "app_name"), "dump-test") == 0);
  CHECK(strcmp(jstring(r, "environment"), "ci") == 0);
  CHECK_EQ_INT(json_integer_value(json_object_get(r, "pid")), getpid());
  CHECK(strcmp(jstring(json_array_get(json_object_get(r, "tags"), 0), "value"), "local") == 0);
  CHECK(json_is_object(json_object_get(b, "drops")));
  json_t *e = json_array_get(json_object_get(b, "events"), 0);
  CHECK(strcmp(jstring(e, "kind"), "manual") == 0);
  CHECK(strcmp(jstring(e, "reason"), "dump me") == 0);
  CHECK(jstring(e, "start")[strlen(jstring(e, "start")) - 1] == 'Z');
  CHECK(json_array_size(json_object_get(e, "threads")) >= 1);
  CHECK(event_has_function(e, "dump_me_capture_site"));
  /* The caller's thread states: running, its one sample. */
  json_t *st = json_array_get(json_object_get(e, "states"), 0);
  CHECK_EQ_INT(json_integer_value(json_object_get(st, "tid")), syscall(SYS_gettid));
  CHECK(strcmp(jstring(st, "states"), "running 100%") == 0);
  json_t *count = json_array_get(json_object_get(st, "counts"), 0);
  CHECK(strcmp(jstring(count, "state"), "running") == 0 && !jstring(count, "syscall")[0] &&
        json_integer_value(json_object_get(count, "samples")) == 1);
  check_json_lines(e);
  json_t *frame =
      json_array_get(json_object_get(json_array_get(json_object_get(e, "stacks"), 0), "frames"), 0);
  CHECK(strncmp(jstring(frame, "address"), "0x", 2) == 0);
  CHECK(json_string_value(json_object_get(frame, "module")) != NULL);
  json_decref(doc);
}

/* Quotes, backslashes, control characters and bytes that are not UTF-8 in a
   string of the batch: the JSON stays valid, the text escapes them. */
static void case_json_escaping(void) {
  make_batches("q\"b\\n\nt\tc\x01 bad\xff end");
  CHECK_EQ_INT(run("--json", g_batch, NULL), 0);
  json_t *doc = load_json();
  json_t *e = json_array_get(
      json_object_get(json_array_get(json_object_get(doc, "batches"), 0), "events"), 0);
  CHECK(strcmp(jstring(e, "reason"), "q\"b\\n\nt\tc\x01 bad\xef\xbf\xbd end") == 0);
  json_decref(doc);
  CHECK_EQ_INT(run(g_batch, NULL), 0);
  CHECK_HAS(g_stdout, "\nreason=\"q\\\"b\\\\n\\nt\\tc\\x01 bad\xff end\"\n");
}

/* Bad files are named with their reason; the good ones around them are still
   printed; the exit status is 1. */
static void case_corrupt(void) {
  make_batches("dump me");
  char id[ID_HEX + 1], flipped[PATH_MAX], truncated[PATH_MAX], magic[PATH_MAX], empty[PATH_MAX],
      wrong_id[PATH_MAX], garbage[PATH_MAX], good_copy[PATH_MAX], version[PATH_MAX],
      header[PATH_MAX], torn[PATH_MAX];
  id_of(g_batch, id);
  copy_batch(flipped, g_dir, "flipped.batch", flip_payload_bit);
  copy_batch(truncated, g_dir, "truncated.batch", truncate_tail);
  copy_batch(magic, g_dir, "magic.batch", break_magic);
  copy_batch(empty, g_dir, "empty.batch", make_empty);
  copy_batch(version, g_dir, "version.batch", break_version);
  copy_batch(header, g_dir, "header.batch", break_header_crc);
  copy_batch(torn, g_dir, "torn.batch", cut_in_header);
  copy_batch(wrong_id, g_dir, "00000000000000000001-0123456789abcdef0123456789abcdef.batch", NULL);
  copy_batch(good_copy, g_dir, "good-copy.batch", NULL);
  /* A whole spool file (header and CRCs right) whose payload is no batch. */
  char spool_dir[128];
  snprintf(spool_dir, sizeof spool_dir, "%s/garbage", g_dir);
  perf__spool_options_t so = {spool_dir, 1u << 20, 10, 0, NULL, NULL};
  perf__spool_t *sp = NULL;
  CHECK_EQ_INT(perf__spool_open(&so, &sp), PERF_OK);
  static const uint8_t gid[16] = {1, 2, 3};
  CHECK_EQ_INT(perf__spool_put(sp, gid, "this is not zstd", 16, NULL), PERF_OK);
  perf__spool_close(sp);
  snprintf(garbage, sizeof garbage,
           "%s/00000000000000000001-01020300000000000000000000000000.batch", spool_dir);

  CHECK_EQ_INT(run(g_batch, flipped, truncated, magic, empty, version, header, torn, wrong_id,
                   garbage, good_copy, NULL),
               1);
  CHECK_EQ_INT(count_lines_starting(g_stdout, "batch "), 2);
  CHECK_HAS(g_stdout, "file=");
  CHECK_HAS(g_stdout, "good-copy.batch\n");
  char line[PATH_MAX + 128];
  const struct {
    const char *path, *reason;
  } want[] = {
      {flipped, "payload CRC mismatch"},
      {truncated, "bad length"},
      {magic, "bad magic"},
      {empty, "empty file"},
      {version, "unknown spool format version"},
      {header, "bad header (header CRC mismatch or wrong header size)"},
      {torn, "torn file"},
      {wrong_id, "batch id does not match the file name"},
      {garbage, "not a valid perf.v1 Batch"},
  };
  for (size_t i = 0; i < ARRAY_LEN(want); i++) {
    snprintf(line, sizeof line, "perf-dump: %s: %s", want[i].path, want[i].reason);
    CHECK_HAS(g_stderr, line);
  }
  CHECK_EQ_INT(count_lines_starting(g_stderr, "perf-dump: "), ARRAY_LEN(want));

  /* The same as JSON: the good batches, and the bad files under "errors". */
  CHECK_EQ_INT(run("--json", g_batch, flipped, empty, good_copy, NULL), 1);
  json_t *doc = load_json();
  CHECK_EQ_INT(json_array_size(json_object_get(doc, "batches")), 2);
  json_t *errors = json_object_get(doc, "errors");
  CHECK_EQ_INT(json_array_size(errors), 2);
  CHECK(strcmp(jstring(json_array_get(errors, 0), "path"), flipped) == 0);
  CHECK(strcmp(jstring(json_array_get(errors, 0), "reason"), "payload CRC mismatch") == 0);
  json_decref(doc);
}

/* In a directory: the bad file is named, the good one printed, quarantine/
   and *.tmp are not looked at. */
static void case_corrupt_in_dir(void) {
  make_batches("dump me");
  char id[ID_HEX + 1], name[128], bad_path[PATH_MAX], other[PATH_MAX];
  id_of(g_batch, id);
  snprintf(name, sizeof name, "99999999999999999999-%s.batch", id);
  copy_batch(bad_path, g_batches, name, flip_payload_bit);
  copy_batch(other, g_batches, "quarantine/x.batch", make_empty);
  copy_batch(other, g_batches, "00000000000000000007-00.tmp", make_empty);
  CHECK_EQ_INT(run(g_report, NULL), 1);
  CHECK_EQ_INT(count_lines_starting(g_stdout, "batch "), 1);
  CHECK_HAS(g_stdout, " dump_me_capture_site + ");
  char line[PATH_MAX + 64];
  snprintf(line, sizeof line, "perf-dump: %s: payload CRC mismatch\n", bad_path);
  CHECK_HAS(g_stderr, line);
  CHECK_EQ_INT(count_lines_starting(g_stderr, "perf-dump: "), 1);
}

/* Batches of two runs, oldest first. */
static void case_order(void) {
  make_dir();
  sdk_run("first run");
  sdk_run("second run");
  CHECK_EQ_INT(run(g_batches, NULL), 0);
  CHECK_EQ_INT(count_lines_starting(g_stdout, "batch "), 2);
  const char *first = strstr(g_stdout, "reason=\"first run\"");
  const char *second = strstr(g_stdout, "reason=\"second run\"");
  CHECK(first && second && first < second);
}

static void *blocked_helper(void *arg) {
  char c;
  return read(*(int *)arg, &c, 1) < 0 ? NULL : arg; /* until the pipe closes */
}

/* A manual event with the stacks of two threads, shown one or both. */
static void case_max_stacks(void) {
  int fds[2];
  pthread_t helper;
  CHECK(pipe(fds) == 0);
  CHECK(pthread_create(&helper, NULL, blocked_helper, &fds[0]) == 0);
  make_batches("dump me");
  close(fds[1]);
  pthread_join(helper, NULL);
  close(fds[0]);
  CHECK_EQ_INT(run(g_batch, NULL), 0);
  size_t all = count_lines_starting(g_stdout, "stack ");
  CHECKF(all >= 2, "%zu stacks\n%s", all, g_stdout);
  CHECK_EQ_INT(run("--max-stacks", "1", g_batch, NULL), 0);
  CHECK_EQ_INT(count_lines_starting(g_stdout, "stack "), 1);
  CHECK_HAS(g_stdout, " more stacks)\n");
  CHECK_EQ_INT(run("--json", "-n", "1", g_batch, NULL), 0);
  json_t *doc = load_json();
  json_t *e = json_array_get(
      json_object_get(json_array_get(json_object_get(doc, "batches"), 0), "events"), 0);
  CHECK_EQ_INT(json_array_size(json_object_get(e, "stacks")), 1);
  CHECK_EQ_INT(json_integer_value(json_object_get(e, "stacks_not_shown")), all - 1);
  json_decref(doc);
}

/* A path that does not exist, a directory without batches, a FIFO. */
static void case_missing(void) {
  make_dir();
  char missing[PATH_MAX], fifo[PATH_MAX], line[PATH_MAX + 64];
  snprintf(missing, sizeof missing, "%s/nothing-here", g_dir);
  CHECK_EQ_INT(run(missing, NULL), 1);
  snprintf(line, sizeof line, "perf-dump: %s: No such file or directory\n", missing);
  CHECK_HAS(g_stderr, line);
  CHECK_EQ_INT(run(g_dir, NULL), 0);
  snprintf(line, sizeof line, "perf-dump: %s: no batch files\n", g_dir);
  CHECK_HAS(g_stderr, line);
  snprintf(fifo, sizeof fifo, "%s/fifo", g_dir);
  CHECK(mkfifo(fifo, 0600) == 0);
  CHECK_EQ_INT(run(fifo, NULL), 1);
  CHECK_HAS(g_stderr, "not a regular file");
}

/* A stats-only batch (the loop's one short unit, no event): its loop
   stats as text and JSON. */
static void case_loop_stats(void) {
  make_batches(NULL);
  CHECK_EQ_INT(run(g_batch, NULL), 0);
  CHECK_HAS(g_stdout, "\nloop_stats watched_ms=");
  CHECK_HAS(g_stdout, " units=1,0,0,0,0,0,0,0,0\nevents=0\n");
  CHECK_EQ_INT(run("--json", g_batch, NULL), 0);
  json_t *doc = load_json();
  json_t *b = json_array_get(json_object_get(doc, "batches"), 0);
  json_t *loop = json_object_get(b, "loop_stats");
  json_t *units = json_object_get(loop, "busy_units_by_bucket");
  CHECK_EQ_INT(json_array_size(units), 9);
  CHECK_EQ_INT(json_integer_value(json_array_get(units, 0)), 1);
  CHECK(json_integer_value(json_object_get(loop, "watched_nanos")) >=
        json_integer_value(json_object_get(loop, "busy_nanos")));
  CHECK_EQ_INT(json_array_size(json_object_get(b, "events")), 0);
  json_decref(doc);
}

/* A loop registered on a worker thread (perf_sdk_loop_register) hangs
   about 400 ms. */
static atomic_int g_worker_tid;

static void *hung_worker(void *arg) {
  (void)arg;
  atomic_store(&g_worker_tid, (int)syscall(SYS_gettid));
  CHECK_EQ_INT(perf_sdk_loop_register("worker-7", 100), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  struct timespec ts = {0, 400 * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  return NULL;
}

/* Each loop named: the hang's `loop name=... thread=...` line (--json:
   "loop"), and each loop's stats line after the sum (--json: "loops"). */
static void case_loops_named(void) {
  make_dir();
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "dump-test";
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = g_report;
  cfg.data_dir = g_dir;
  cfg.cpu_threshold_percent = 25600;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, hung_worker, NULL) == 0);
  pthread_join(t, NULL);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  CHECK_EQ_INT(run(g_batches, NULL), 0);
  char line[96];
  snprintf(line, sizeof line, "\nloop name=\"worker-7\" thread=%d\n", atomic_load(&g_worker_tid));
  CHECK_HAS(g_stdout, line);
  CHECK_HAS(g_stdout, "\nloop_stats loop=\"main\" watched_ms=");
  CHECK_HAS(g_stdout, "\nloop_stats loop=\"worker-7\" watched_ms=");
  CHECK_EQ_INT(run("--json", g_batches, NULL), 0);
  json_t *doc = load_json();
  json_t *batches = json_object_get(doc, "batches");
  int hangs = 0, worker_loops = 0;
  for (size_t i = 0; i < json_array_size(batches); i++) {
    json_t *b = json_array_get(batches, i);
    json_t *events = json_object_get(b, "events"), *loops = json_object_get(b, "loops");
    for (size_t k = 0; k < json_array_size(events); k++) {
      json_t *e = json_array_get(events, k);
      if (strcmp(json_string_value(json_object_get(e, "kind")), "hang") != 0) continue;
      hangs++;
      CHECK(strcmp(json_string_value(json_object_get(e, "loop")), "worker-7") == 0);
      CHECK_EQ_INT(json_integer_value(json_object_get(e, "tid")), atomic_load(&g_worker_tid));
    }
    for (size_t k = 0; k < json_array_size(loops); k++) {
      json_t *l = json_array_get(loops, k);
      if (strcmp(json_string_value(json_object_get(l, "loop")), "worker-7") != 0) continue;
      worker_loops++;
      json_t *units = json_object_get(l, "busy_units_by_bucket");
      long long n = 0; /* its one unit of 400 ms (bucket 3, later on a slow machine) */
      for (size_t u = 3; u < json_array_size(units); u++)
        n += json_integer_value(json_array_get(units, u));
      CHECK_EQ_INT(n, 1);
      CHECK(json_integer_value(json_object_get(l, "busy_nanos")) >= 400000000);
    }
  }
  CHECK_EQ_INT(hangs, 1);
  CHECK_EQ_INT(worker_loops, 1);
  json_decref(doc);
}

/* Batch b packed into the spool directory <g_dir>/spool (its path into
   dir). */
static void spool_put(const Perf__V1__Batch *b, char *dir, size_t dir_len) {
  size_t len = perf__v1__batch__get_packed_size(b);
  uint8_t *raw = malloc(len);
  CHECK(raw != NULL);
  perf__v1__batch__pack(b, raw);
  snprintf(dir, dir_len, "%s/spool", g_dir);
  perf__spool_options_t opt = {.dir = dir, .max_bytes = 1 << 20, .max_files = 16};
  perf__spool_t *sp = NULL;
  CHECK_EQ_INT(perf__spool_open(&opt, &sp), PERF_OK);
  CHECK_EQ_INT(perf__spool_put(sp, b->batch_id.data, raw, len, NULL), PERF_OK);
  perf__spool_close(sp);
  free(raw);
}

/* A window of the continuous profile, hand-made: counts with their own CPU
   time and state, no per-sample arrays. Its kind is "profile", its stacks
   most CPU time first with their CPU time and state (text and --json). */
static void case_profile(void) {
  make_dir();
  char *strings[] = {"", "often_fn", "rare_fn"};
  Perf__V1__Function fn[2] = {PERF__V1__FUNCTION__INIT, PERF__V1__FUNCTION__INIT};
  Perf__V1__Function *fns[] = {&fn[0], &fn[1]};
  Perf__V1__Frame fr[2] = {PERF__V1__FRAME__INIT, PERF__V1__FRAME__INIT};
  Perf__V1__Frame *frs[] = {&fr[0], &fr[1]};
  uint32_t often[] = {1}, rare[] = {2};
  Perf__V1__Stack st[2] = {PERF__V1__STACK__INIT, PERF__V1__STACK__INIT};
  Perf__V1__Stack *sts[] = {&st[0], &st[1]};
  for (int i = 0; i < 2; i++)
    fn[i].name = (uint32_t)i + 1, fr[i].function = (uint32_t)i + 1, fr[i].address = 0x1000;
  st[0].n_frames = 1, st[0].frames = often;
  st[1].n_frames = 1, st[1].frames = rare;
  Perf__V1__StackCount sc[2] = {PERF__V1__STACK_COUNT__INIT, PERF__V1__STACK_COUNT__INIT};
  Perf__V1__StackCount *scs[] = {&sc[0], &sc[1]};
  sc[0].stack = 1, sc[0].samples = 3, sc[0].tid = 7, sc[0].weight_micros = 3000;
  sc[1].stack = 2, sc[1].samples = 2, sc[1].tid = 7, sc[1].weight_micros = 9000;
  sc[0].state = sc[1].state = PERF__V1__SAMPLE_STATE__SAMPLE_STATE_RUNNING;
  Perf__V1__Event ev = PERF__V1__EVENT__INIT;
  Perf__V1__Event *evs[] = {&ev};
  ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_PROFILE;
  ev.start_unix_nanos = 1700000000000000000LL, ev.duration_nanos = 60000000000LL;
  ev.tid = 7, ev.cpu_percent = -1, ev.samples_dropped = 4;
  ev.n_stack_counts = 2, ev.stack_counts = scs, ev.dominant_stack = 2;
  uint8_t id[16] = {0xc0, 0xdf};
  Perf__V1__Resource res = PERF__V1__RESOURCE__INIT;
  res.app_name = "profile";
  Perf__V1__Batch b = PERF__V1__BATCH__INIT;
  b.batch_id = (ProtobufCBinaryData){16, id};
  b.resource = &res;
  b.n_strings = 3, b.strings = strings;
  b.n_functions = 2, b.functions = fns;
  b.n_frames = 2, b.frames = frs;
  b.n_stacks = 2, b.stacks = sts;
  b.n_events = 1, b.events = evs;
  char dir[160];
  spool_put(&b, dir, sizeof dir);

  CHECK_EQ_INT(run(dir, NULL), 0);
  CHECK_HAS(g_stdout, "event profile start=2023-11-14T22:13:20.000Z duration_ms=60000.000 "
                      "thread=7 samples=5 failed_samples=0 samples_dropped=4\n");
  const char *heavy =
      strstr(g_stdout, "stack samples=2 thread=7 cpu_ms=9.000 state=\"running 100%\"\n");
  const char *light =
      strstr(g_stdout, "stack samples=3 thread=7 cpu_ms=3.000 state=\"running 100%\"\n");
  CHECKF(heavy && light && heavy < light, "%s", g_stdout);
  CHECK_EQ_INT(run("--json", dir, NULL), 0);
  json_t *doc = load_json();
  json_t *je = json_array_get(
      json_object_get(json_array_get(json_object_get(doc, "batches"), 0), "events"), 0);
  CHECK(strcmp(json_string_value(json_object_get(je, "kind")), "profile") == 0);
  json_t *js = json_object_get(je, "stacks");
  CHECK_EQ_INT(json_array_size(js), 2);
  CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(js, 0), "cpu_us")), 9000);
  CHECK(strcmp(json_string_value(json_object_get(json_array_get(js, 0), "states")),
               "running 100%") == 0);
  CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(js, 1), "cpu_us")), 3000);
  json_decref(doc);
}

/* A CPU profile, hand-made (its most sampled stack the lighter one) and put
   in a spool directory: its stacks most CPU time first, as the SDK's report
   and the collector show them, each with its samples and CPU time
   (cpu_ms=; --json: samples, cpu_us), the heaviest alone under
   --max-stacks 1. */
static void case_cpu_order(void) {
  make_dir();
  char *strings[] = {"", "often_fn", "rare_fn"};
  Perf__V1__Function fn[2] = {PERF__V1__FUNCTION__INIT, PERF__V1__FUNCTION__INIT};
  Perf__V1__Function *fns[] = {&fn[0], &fn[1]};
  Perf__V1__Frame fr[2] = {PERF__V1__FRAME__INIT, PERF__V1__FRAME__INIT};
  Perf__V1__Frame *frs[] = {&fr[0], &fr[1]};
  uint32_t often[] = {1}, rare[] = {2};
  Perf__V1__Stack st[2] = {PERF__V1__STACK__INIT, PERF__V1__STACK__INIT};
  Perf__V1__Stack *sts[] = {&st[0], &st[1]};
  for (int i = 0; i < 2; i++)
    fn[i].name = (uint32_t)i + 1, fr[i].function = (uint32_t)i + 1, fr[i].address = 0x1000;
  st[0].n_frames = 1, st[0].frames = often;
  st[1].n_frames = 1, st[1].frames = rare;
  Perf__V1__StackCount sc[2] = {PERF__V1__STACK_COUNT__INIT, PERF__V1__STACK_COUNT__INIT};
  Perf__V1__StackCount *scs[] = {&sc[0], &sc[1]};
  sc[0].stack = 1, sc[0].samples = 3, sc[0].tid = 7;
  sc[1].stack = 2, sc[1].samples = 1, sc[1].tid = 7;
  int64_t offsets[] = {1000, 1000, 1000, 1000};
  uint32_t stacks[] = {1, 2, 1, 1};
  uint64_t weights[] = {1000, 9000, 1000, 1000}; /* often_fn 3 ms, rare_fn 9 ms */
  Perf__V1__Event ev = PERF__V1__EVENT__INIT;
  Perf__V1__Event *evs[] = {&ev};
  ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_CPU;
  ev.start_unix_nanos = 1700000000000000000LL, ev.duration_nanos = 50000000;
  ev.tid = 7, ev.cpu_percent = 90;
  ev.n_stack_counts = 2, ev.stack_counts = scs, ev.dominant_stack = 1;
  ev.n_sample_offsets_micros = 4, ev.sample_offsets_micros = offsets;
  ev.n_sample_stacks = 4, ev.sample_stacks = stacks;
  ev.n_sample_weights_micros = 4, ev.sample_weights_micros = weights;
  uint8_t id[16] = {0xc0, 0xde};
  Perf__V1__Resource res = PERF__V1__RESOURCE__INIT;
  res.app_name = "cpu-order";
  Perf__V1__Batch b = PERF__V1__BATCH__INIT;
  b.batch_id = (ProtobufCBinaryData){16, id};
  b.resource = &res;
  b.n_strings = 3, b.strings = strings;
  b.n_functions = 2, b.functions = fns;
  b.n_frames = 2, b.frames = frs;
  b.n_stacks = 2, b.stacks = sts;
  b.n_events = 1, b.events = evs;
  char dir[160];
  spool_put(&b, dir, sizeof dir);

  CHECK_EQ_INT(run(dir, NULL), 0);
  const char *heavy = strstr(g_stdout, "stack samples=1 thread=7 cpu_ms=9.000\n");
  const char *light = strstr(g_stdout, "stack samples=3 thread=7 cpu_ms=3.000\n");
  CHECKF(heavy && light && heavy < light, "%s", g_stdout);
  CHECK_EQ_INT(run("--max-stacks", "1", dir, NULL), 0);
  CHECK_HAS(g_stdout, "stack samples=1 thread=7 cpu_ms=9.000\n");
  CHECK(strstr(g_stdout, "cpu_ms=3.000") == NULL);
  CHECK_HAS(g_stdout, "(1 more stacks)\n");
  CHECK_EQ_INT(run("--json", dir, NULL), 0);
  json_t *doc = load_json();
  json_t *js = json_object_get(
      json_array_get(json_object_get(json_array_get(json_object_get(doc, "batches"), 0), "events"),
                     0),
      "stacks");
  CHECK_EQ_INT(json_array_size(js), 2);
  CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(js, 0), "samples")), 1);
  CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(js, 0), "cpu_us")), 9000);
  CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(js, 1), "samples")), 3);
  CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(js, 1), "cpu_us")), 3000);
  json_decref(doc);
}

/* Frames not named on the device (symbolize off): each physical line reads
   "<module>+0x<address>", the module's basename and the address of the
   line's own address column, the notation of the SDK's reports and the
   collector's labels. */
static void case_unnamed(void) {
  g_symbolize = 0;
  make_batches("dump me");
  CHECK_EQ_INT(run(g_batch, NULL), 0);
  size_t frames = 0;
  const char *stack = strstr(g_stdout, "\nstack samples=");
  CHECKF(stack != NULL, "%s", g_stdout);
  for (const char *p = strchr(stack + 1, '\n'); p && p[1] && p[1] != '\n'; p = strchr(p, '\n')) {
    p++;
    unsigned index;
    char module[256], name[512];
    unsigned long long address;
    if (sscanf(p, "%u %255s 0x%llx %511s", &index, module, &address, name) != 4) break;
    char want[300];
    snprintf(want, sizeof want, "%s+0x%llx", module, address);
    CHECKF(strcmp(name, want) == 0, "frame %u reads %s, not %s:\n%s", index, name, want, g_stdout);
    CHECKF(!strstr(p, " + ") || strstr(p, " + ") > strchr(p, '\n'), "%s", g_stdout);
    frames++;
  }
  CHECKF(frames >= 3, "%zu unnamed frames in:\n%s", frames, g_stdout);
  CHECK_HAS(g_stdout, " test_perf_dump+0x");
}

static void case_usage(void) {
  make_dir();
  CHECK_EQ_INT(run("--help", NULL), 0);
  CHECK_HAS(g_stdout, "usage: perf-dump [--json] [--max-stacks N] PATH...");
  CHECK_HAS(g_stdout, "--json");
  CHECK_EQ_INT(run("--bogus", g_dir, NULL), 2);
  CHECK_HAS(g_stderr, "perf-dump: unknown option '--bogus'");
  CHECK_HAS(g_stderr, "--help");
  CHECK(g_stdout[0] == '\0');
  CHECK_EQ_INT(run("-x", g_dir, NULL), 2);
  CHECK_HAS(g_stderr, "unknown option '-x'");
  CHECK_EQ_INT(run(NULL), 2);
  CHECK_HAS(g_stderr, "perf-dump: no path given");
  CHECK_EQ_INT(run("--json", NULL), 2);
  CHECK_EQ_INT(run("--max-stacks", "many", g_dir, NULL), 2);
  CHECK_HAS(g_stderr, "--max-stacks wants a number");
  CHECK_EQ_INT(run(g_dir, "--max-stacks", NULL), 2);
  CHECK_HAS(g_stderr, "option '--max-stacks' needs a value");
}

static const test_case_t g_cases[] = {
    TEST_CASE(text),           TEST_CASE(json),       TEST_CASE(json_escaping), TEST_CASE(corrupt),
    TEST_CASE(corrupt_in_dir), TEST_CASE(order),      TEST_CASE(max_stacks),    TEST_CASE(missing),
    TEST_CASE(usage),          TEST_CASE(loop_stats), TEST_CASE(cpu_order),     TEST_CASE(unnamed),
    TEST_CASE(loops_named),    TEST_CASE(profile),
};

int main(int argc, char **argv) {
  /* The SDK's captures of other threads wait at most the sampler's timeout,
     100 ms by default; on a loaded machine (ASan, ctest -j8 on 2 cores) a
     thread can wait longer for a core, and max_stacks counts the stacks. */
  perf_sampler_options_t opts;
  perf_sampler_options_init(&opts);
  opts.timeout_ms = 2000;
  CHECK_EQ_INT(perf_sampler_configure(&opts), PERF_OK);
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
