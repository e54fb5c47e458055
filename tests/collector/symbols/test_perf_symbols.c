/*
 * test_perf_symbols.c - tools/perf-symbols against the real perf-collector
 * (collector_rig.c) with a symbols-scoped key: a build directory of small
 * programs (symbols_fixture.c built with -g: two build-ids, a copy of one,
 * one linked without a build-id, one stripped of its DWARF, an object
 * file, a text file)
 * uploads exactly the two build-ids once, then none; a wrong or read-only
 * key stops it with exit 3 naming the status; a stripped binary's separate
 * debug file is found with --debug-dir; GET /v1/symbols/<build-id> answers
 * 200 / 404 / 400 / 401 / 403; files named on the command line that are
 * not ELF or not linked get their line; --version. Each case in its own
 * process.
 */
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_id.h"
#include "check.h"
#include "collector_rig.h"
#include "tempdir.h"

#define TOOL_DEADLINE_S 60.0
#define SYMBOLS_KEY "symbols-key"
#define KEYS_TEXT SYMBOLS_KEY " symbols\n" READ_KEY " read\n"

/* ---- files ---------------------------------------------------------------- */

static void copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  CHECKF(in && out, "%s -> %s: %s", from, to, strerror(errno));
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    CHECK(fwrite(buf, 1, n, out) == n);
  CHECK(fclose(out) == 0);
  fclose(in);
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

