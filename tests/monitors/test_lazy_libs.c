/*
 * test_lazy_libs.c - libdw, libelf, zlib and zstd are not in an idle app
 * (sdk/base/lazy_lib.h): libperfsdk-core.so loads them at their first call
 * (unwind rules, naming frames, compressing a batch) and the writer
 * unloads them once idle for its 2 s, with the file sink and the none
 * sink; an event after that loads them again and names its frames, those
 * it never named before included (a library loaded again starts with none
 * of the state the SDK gave the first copy).
 *
 * Linked with the front only (no perfwire: zstd and protobuf-c would be
 * mapped by the test itself). What is mapped is read from /proc/self/maps;
 * unloading is waited for with a deadline.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "tempdir.h"
#include "test_util.h"

#define UNLOAD_WAIT_MS 30000 /* the writer's 2 s idle, on a loaded machine */

/* The libraries loaded at their first call. */
static const char *const k_lazy[] = {"/libdw",   "/libelf",  "/libz.so",
                                     "/libzstd", "/liblzma", "/libbz2"};

/* The first lazy library /proc/self/maps shows, or NULL. */
static const char *lazy_mapped(void) {
  char *maps = read_text("/proc/self/maps");
  const char *found = NULL;
  for (size_t i = 0; i < ARRAY_LEN(k_lazy) && !found; i++)
    if (strstr(maps, k_lazy[i])) found = k_lazy[i];
  free(maps);
  return found;
}

static void wait_unloaded(const char *when) {
  long long deadline = now_ms() + UNLOAD_WAIT_MS;
  const char *lib;
  while ((lib = lazy_mapped()) != NULL && now_ms() < deadline)
    sleep_ms(20);
  CHECKF(lib == NULL, "%s still mapped %d ms %s", lib, UNLOAD_WAIT_MS, when);
}

/* Frames of this file, kept apart so the stack shows them: one per event,
   so that each event has an address no earlier one named (a name cached
   from before the unload proves nothing). */
#define LAZY_MARKER_CAPTURE(n)                                                                     \
  __attribute__((noinline)) static void lazy_marker_capture_##n(void) {                            \
    CHECK_EQ_INT(perf_sdk_capture_now("lazy libs"), PERF_OK);                                      \
    __asm__ volatile("" ::: "memory");                                                             \
  }
LAZY_MARKER_CAPTURE(1)
LAZY_MARKER_CAPTURE(2)

#define LAZY_MARKER_BACKTRACE(n)                                                                   \
  __attribute__((noinline)) static char *lazy_marker_backtrace_##n(void) {                         \
    char *text = NULL;                                                                             \
    CHECK_EQ_INT(perf_backtrace_thread_text(0, &text), PERF_OK);                                   \
    __asm__ volatile("" ::: "memory");                                                             \
    return text;                                                                                   \
  }
LAZY_MARKER_BACKTRACE(1)
LAZY_MARKER_BACKTRACE(2)

static void config(perf_sdk_config_t *cfg, perf_sink_t sink, const char *report) {
  perf_sdk_config_init(cfg);
  cfg->app_name = "test_lazy_libs";
  cfg->cpu_threshold_percent = 25600;
  cfg->sink = sink;
  cfg->sink_path = report;
}

/* How often the report names `function`. */
static size_t marker_count(const char *report, const char *function) {
  char *text = read_text(report);
  size_t seen = 0;
  for (const char *p = text; (p = strstr(p, function)) != NULL; p++)
    seen++;
  free(text);
  return seen;
}

/* One event with the file sink, captured in `marker`: the report names it
   (the new event's frames were named, from the symbol table and DWARF). */
static void capture_and_check(const char *report, void (*marker)(void), const char *name) {
  CHECK_EQ_INT(marker_count(report, name), 0);
  marker();
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  char *text = read_text(report);
  char line[128];
  snprintf(line, sizeof line, "%s + ", name); /* named by the symbol table */
  CHECKF(strstr(text, line) && strstr(text, "test_lazy_libs.c:"), "no \"%s\" with its line in:\n%s",
         line, text);
  free(text);
}

/* The file sink's batch records in <report>.batches/ (after shutdown: every
   batch closed): how many, and how many of them are zstd frames (none
   should be: the file sink never compresses, so zstd's compressor never
   runs in the app). The payload starts after the 64-byte spool header. */
static int batches_compressed(const char *report, int *total) {
  char dir[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s.batches", report);
  DIR *d = opendir(dir);
  CHECKF(d != NULL, "%s: %s", dir, strerror(errno));
  int compressed = 0;
  *total = 0;
  for (struct dirent *de; (de = readdir(d)) != NULL;) {
    size_t n = strlen(de->d_name);
    if (n < 6 || strcmp(de->d_name + n - 6, ".batch") != 0) continue;
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    unsigned char head[68];
    CHECK(fread(head, 1, sizeof head, f) == sizeof head);
    fclose(f);
    static const unsigned char zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
    compressed += memcmp(head + 64, zstd_magic, 4) == 0;
    (*total)++;
  }
  closedir(d);
  return compressed;
}

static void case_file_sink(void) {
  CHECKF(lazy_mapped() == NULL, "%s mapped before perf_sdk_init", lazy_mapped());
  char report[PATH_MAX];
  snprintf(report, sizeof report, "%s/report.txt", tempdir_make("lazy"));
  perf_sdk_config_t cfg;
  config(&cfg, PERF_SINK_FILE, report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  wait_unloaded("after perf_sdk_init");
  /* rules, names and the batch: all loaded */
  capture_and_check(report, lazy_marker_capture_1, "lazy_marker_capture_1");
  wait_unloaded("after the first event");
  /* loaded again, a function never named before named */
  capture_and_check(report, lazy_marker_capture_2, "lazy_marker_capture_2");
  wait_unloaded("after the second event");
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  int total = 0, compressed = batches_compressed(report, &total);
  CHECK(total >= 1);
  CHECKF(compressed == 0, "%d of the file sink's %d batch records are zstd frames", compressed,
         total);
}

static void case_none_sink(void) {
  perf_sdk_config_t cfg;
  config(&cfg, PERF_SINK_NONE, NULL);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  char *text = lazy_marker_backtrace_1(); /* rules and names on this thread */
  CHECKF(strstr(text, "lazy_marker_backtrace_1 + ") != NULL, "backtrace:\n%s", text);
  perf_free(text);
  wait_unloaded("after a backtrace");
  text = lazy_marker_backtrace_2();
  CHECKF(strstr(text, "lazy_marker_backtrace_2 + ") != NULL, "backtrace after the unload:\n%s",
         text);
  perf_free(text);
  wait_unloaded("after the second backtrace");
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

static const test_case_t g_cases[] = {
    TEST_CASE(file_sink),
    TEST_CASE(none_sink),
};

int main(int argc, char **argv) {
  unsetenv("PERF_SDK_DISABLED");
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
