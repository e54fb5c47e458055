/*
 * test_names.c - the names of captured stacks against gdb's, end to end.
 * names_app (C++, -O2 -g) parks three threads: one in
 * std::condition_variable::wait inside an inlined Queue<long>::pop, one in
 * std::mutex::lock inside an inlined Ledger::record, one in a hot loop
 * inlined from a template; it captures them with
 * perf_backtrace_all_threads_text and with the file sink (one manual
 * event), then waits. gdb attaches to the same process while the threads
 * are still parked (tests/sampler/gdb_frames.py lists `bt`'s frames with
 * their kinds), and each thread's stack is compared frame for frame:
 * every function in order, inline frames included, by the names of
 * frame_name_norm (tests/support/frame_names.h says what it forgives), and
 * the source file and line of every frame both name.
 *
 * The same for names_c_app, a C program at -O2 -g -fomit-frame-pointer
 * (every caller from CFI): a condition variable wait and a mutex wait
 * inside inlined functions, and an inlined hot loop (c_* cases).
 *
 * One more documented difference: gdb rebuilds frames that tail calls
 * removed from the stack (its "tailcall" frames, from DWARF call sites,
 * e.g. __futex_abstimed_wait_cancelable64 jumping into
 * __futex_abstimed_wait_common); the SDK shows the stack as it is in
 * memory, so those gdb frames are not expected. gdb_names.c runs gdb and
 * compares (test_names_gaps.c does the same for frames of past events).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "frame_names.h"
#include "gdb_names.h"
#include "tempdir.h"

#define THREADS 3 /* the app's parked threads: orders, ledger, pricing */

typedef struct app_s {
  const char *path;  /* names_app or names_c_app */
  size_t min_frames; /* the fewest frames a parked thread of it has */
  pid_t pid;
  int to_app;
  char dir[128];
  int tids[THREADS];
} app_t;

/* ------------------------------------------------------------------------ */
/* The app                                                                   */
/* ------------------------------------------------------------------------ */

/* path (names_app's protocol) started in mode "text" (no SDK, the
   all-threads text only) or "sink" (the file sink too). */