static void make_dir(const char *path) {
  CHECKF(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

/* The build directory: the fixtures under their roles' names. */
static const char *make_build_dir(void) {
  static char dir[256];
  char path[512];
  snprintf(dir, sizeof dir, "%s/build", tempdir_make("perf-symbols"));
  make_dir(dir);
  snprintf(path, sizeof path, "%s/sub", dir);
  make_dir(path);
  const struct {
    const char *from, *name;
  } files[] = {
      {FIXTURE_ONE, "one"},   {FIXTURE_TWO, "two"},         {FIXTURE_TWO, "sub/two-again"},
      {FIXTURE_NOID, "noid"}, {FIXTURE_NODEBUG, "nodebug"},
  };
  for (size_t i = 0; i < ARRAY_LEN(files); i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
    copy_file(files[i].from, path);
  }
  snprintf(path, sizeof path, "%s/notes.txt", dir);
  write_text(path, "not an ELF file\n");
  return dir;
}

/* ---- running the tool -------------------------------------------------------- */

static char g_output[65536]; /* stdout and stderr of the last run */

/* perf-symbols with args (NULL-ended): its exit status; output in g_output. */
static int run_tool(const char *const *args) {
  char *argv[MAX_ARGS] = {PERF_SYMBOLS_PATH};
  size_t n = 1;
  for (; args[n - 1]; n++) {
    CHECK(n + 1 < MAX_ARGS);
    argv[n] = (char *)args[n - 1];
  }
  argv[n] = NULL;
  char out[512];
  snprintf(out, sizeof out, "%s/tool-output.txt", tempdir_make("perf-symbols"));
  int status = spawn_wait(spawn(argv, out), TOOL_DEADLINE_S);
  FILE *f = fopen(out, "r");
  CHECK(f != NULL);
  size_t len = fread(g_output, 1, sizeof g_output - 1, f);
  g_output[len] = '\0';
  fclose(f);
  fprintf(stderr, "perf-symbols -> %d:\n%s", status, g_output);
  return status;
}

static void expect_output(const char *text) {
  CHECKF(strstr(g_output, text) != NULL, "'%s' not in the output", text);
}

static long symbols_status(const collector_t *c, const char *id, const char *key) {
  char path[128], auth[128];
  snprintf(path, sizeof path, "/v1/symbols/%s", id);
  snprintf(auth, sizeof auth, "Authorization: Bearer %s", key ? key : ""); /* no key: unsent */
  const char *headers[] = {auth, NULL};
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long status = request(c, "GET", path, key ? headers : NULL, NULL, 0, false, r);
  free(r);
  return status;
}

/* ---- cases -------------------------------------------------------------------- */

/* Two build-ids with DWARF: uploaded once each; the copy, the file
   without a build-id, the one without DWARF and the text file are not;
   a second run uploads nothing and finds both on the collector. */
static void case_uploads_then_skips(void) {
  collector_t c;
  collector_start_keys(&c, KEYS_TEXT, NULL);
  const char *dir = make_build_dir();
  char one[81], two[81];
  build_id_of(FIXTURE_ONE, one);
  build_id_of(FIXTURE_TWO, two);
  CHECK(strcmp(one, two) != 0);
  CHECK_EQ_INT(symbols_status(&c, one, SYMBOLS_KEY), 404);

  const char *args[] = {"--url", c.url, "--key", SYMBOLS_KEY, dir, NULL};
  CHECK_EQ_INT(run_tool(args), 0);
  expect_output("perf-symbols: 2 uploaded, 0 already on the collector, 1 duplicates, 2 skipped, "
                "0 failed");
  expect_output("/noid: no GNU build-id");
  expect_output("/nodebug (build-id ");
  expect_output("no debug information");
  CHECK(strstr(g_output, "notes.txt") == NULL); /* not ELF */
  CHECK(strstr(g_output, "fixture.o") == NULL); /* not linked */
  CHECK_EQ_INT(symbols_status(&c, one, SYMBOLS_KEY), 200);
  CHECK_EQ_INT(symbols_status(&c, two, SYMBOLS_KEY), 200);

  CHECK_EQ_INT(run_tool(args), 0);
  expect_output("perf-symbols: 0 uploaded, 2 already on the collector, 1 duplicates, 2 skipped, "
                "0 failed");
  collector_stop_healthy(&c);
}

/* Files named on the command line get a line each: a text file fails the
   run (exit 1) naming it, an object file is skipped, saying why. */
static void case_named_files(void) {
  const char *dir = make_build_dir();
  char notes[512], want[700];
  snprintf(notes, sizeof notes, "%s/notes.txt", dir);
  CHECK_EQ_INT(run_tool((const char *[]){"--dry-run", notes, FIXTURE_OBJECT, NULL}), 1);
  snprintf(want, sizeof want,
           "perf-symbols: %s: not an ELF file (give executables, shared objects or their "
           "directories)\n",
           notes);
  expect_output(want);
  snprintf(want, sizeof want, "skipped  %s: not an executable or shared object\n", FIXTURE_OBJECT);
  expect_output(want);
  expect_output("perf-symbols: 0 uploaded, 0 already on the collector, 0 duplicates, 1 skipped, "
                "1 failed\n");
  CHECK_EQ_INT(run_tool((const char *[]){"--version", NULL}), 0);
  CHECKF(strcmp(g_output, "perf-symbols " PERF_PROJECT_VERSION "\n") == 0, "%s", g_output);
}

/* An unknown key, a key without the symbols scope, no key: exit 3 at the
   first file, naming it, its build-id and the collector's answer. */
static void case_refused_keys(void) {
  collector_t c;
  collector_start_keys(&c, KEYS_TEXT, NULL);
  const char *dir = make_build_dir();
  char one[81];
  build_id_of(FIXTURE_ONE, one);
  const char *wrong[] = {"--url", c.url, "--key", "not-a-key", dir, NULL};
  CHECK_EQ_INT(run_tool(wrong), 3);
  expect_output("the collector refused the key: 401 missing or unknown API key");
  expect_output("(build-id ");
  expect_output("perf-symbols: 0 uploaded");
  const char *read_only[] = {"--url", c.url, "--key", READ_KEY, dir, NULL};
  CHECK_EQ_INT(run_tool(read_only), 3);
  expect_output("the collector refused the key: 403 this API key lacks the symbols scope");
  const char *none[] = {"--url", c.url, dir, NULL};
  CHECK_EQ_INT(run_tool(none), 3);
  expect_output("401");
  CHECK_EQ_INT(symbols_status(&c, one, SYMBOLS_KEY), 404);
  collector_stop_healthy(&c);

  /* Nobody listening: exit 3 too, saying so. */
  const char *nobody[] = {"--url", c.url, "--key", SYMBOLS_KEY, dir, NULL};
  CHECK_EQ_INT(run_tool(nobody), 3);
  expect_output("no answer from the collector");
  const char *no_url[] = {dir, NULL};
  CHECK_EQ_INT(run_tool(no_url), 2);
  expect_output("--url is required");
}

/* A key or a URL holding CR/LF (an extra header line) or a space is bad
   usage (exit 2, naming it and the byte), from --key or PERF_SYMBOLS_KEY:
   nothing is sent. */
static void case_injected_key_refused(void) {
  collector_t c;
  collector_start_keys(&c, KEYS_TEXT, NULL);
  const char *dir = make_build_dir();
  const char *crlf[] = {"--url", c.url, "--key", SYMBOLS_KEY "\r\nX-Injected: yes", dir, NULL};
  CHECK_EQ_INT(run_tool(crlf), 2);
  expect_output("perf-symbols: --key (or PERF_SYMBOLS_KEY): byte ");
  CHECK(setenv("PERF_SYMBOLS_KEY", SYMBOLS_KEY "\nX-Injected: yes", 1) == 0);
  const char *from_env[] = {"--url", c.url, dir, NULL};
  CHECK_EQ_INT(run_tool(from_env), 2);
  expect_output("PERF_SYMBOLS_KEY): byte ");
  CHECK(unsetenv("PERF_SYMBOLS_KEY") == 0);
  char url[160];
  snprintf(url, sizeof url, "%s/ HTTP/1.1\r\nX-Injected: yes\r\n", c.url);
  const char *bad_url[] = {"--url", url, "--key", SYMBOLS_KEY, dir, NULL};
  CHECK_EQ_INT(run_tool(bad_url), 2);
  expect_output("perf-symbols: --url: byte ");
  char one[81];
  build_id_of(FIXTURE_ONE, one);
  CHECK_EQ_INT(symbols_status(&c, one, SYMBOLS_KEY), 404);
  collector_stop_healthy(&c);
}

/* A stripped binary (with .gnu_debuglink): skipped without --debug-dir;
   with it, its debug file under DIR/.build-id/xx/rest.debug is uploaded. */
static void case_debug_dir(void) {
  collector_t c;
  collector_start_keys(&c, KEYS_TEXT, NULL);
  char id[81], dir[256], debug_dir[256], path[512];
  build_id_of(FIXTURE_SPLIT, id);
  snprintf(dir, sizeof dir, "%s/split", tempdir_make("perf-symbols"));
  make_dir(dir);
  snprintf(path, sizeof path, "%s/app", dir);
  copy_file(FIXTURE_SPLIT, path);
  snprintf(debug_dir, sizeof debug_dir, "%s/debug", tempdir_make("perf-symbols"));
  make_dir(debug_dir);
  snprintf(path, sizeof path, "%s/.build-id", debug_dir);
  make_dir(path);
  snprintf(path, sizeof path, "%s/.build-id/%.2s", debug_dir, id);
  make_dir(path);
  snprintf(path, sizeof path, "%s/.build-id/%.2s/%s.debug", debug_dir, id, id + 2);
  copy_file(FIXTURE_SPLIT ".debug", path);

  const char *plain[] = {"--url", c.url, "--key", SYMBOLS_KEY, dir, NULL};
  CHECK_EQ_INT(run_tool(plain), 0);
  expect_output("perf-symbols: 0 uploaded, 0 already on the collector, 0 duplicates, 1 skipped");
  const char *with_dir[] = {"--url",       c.url,     "--key", SYMBOLS_KEY,
                            "--debug-dir", debug_dir, dir,     NULL};
  CHECK_EQ_INT(run_tool(with_dir), 0);
  expect_output("perf-symbols: 1 uploaded, 0 already on the collector, 0 duplicates, 0 skipped");
  expect_output(path); /* "uploaded .../app (build-id ..., from <the debug file>)" */
  CHECK_EQ_INT(symbols_status(&c, id, SYMBOLS_KEY), 200);
  collector_stop_healthy(&c);
}

/* GET /v1/symbols/<build-id>: what the uploader asks before it sends. */
static void case_lookup(void) {
  collector_t c;
  collector_start_keys(&c, KEYS_TEXT, NULL);
  char id[81];
  build_id_of(FIXTURE_ONE, id);
  CHECK_EQ_INT(symbols_status(&c, id, SYMBOLS_KEY), 404);
  CHECK_EQ_INT(symbols_status(&c, "xyz", SYMBOLS_KEY), 400);
  CHECK_EQ_INT(symbols_status(&c, id, NULL), 401);
  CHECK_EQ_INT(symbols_status(&c, id, "not-a-key"), 401);
  CHECK_EQ_INT(symbols_status(&c, id, READ_KEY), 403);
  const char *dry[] = {"--dry-run", FIXTURE_ONE, NULL}; /* says, sends nothing */
  CHECK_EQ_INT(run_tool(dry), 0);
  expect_output("would    ");
  CHECK_EQ_INT(symbols_status(&c, id, SYMBOLS_KEY), 404);
  const char *args[] = {"--url", c.url, "--key", SYMBOLS_KEY, FIXTURE_ONE, NULL};
  CHECK_EQ_INT(run_tool(args), 0);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  char path[128];
  snprintf(path, sizeof path, "/v1/symbols/%s", id);
  const char *headers[] = {"Authorization: Bearer " SYMBOLS_KEY, NULL};
  CHECK_EQ_INT(request(&c, "GET", path, headers, NULL, 0, false, r), 200);
  CHECKF(strncmp(r->body, "stored ", 7) == 0 && strstr(r->body, id), "%s", r->body);
  free(r);
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(uploads_then_skips), TEST_CASE(refused_keys), TEST_CASE(injected_key_refused),
      TEST_CASE(debug_dir),          TEST_CASE(lookup),       TEST_CASE(named_files),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
