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
 * memory, so those gdb frames are not expected.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "frame_names.h"
#include "tempdir.h"

#define MAX_FRAMES 128
#define THREADS 3 /* the app's parked threads: orders, ledger, pricing */

typedef struct frame_s {
  char name[FRAME_NAME_MAX];
  char file[FRAME_FILE_MAX];
  unsigned line;
  bool is_inline;
} frame_t;

typedef struct stack_s {
  int tid;
  size_t n;
  frame_t frames[MAX_FRAMES];
} thread_stack_t;

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

/* Read a line from fd within timeout_ms (the app's "ready"). */
static bool read_line(int fd, char *buf, size_t cap, int timeout_ms) {
  size_t n = 0;
  while (n + 1 < cap) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    ssize_t r = read(fd, buf + n, 1);
    if (r <= 0) return false;
    if (buf[n++] == '\n') break;
  }
  buf[n] = '\0';
  return true;
}

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
/* gdb's frames                                                              */
/* ------------------------------------------------------------------------ */

/* gdb's frames of every thread of pid, its tail-call frames left out. */
static size_t gdb_stacks(pid_t pid, thread_stack_t *stacks, size_t max, char **log) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "timeout 120 " PERF_GDB " -q -batch -nx -iex 'set debuginfod enabled off' -p %d "
           "-x " GDB_FRAMES_PY " 2>&1",
           (int)pid);
  FILE *p = popen(cmd, "r");
  CHECK(p != NULL);
  size_t n = 0, log_len = 0;
  *log = calloc(1, 1 << 20);
  char line[FRAME_NAME_MAX + 256];
  while (fgets(line, sizeof line, p)) {
    log_len +=
        (size_t)snprintf(*log + log_len, log_len < (1 << 20) ? (1 << 20) - log_len : 0, "%s", line);
    int tid, level, pos = 0;
    char kind[16], file[FRAME_FILE_MAX];
    unsigned lineno;
    uint64_t pc;
    if (sscanf(line, "@thread %d", &tid) == 1 && n < max) {
      stacks[n].tid = tid;
      stacks[n++].n = 0;
    } else if (n &&
               sscanf(line, "@frame %d %15s %" SCNx64 " %511s %u %n", &level, kind, &pc, file,
                      &lineno, &pos) == 5 &&
               pos > 0 && strcmp(kind, "tailcall") != 0) {
      thread_stack_t *s = &stacks[n - 1];
      CHECK(s->n < MAX_FRAMES);
      frame_t *f = &s->frames[s->n++];
      snprintf(f->name, sizeof f->name, "%.*s", (int)strcspn(line + pos, "\n"), line + pos);
      snprintf(f->file, sizeof f->file, "%s", strcmp(file, "-") ? file : "");
      f->line = lineno;
      f->is_inline = strcmp(kind, "inline") == 0;
    }
  }
  int status = pclose(p);
  CHECKF(status == 0 && n > 0, "gdb failed (status %d):\n%s", status, *log);
  return n;
}

/* ------------------------------------------------------------------------ */
/* The SDK's frames                                                          */
/* ------------------------------------------------------------------------ */

static char *read_all(const char *path) {
  FILE *f = fopen(path, "r");
  CHECKF(f != NULL, "cannot open %s", path);
  char *buf = calloc(1, 4 << 20);
  size_t n = fread(buf, 1, (4 << 20) - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}

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

/* ------------------------------------------------------------------------ */
/* Comparing                                                                 */
/* ------------------------------------------------------------------------ */

static void dump(const char *title, const thread_stack_t *s) {
  fprintf(stderr, "%s (thread %d, %zu frames):\n", title, s->tid, s->n);
  for (size_t i = 0; i < s->n; i++)
    fprintf(stderr, "  %2zu %s%s  %s:%u\n", i, s->frames[i].is_inline ? "[inline] " : "",
            s->frames[i].name, frame_basename(s->frames[i].file), s->frames[i].line);
}

/* Why frame i differs, or NULL. */
static const char *frame_differs(const frame_t *sdk, const frame_t *gdb) {
  static char why[FRAME_NAME_MAX * 2 + 64];
  char a[FRAME_NAME_MAX], b[FRAME_NAME_MAX];
  frame_name_norm(sdk->name, a, sizeof a);
  frame_name_norm(gdb->name, b, sizeof b);
  if (strcmp(a, b) != 0) {
    snprintf(why, sizeof why, "names differ: %s against %s", a, b);
    return why;
  }
  if (sdk->is_inline != gdb->is_inline) return "one is inline, the other not";
  if (sdk->line && gdb->line &&
      (sdk->line != gdb->line || strcmp(frame_basename(sdk->file), frame_basename(gdb->file)))) {
    snprintf(why, sizeof why, "positions differ: %s:%u against %s:%u", sdk->file, sdk->line,
             gdb->file, gdb->line);
    return why;
  }
  if (!sdk->line != !gdb->line) return "one has a source line, the other not";
  return NULL;
}

static void compare(const char *what, const thread_stack_t *sdk, const thread_stack_t *gdb,
                    const char *log) {
  const char *why = sdk->n == gdb->n ? NULL : "frame counts differ";
  size_t at = 0;
  for (; !why && at < sdk->n; at++)
    why = frame_differs(&sdk->frames[at], &gdb->frames[at]);
  if (why) {
    fprintf(stderr, "%s: thread %d, frame %zu: %s\n", what, sdk->tid, at ? at - 1 : 0, why);
    dump("SDK", sdk);
    dump("gdb", gdb);
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
  size_t n = gdb_stacks(app->pid, gdb, 16, &log);
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