static void app_start(app_t *a, const char *path, const char *mode) {
  a->path = path;
  a->min_frames = strcmp(path, NAMES_APP_PATH) == 0 ? 8 : 5;
  snprintf(a->dir, sizeof a->dir, "%s/%s-%s", tempdir_make("perf-names"),
           strrchr(path, '/') ? strrchr(path, '/') + 1 : path, mode);
  CHECK(mkdir(a->dir, 0700) == 0);
  int in[2], out[2];
  CHECK(pipe(in) == 0 && pipe(out) == 0);
  a->pid = fork();
  CHECK(a->pid >= 0);
  if (a->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    execl(a->path, a->path, a->dir, strcmp(mode, "text") == 0 ? "--no-sdk" : NULL, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  a->to_app = in[1];
  char line[256];
  int pid = 0;
  bool ready = read_line(out[0], line, sizeof line, 60000);
  close(out[0]);
  int status = 0;
  if (!ready && waitpid(a->pid, &status, WNOHANG) == a->pid)
    fprintf(stderr, "%s exited: status 0x%x\n", a->path, status);
  CHECKF(ready &&
             sscanf(line, "ready %d %d %d %d", &pid, &a->tids[0], &a->tids[1], &a->tids[2]) == 4,
         "%s said: %s", a->path, ready ? line : "(nothing within 60 s)");
  CHECK_EQ_INT(pid, a->pid);
}

static void app_finish(app_t *a) {
  CHECK(write(a->to_app, "go\n", 3) == 3);
  close(a->to_app);
  int status = 0;
  CHECK(waitpid(a->pid, &status, 0) == a->pid);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s status %d", a->path, status);
}

/* ------------------------------------------------------------------------ */
/* The SDK's frames against gdb's                                            */
/* ------------------------------------------------------------------------ */

/* The frame lines that follow `header` (a line of text), up to a line that
   is not a frame. */
static bool sdk_stack(const char *text, const char *header, thread_stack_t *s) {
  const char *at = strstr(text, header);
  if (!at) return false;
  s->n = 0;
  for (const char *line = strchr(at, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
    frame_text_t ft;
    if (!frame_text_parse(line + 1, &ft)) break;
    CHECKF(!ft.truncated, "a stack of a parked thread ends <truncated: %s>", ft.name);
    CHECK(s->n < MAX_FRAMES);
    frame_t *f = &s->frames[s->n++];
    snprintf(f->name, sizeof f->name, "%s", ft.name);
    snprintf(f->file, sizeof f->file, "%s", ft.file);
    f->line = ft.line;
    f->is_inline = ft.is_inline;
  }
  return true;
}

static void compare(const char *what, const thread_stack_t *sdk, const thread_stack_t *gdb,
                    const char *log) {
  size_t at;
  const char *why = stack_differs(sdk, gdb, &at);
  if (why) {
    fprintf(stderr, "%s: thread %d, frame %zu: %s\n", what, sdk->tid, at, why);
    stack_print("SDK", sdk);
    stack_print("gdb", gdb);
    fprintf(stderr, "gdb's output:\n%s\n", log);
    exit(1);
  }
}

/* Each parked thread's stack in the SDK's text (one header per thread,
   `header_fmt` with its tid) against gdb's. */
static void check_against_gdb(const app_t *app, const char *what, const char *text,
                              const char *header_fmt) {
  static thread_stack_t gdb[16], sdk;
  char *log = NULL;
  size_t n = gdb_stacks(app->pid, NULL, gdb, 16, &log);
  for (int t = 0; t < THREADS; t++) {
    char header[64];
    snprintf(header, sizeof header, header_fmt, app->tids[t]);
    CHECKF(sdk_stack(text, header, &sdk), "%s: no \"%s\" in:\n%s", what, header, text);
    sdk.tid = app->tids[t];
    CHECKF(sdk.n > 0, "%s: no frames for thread %d in:\n%s", what, sdk.tid, text);
    const thread_stack_t *g = NULL;
    for (size_t i = 0; i < n && !g; i++)
      if (gdb[i].tid == app->tids[t]) g = &gdb[i];
    CHECKF(g != NULL, "gdb did not list thread %d:\n%s", app->tids[t], log);
    compare(what, &sdk, g, log);
    CHECKF(sdk.n >= app->min_frames, "%s: thread %d has only %zu frames", what, sdk.tid, sdk.n);
  }
  free(log);
}

/* ------------------------------------------------------------------------ */
/* Cases                                                                     */
/* ------------------------------------------------------------------------ */

/* perf_backtrace_all_threads_text against gdb. */
/* Run the app (exe) in `mode` and read the file it wrote (malloc'd). */
static char *app_output(app_t *app, const char *exe, const char *mode, const char *file) {
  app_start(app, exe, mode);
  char path[256];
  snprintf(path, sizeof path, "%s/%s", app->dir, file);
  return read_all(path);
}

/* The file sink's report of one manual event against gdb. */
static void check_file_sink(const char *exe, const char *what) {
  app_t app;
  char *text = app_output(&app, exe, "sink", "report.txt");
  CHECKF(strncmp(text, "event manual ", 13) == 0 && strstr(text, "reason=\"names\""), "%s", text);
  check_against_gdb(&app, what, text, "stack samples=1 thread=%d state=");
  free(text);
  app_finish(&app);
}

static void case_backtrace_text(void) {
  app_t app;
  char *text = app_output(&app, NAMES_APP_PATH, "text", "text.txt");
  check_against_gdb(&app, "perf_backtrace_all_threads_text", text, "thread %d \"");
  /* Inline frames are there, as lines of their own. */
  CHECKF(strstr(text, "[inline] shop::orders::Queue<long>::pop() ") &&
             strstr(text, "[inline] std::mutex::lock() ") &&
             strstr(text, "[inline] shop::pricing::Mixer<unsigned long>::mix_until(int const*, "
                          "unsigned long) ") &&
             strstr(text, " shop::pricing::post_price(shop::pricing::Ledger&, long) + "),
         "%s", text);
  free(text);
  app_finish(&app);
}

static void case_file_sink(void) {
  check_file_sink(NAMES_APP_PATH, "file sink");
}

/* The C program (-O2 -fomit-frame-pointer): perf_backtrace_all_threads_text
   and the file sink against gdb, the same threads frame for frame. */
static void case_c_backtrace_text(void) {
  app_t app;
  char *text = app_output(&app, NAMES_C_APP_PATH, "text", "text.txt");
  check_against_gdb(&app, "perf_backtrace_all_threads_text (C)", text, "thread %d \"");
  CHECKF(strstr(text, "[inline] queue_pop ") && strstr(text, " take_order + ") &&
             strstr(text, "[inline] ledger_record ") && strstr(text, " post_price + ") &&
             strstr(text, "[inline] mix_until ") && strstr(text, " spin_prices + "),
         "%s", text);
  free(text);
  app_finish(&app);
}

static void case_c_file_sink(void) {
  check_file_sink(NAMES_C_APP_PATH, "file sink (C)");
}

static const test_case_t g_cases[] = {
    TEST_CASE(backtrace_text),
    TEST_CASE(file_sink),
    TEST_CASE(c_backtrace_text),
    TEST_CASE(c_file_sink),
};

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
