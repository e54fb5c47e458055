/*
 * test_module_reload.c - a library without a build-id rewritten at the same
 * path is never taken for the one loaded there before (sdk/sampler/
 * modules.c's cache key: path, the file's device, inode, size and mtime,
 * the load address). reload_a.so is copied to <tmp>/libreload.so, loaded,
 * and a stack captured inside it (perf_backtrace_thread_text on this
 * thread); it is unloaded, the file rewritten in place (the same inode)
 * with reload_b.so's bytes, loaded again, captured again: the names come
 * from B (reload_beta_frame, never A's reload_alpha_frame) and B's unwind
 * rules find the callers through B's 4 KiB frame (A's rules would not).
 * Then A again through a rename (a new inode): A's names.
 *
 * A library whose file cannot be read when its frames are first named (it
 * is moved away for a while, as by a package upgrade): unnamed then, and
 * named once the symbolizer's next idle drop has passed (the SDK's writer
 * calls it 2 s after an event; sdk/sampler/modules.c tries a failed open
 * again after it), not before.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk/symbols/symbols.h"
#include "tempdir.h"

typedef void (*reload_cb)(void);
typedef void (*entry_fn)(reload_cb);

static char *g_text; /* the last capture */

static void capture(void) {
  perf_free(g_text);
  g_text = NULL;
  CHECK_EQ_INT(perf_backtrace_thread_text(0, &g_text), PERF_OK);
}

CHAIN void reload_caller(entry_fn entry) {
  entry(capture);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
}

static void copy_file(const char *from, const char *to, int flags) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  CHECKF(in >= 0, "%s: %s", from, strerror(errno));
  int out = open(to, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0755);
  CHECKF(out >= 0, "%s: %s", to, strerror(errno));
  char buf[65536];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    CHECK(write(out, buf, (size_t)n) == n);
  CHECK(n == 0);
  close(in);
  CHECK(close(out) == 0);
}

/* The line of text naming fn, or NULL. */
static const char *frame_line(const char *fn) {
  char pattern[128];
  snprintf(pattern, sizeof pattern, " %s + ", fn);
  const char *p = strstr(g_text, pattern);
  if (!p) return NULL;
  while (p > g_text && p[-1] != '\n')
    p--;
  return p;
}

/* Load path, capture inside it: own (the version's function) named in
   libreload.so, then reload_entry, then reload_caller: the walk went
   through own's frame with its own rules; other is named nowhere. */
static void load_and_check(const char *path, const char *own, const char *other) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECKF(h != NULL, "dlopen: %s", dlerror());
  entry_fn entry = (entry_fn)(uintptr_t)dlsym(h, "reload_entry");
  CHECK(entry != NULL);
  reload_caller(entry);
  fprintf(stderr, "%s\n", g_text);
  const char *a = frame_line(own), *b = frame_line("reload_entry"),
             *c = frame_line("reload_caller");
  CHECKF(a && b && c && a < b && b < c, "expected %s, reload_entry, reload_caller in:\n%s", own,
         g_text);
  char module[64] = "";
  CHECK(sscanf(a, "%*d %63s", module) == 1);
  CHECKF(strcmp(module, "libreload.so") == 0, "module of %s: %s", own, module);
  CHECKF(strstr(g_text, other) == NULL, "%s (the old file's name) in:\n%s", other, g_text);
  CHECK(dlclose(h) == 0);
  CHECKF(dlopen(path, RTLD_NOW | RTLD_NOLOAD) == NULL, "%s still loaded", path);
}

static void case_rewritten_library(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/libreload.so", tempdir_make("perf-reload"));
  copy_file(RELOAD_A_PATH, path, O_EXCL);
  struct stat first;
  CHECK(stat(path, &first) == 0);
  load_and_check(path, "reload_alpha_frame", "reload_beta_frame");
  copy_file(RELOAD_B_PATH, path, O_TRUNC); /* in place: the same inode */
  struct stat second;
  CHECK(stat(path, &second) == 0);
  CHECK(second.st_ino == first.st_ino);
  /* Same inode, and the mtime may fall in the same clock tick: the sizes
     differ by construction (B's frame code), so the file is told apart
     even when it is loaded at the same address again. */
  CHECK(second.st_size != first.st_size);
  load_and_check(path, "reload_beta_frame", "reload_alpha_frame");
  char fresh[300];
  snprintf(fresh, sizeof fresh, "%s.new", path);
  copy_file(RELOAD_A_PATH, fresh, O_EXCL);
  CHECK(rename(fresh, path) == 0); /* a new inode */
  load_and_check(path, "reload_alpha_frame", "reload_beta_frame");
  perf_free(g_text);
}

/* reload_entry's capture inside A at path: whether A's frame is named. */
static bool alpha_named(entry_fn entry) {
  reload_caller(entry);
  return frame_line("reload_alpha_frame") != NULL;
}

static void case_unreadable_for_a_while(void) {
  char path[256], away[300];
  snprintf(path, sizeof path, "%s/libreload.so", tempdir_make("perf-reload"));
  snprintf(away, sizeof away, "%s.away", path);
  copy_file(RELOAD_A_PATH, path, O_EXCL);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECKF(h != NULL, "dlopen: %s", dlerror());
  entry_fn entry = (entry_fn)(uintptr_t)dlsym(h, "reload_entry");
  CHECK(entry != NULL);
  CHECK(rename(path, away) == 0);
  CHECKF(!alpha_named(entry) && strstr(g_text, " libreload.so+0x"),
         "a frame of the missing file, unnamed:\n%s", g_text);
  CHECK(rename(away, path) == 0);
  CHECKF(!alpha_named(entry), "the open was tried again before the next drop:\n%s", g_text);
  perf__symbols_drop_dwarf(); /* the writer's idle release */
  CHECKF(alpha_named(entry), "still unnamed after the drop:\n%s", g_text);
  CHECK(dlclose(h) == 0);
  perf_free(g_text);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {TEST_CASE(rewritten_library),
                                      TEST_CASE(unreadable_for_a_while)};
  return test_main(cases, sizeof cases / sizeof cases[0], argc, argv);
}
