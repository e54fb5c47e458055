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
 *
 * Names after idle gaps (glib_* cases): names_glib_app, a GLib program
 * (-O2 -g, perf_sdk_glib_watch, the file sink), hangs after gaps of 0.5,
 * 2, 3 and 10 s, each in functions no earlier event named, while the
 * writer's idle release drops the symbol tables and DWARF and unloads
 * libdw and libelf between them. Every frame of every stack of every event
 * in the report is compared with what gdb, attached to the same process
 * afterwards, says of the same address (gdb_frames.py with GDB_FRAMES_PCS:
 * the inline chain and lines of its blocks, else its minimal symbol, as
 * `bt` names a frame there): function names, inline frames, file:line; a
 * frame gdb calls ?? must read <module>+0x<its offset from the module's
 * load address>. perf-dump's text of the spooled batches must carry the
 * same frames, line for line. glib_idle_gaps runs with libc6-dbg's debug
 * file for libc; glib_idle_gaps_no_libc_debug in a mount namespace of its
 * own with an empty tmpfs over /usr/lib/debug (the app and gdb inherit
 * it), so libc is named from its own .dynsym, where gdb names it too.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "build_id.h"
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
  int tid;        /* a thread's stack (bt) */
  uint64_t pc;    /* or the frames of one address (GDB_FRAMES_PCS) */
  uint64_t start; /* there: where its last frame's function starts (0: unknown) */
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

/* gdb's frames of every thread of pid, its tail-call frames left out; or,
   pcs_file given (addresses in hex, one a line), the frames of each of
   those addresses (gdb_frames.py says how). */
static size_t gdb_stacks(pid_t pid, const char *pcs_file, thread_stack_t *stacks, size_t max,
                         char **log) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s%s%stimeout 120 " PERF_GDB " -q -batch -nx -iex 'set debuginfod enabled off' -p %d "
           "-x " GDB_FRAMES_PY " 2>&1",
           pcs_file ? "GDB_FRAMES_PCS='" : "", pcs_file ? pcs_file : "", pcs_file ? "' " : "",
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
      stacks[n].pc = 0;
      stacks[n++].n = 0;
    } else if (sscanf(line, "@pc %" SCNx64, &pc) == 1 && n < max) {
      stacks[n].tid = 0;
      stacks[n].pc = pc;
      stacks[n].start = 0;
      stacks[n++].n = 0;
    } else if (n && sscanf(line, "@start %" SCNx64, &pc) == 1) {
      stacks[n - 1].start = pc;
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

/* Why the two stacks differ (at frame *at), or NULL. */
static const char *stack_differs(const thread_stack_t *sdk, const thread_stack_t *gdb, size_t *at) {
  const char *why = sdk->n == gdb->n ? NULL : "frame counts differ";
  for (*at = 0; !why && *at < sdk->n; ++*at)
    why = frame_differs(&sdk->frames[*at], &gdb->frames[*at]);
  if (why && *at) --*at;
  return why;
}

static void compare(const char *what, const thread_stack_t *sdk, const thread_stack_t *gdb,
                    const char *log) {
  size_t at;
  const char *why = stack_differs(sdk, gdb, &at);
  if (why) {
    fprintf(stderr, "%s: thread %d, frame %zu: %s\n", what, sdk->tid, at, why);
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

/* ------------------------------------------------------------------------ */
/* Names after idle gaps (names_glib_app)                                    */
/* ------------------------------------------------------------------------ */

#define GLIB_HANGS 5
#define GLIB_GAP_SURE_MS 10000 /* libdw must have been unloaded in this gap */

/* Each hang's callback and the static function inlined into it. */
static const char *const k_glib_hangs[GLIB_HANGS][2] = {
    {"on_rebuild", "rebuild_index"},
    {"on_flush", "flush_journal"},
    {"on_sync", "wait_for_peer"},
    {"on_compact", "compact_store"},
    {"names_glib_reload_settings", "wait_for_settings"},
};

/* One physical frame of the report: its lines (inline ones first) in the
   report's line array, and the address gdb is asked about. */
typedef struct report_frame_s {
  size_t event, first, count;
  char module[256];
  uint64_t pc, lookup; /* lookup: a stack's first frame at pc, the others at pc - 1 */
  bool unnamed;
  uint64_t unnamed_offset; /* <module>+0x<offset> */
} report_frame_t;

typedef struct report_s {
  frame_text_t *lines; /* every frame line, in order */
  size_t n_lines;
  report_frame_t *frames;
  size_t n_frames, stacks, events;
  char *event_text[GLIB_HANGS]; /* each event's block of the report (malloc'd) */
} report_t;

typedef struct module_base_s {
  char name[256];
  uint64_t base;
} module_base_t;

static bool text_has(const char *text, const char *needle) {
  return strstr(text, needle) != NULL;
}

/* Read the events, stacks and frame lines of a report (or of perf-dump's text). */
static void report_parse(const char *text, report_t *r) {
  memset(r, 0, sizeof *r);
  size_t cap = 1;
  for (const char *p = text; *p; p++)
    cap += *p == '\n';
  r->lines = calloc(cap, sizeof *r->lines);
  r->frames = calloc(cap, sizeof *r->frames);
  CHECK(r->lines && r->frames);
  const char *event_start = NULL;
  bool in_stack = false;
  size_t stack_frames = 0, open_first = 0;
  for (const char *line = text; line && *line;
       line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    size_t len = strcspn(line, "\n");
    if (strncmp(line, "event ", 6) == 0) {
      CHECKF(r->events < GLIB_HANGS && strncmp(line, "event hang ", 11) == 0,
             "event %zu of the report is not a hang:\n%s", r->events, text);
      if (event_start)
        r->event_text[r->events - 1] = strndup(event_start, (size_t)(line - event_start));
      event_start = line;
      r->events++;
      in_stack = false;
      continue;
    }
    if (strncmp(line, "stack samples=", 14) == 0) {
      in_stack = true;
      stack_frames = 0;
      open_first = r->n_lines;
      r->stacks++;
      continue;
    }
    frame_text_t *ft = &r->lines[r->n_lines];
    char one[FRAME_NAME_MAX + FRAME_FILE_MAX + 512];
    snprintf(one, sizeof one, "%.*s", (int)len, line);
    if (!in_stack || !frame_text_parse(one, ft)) {
      in_stack = false;
      continue;
    }
    CHECKF(!ft->truncated, "a stack of the report ends <truncated: %s>:\n%s", ft->name, text);
    r->n_lines++;
    if (ft->is_inline) continue;
    report_frame_t *f = &r->frames[r->n_frames++];
    f->event = r->events - 1;
    f->first = open_first;
    f->count = r->n_lines - open_first;
    snprintf(f->module, sizeof f->module, "%s", ft->module);
    f->pc = ft->pc;
    f->lookup = stack_frames++ ? ft->pc - 1 : ft->pc;
    f->unnamed = ft->unnamed;
    f->unnamed_offset = ft->offset;
    open_first = r->n_lines;
  }
  if (event_start) r->event_text[r->events - 1] = strdup(event_start);
}

static void report_free(report_t *r) {
  free(r->lines);
  free(r->frames);
  for (size_t i = 0; i < GLIB_HANGS; i++)
    free(r->event_text[i]);
}

/* Each module's load address in pid: where its code is mapped less the
   code's file offset (the linker gives every segment of these modules its
   file offset as address). Only the loader maps a file executable: the
   SDK's own read-only maps of the same files (libelf) are left out. */
static size_t module_bases(pid_t pid, module_base_t *out, size_t max) {
  char path[64], line[4352];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  size_t n = 0;
  while (fgets(line, sizeof line, f) && n < max) {
    unsigned long long start, offset;
    char perms[8];
    int pos = 0;
    if (sscanf(line, "%llx-%*x %7s %llx %*s %*s %n", &start, perms, &offset, &pos) < 3 || !pos ||
        perms[2] != 'x')
      continue;
    const char *file = line + pos;
    if (*file != '/' && *file != '[') continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(frame_basename(file), "\n"),
             frame_basename(file));
    bool seen = false;
    for (size_t i = 0; i < n && !seen; i++)
      seen = strcmp(out[i].name, name) == 0;
    if (seen) continue;
    snprintf(out[n].name, sizeof out[n].name, "%s", name);
    out[n++].base = start - offset;
  }
  fclose(f);
  return n;
}

static uint64_t module_base(const module_base_t *bases, size_t n, const char *module) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(bases[i].name, module) == 0) return bases[i].base;
  CHECKF(false, "module %s is not mapped in the app", module);
  return 0;
}

typedef struct glib_app_s {
  pid_t pid;
  int to_app;
  char dir[160];
  char hangs[GLIB_HANGS][128]; /* "hang <n> gap_ms <ms> libdw <mapped|gone>" */
} glib_app_t;

/* names_glib_app started, its hangs done and every event written. */
static void glib_start(glib_app_t *a, const char *tag) {
  snprintf(a->dir, sizeof a->dir, "%s/glib-%s", tempdir_make("perf-names"), tag);
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
    execl(NAMES_GLIB_APP_PATH, NAMES_GLIB_APP_PATH, a->dir, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  a->to_app = in[1];
  char line[256];
  int pid = 0;
  size_t hangs = 0;
  /* 5 hangs of 800 ms and 15.5 s of gaps, then the flush: 120 s is plenty. */
  while (read_line(out[0], line, sizeof line, 120000) && sscanf(line, "ready %d", &pid) != 1) {
    CHECKF(hangs < GLIB_HANGS && strncmp(line, "hang ", 5) == 0, "names_glib_app said: %s", line);
    snprintf(a->hangs[hangs++], sizeof a->hangs[0], "%.*s", (int)strcspn(line, "\n"), line);
  }
  close(out[0]);
  CHECKF(pid == a->pid && hangs == GLIB_HANGS, "names_glib_app: ready %d after %zu hangs (pid %d)",
         pid, hangs, (int)a->pid);
}

static void glib_finish(glib_app_t *a) {
  CHECK(write(a->to_app, "go\n", 3) == 3);
  close(a->to_app);
  int status = 0;
  CHECK(waitpid(a->pid, &status, 0) == a->pid);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "names_glib_app status 0x%x", status);
}

/* Every hang is its own event, in its callback with its static helper
   inlined (names that no earlier event could have cached), under GLib's
   exported functions; libdw was unloaded in the longest gap. */
static void check_glib_events(const glib_app_t *a, const report_t *r, const char *text) {
  CHECKF(r->events == GLIB_HANGS, "%zu events, not %d:\n%s", r->events, GLIB_HANGS, text);
  for (size_t e = 0; e < GLIB_HANGS; e++) {
    const char *ev = r->event_text[e];
    char want[160];
    snprintf(want, sizeof want, " [inline] %s ", k_glib_hangs[e][1]);
    CHECKF(text_has(ev, want), "event %zu has no \"%s\":\n%s", e, want, ev);
    snprintf(want, sizeof want, " %s + ", k_glib_hangs[e][0]);
    CHECKF(text_has(ev, want), "event %zu has no \"%s\":\n%s", e, want, ev);
    CHECKF(text_has(ev, " g_main_context_dispatch + ") && text_has(ev, " g_main_loop_run + "),
           "event %zu: GLib's exported frames unnamed:\n%s", e, ev);
    for (size_t later = e + 1; later < GLIB_HANGS; later++) {
      snprintf(want, sizeof want, " %s + ", k_glib_hangs[later][0]);
      CHECKF(!text_has(ev, want), "event %zu already names %s", e, k_glib_hangs[later][0]);
    }
  }
  unsigned gap = 0;
  char libdw[16] = "";
  CHECK(sscanf(a->hangs[GLIB_HANGS - 1], "hang %*u gap_ms %u libdw %15s", &gap, libdw) == 2);
  CHECKF(gap == GLIB_GAP_SURE_MS && strcmp(libdw, "gone") == 0,
         "%s: the idle release did not unload libdw, the case proves nothing",
         a->hangs[GLIB_HANGS - 1]);
}

/* The report's physical frame f as a stack of its lines. */
static void frame_lines(const report_t *r, const report_frame_t *f, thread_stack_t *out) {
  out->n = 0;
  out->tid = 0;
  out->pc = f->lookup;
  for (size_t k = 0; k < f->count && out->n < MAX_FRAMES; k++) {
    const frame_text_t *ft = &r->lines[f->first + k];
    frame_t *d = &out->frames[out->n++];
    snprintf(d->name, sizeof d->name, "%s", ft->name);
    snprintf(d->file, sizeof d->file, "%s", ft->file);
    d->line = ft->line;
    d->is_inline = ft->is_inline;
  }
}

/* The frames of perf-dump's text of the spooled batches, at their runtime
   pcs (the text has module-relative addresses). */
static char *dump_batches(const glib_app_t *a, report_t *d, const module_base_t *bases,
                          size_t n_bases) {
  char cmd[512], path[256];
  snprintf(path, sizeof path, "%s/dump.txt", a->dir);
  snprintf(cmd, sizeof cmd, "'%s' '%s/report.txt.batches' > '%s' 2>&1", PERF_DUMP_PATH, a->dir,
           path);
  CHECKF(system(cmd) == 0, "%s failed", cmd);
  char *text = read_all(path);
  report_parse(text, d);
  for (size_t i = 0; i < d->n_frames; i++) {
    report_frame_t *f = &d->frames[i];
    uint64_t base = module_base(bases, n_bases, f->module);
    f->lookup += base;
    f->pc += base;
  }
  return text;
}

/* The distinct addresses the frames of both texts are looked up at, in a
   file for gdb_frames.py; returns how many. */
static size_t write_pcs(const char *path, const report_t *const *texts, size_t n_texts) {
  size_t cap = 1;
  for (size_t t = 0; t < n_texts; t++)
    cap += texts[t]->n_frames;
  uint64_t *pcs = calloc(cap, sizeof *pcs);
  CHECK(pcs != NULL);
  size_t n = 0;
  for (size_t t = 0; t < n_texts; t++) {
    for (size_t i = 0; i < texts[t]->n_frames; i++) {
      bool seen = false;
      for (size_t k = 0; k < n && !seen; k++)
        seen = pcs[k] == texts[t]->frames[i].lookup;
      if (!seen) pcs[n++] = texts[t]->frames[i].lookup;
    }
  }
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  for (size_t k = 0; k < n; k++)
    fprintf(f, "%" PRIx64 "\n", pcs[k]);
  CHECK(fclose(f) == 0);
  free(pcs);
  return n;
}

/* Why the text's physical frame rf differs from gdb's frames g of its
   address (at its line *at), or NULL; shown when `show`. */
static const char *frame_against_gdb(const report_t *r, const report_frame_t *rf,
                                     const thread_stack_t *g, uint64_t base, bool show,
                                     size_t *at) {
  static thread_stack_t sdk, want;
  frame_lines(r, rf, &sdk);
  /* Aliases (frame_names.h): gdb's name of the function the code belongs
     to stands for the SDK's when both start at the same address. */
  want = *g;
  const frame_text_t *phys = &r->lines[rf->first + rf->count - 1];
  if (want.n == sdk.n && !rf->unnamed && want.start && want.start == rf->pc - phys->offset)
    snprintf(want.frames[want.n - 1].name, FRAME_NAME_MAX, "%s", phys->name);
  const char *why = stack_differs(&sdk, &want, at);
  if (!why && rf->unnamed && rf->unnamed_offset != rf->pc - base) {
    *at = sdk.n - 1;
    why = "an unnamed frame's offset is not its address in the module";
  }
  if (why && show) {
    dump("SDK", &sdk);
    dump("gdb", g);
    fprintf(stderr, "  (gdb's function starts at 0x%" PRIx64 ")\n", g->start);
  }
  return why;
}

/* Every frame of the texts (the report, perf-dump's) against gdb's frames
   at the same address; each must agree. Returns the lines compared. */
static size_t compare_with_gdb(const glib_app_t *a, const report_t *const *texts,
                               const char *const *names, size_t n_texts, const module_base_t *bases,
                               size_t n_bases) {
  char path[256];
  snprintf(path, sizeof path, "%s/pcs.txt", a->dir);
  size_t n_pcs = write_pcs(path, texts, n_texts);
  thread_stack_t *gdb = calloc(n_pcs, sizeof *gdb);
  CHECK(gdb != NULL);
  char *log = NULL;
  size_t n = gdb_stacks(a->pid, path, gdb, n_pcs, &log);
  CHECKF(n == n_pcs, "gdb named %zu of %zu addresses:\n%s", n, n_pcs, log);
  size_t lines = 0, frames = 0, differ = 0;
  for (size_t t = 0; t < n_texts; t++) {
    const report_t *r = texts[t];
    for (size_t i = 0; i < r->n_frames; i++) {
      const report_frame_t *rf = &r->frames[i];
      const thread_stack_t *g = NULL;
      for (size_t k = 0; k < n && !g; k++)
        if (gdb[k].pc == rf->lookup) g = &gdb[k];
      CHECKF(g != NULL, "gdb said nothing of 0x%" PRIx64 ":\n%s", rf->lookup, log);
      size_t at = 0;
      uint64_t base = module_base(bases, n_bases, rf->module);
      const char *why = frame_against_gdb(r, rf, g, base, differ < 10, &at);
      frames++;
      lines += rf->count;
      if (!why || differ++ >= 10) continue;
      fprintf(stderr,
              "%s, event %zu: 0x%" PRIx64 " (%s, looked up at 0x%" PRIx64 "), line %zu: %s\n",
              names[t], rf->event, rf->pc, rf->module, rf->lookup, at, why);
    }
  }
  if (differ) fprintf(stderr, "gdb's output:\n%s\n", log);
  CHECKF(differ == 0, "%zu of %zu frames named otherwise than by gdb", differ, frames);
  free(log);
  free(gdb);
  return lines;
}

/* The whole run: the app's hangs after their gaps; every frame of the
   report and of the spooled batches against gdb. libc_debug: whether libc
   has its debug file here (its frames then carry lines). */
static void glib_idle_gaps(const char *tag, bool libc_debug) {
  glib_app_t a;
  glib_start(&a, tag);
  char path[256];
  snprintf(path, sizeof path, "%s/report.txt", a.dir);
  char *text = read_all(path);
  report_t r, d;
  report_parse(text, &r);
  check_glib_events(&a, &r, text);
  module_base_t bases[64];
  size_t n_bases = module_bases(a.pid, bases, 64);
  char *dump_text = dump_batches(&a, &d, bases, n_bases);
  CHECKF(d.events == r.events && d.stacks >= r.stacks,
         "the batches hold %zu events, %zu stacks; the report %zu, %zu:\n%s", d.events, d.stacks,
         r.events, r.stacks, dump_text);
  const report_t *texts[] = {&r, &d};
  const char *const names[] = {"report", "batches"};
  size_t lines = compare_with_gdb(&a, texts, names, 2, bases, n_bases);
  size_t libc_lines = 0, libc_positions = 0;
  for (size_t i = 0; i < r.n_lines; i++) {
    if (strcmp(r.lines[i].module, "libc.so.6") != 0) continue;
    libc_lines++;
    libc_positions += r.lines[i].line > 0;
  }
  CHECKF(libc_lines > 0, "no libc frame in:\n%s", text);
  if (libc_debug)
    CHECKF(libc_positions > 0, "libc has its debug file, yet none of its frames has a line");
  else
    CHECKF(libc_positions == 0, "libc's debug file is hidden, yet its frames have lines");
  glib_finish(&a);
  fprintf(stderr,
          "%s: %zu events; the report's %zu stacks, %zu frames, the batches' %zu stacks, %zu "
          "frames: %zu lines (%zu of libc in the report) named as gdb names the same addresses; "
          "before the hangs after the gaps: %s / %s / %s / %s\n",
          tag, r.events, r.stacks, r.n_frames, d.stacks, d.n_frames, lines, libc_lines, a.hangs[1],
          a.hangs[2], a.hangs[3], a.hangs[4]);
  report_free(&r);
  report_free(&d);
  free(text);
  free(dump_text);
}

static int find_libc(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  if (!info->dlpi_name || !strstr(info->dlpi_name, "/libc.so.6")) return 0;
  snprintf(data, 4096, "%s", info->dlpi_name);
  return 1;
}

/* libc's separate debug file (libc6-dbg), by build-id. */
static void libc_debug_file(char *out, size_t cap) {
  char libc[4096] = "", hex[81];
  dl_iterate_phdr(find_libc, libc);
  CHECKF(libc[0], "libc.so.6 is not loaded");
  build_id_of(libc, hex);
  snprintf(out, cap, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
}

static void case_glib_idle_gaps(void) {
  char debug[256];
  libc_debug_file(debug, sizeof debug);
  CHECKF(access(debug, R_OK) == 0, "%s: libc6-dbg is not installed (scripts/deps.sh)", debug);
  glib_idle_gaps("libc-debug", true);
}

/* This process and its children (the app, gdb, perf-dump) see an empty
   tmpfs at /usr/lib/debug, in a mount namespace of their own: nothing else
   on the machine notices. Needs CAP_SYS_ADMIN (CI runs as root). */
static void hide_debug_files(void) {
  CHECKF(unshare(CLONE_NEWNS) == 0,
         "unshare(CLONE_NEWNS): %s (a private mount namespace needs root)", strerror(errno));
  CHECKF(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "mount --make-rprivate /: %s",
         strerror(errno));
  CHECKF(mount("perf-no-debug", "/usr/lib/debug", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k") == 0,
         "mount tmpfs on /usr/lib/debug: %s", strerror(errno));
}

static void case_glib_idle_gaps_no_libc_debug(void) {
  char debug[256];
  libc_debug_file(debug, sizeof debug);
  hide_debug_files();
  CHECKF(access(debug, F_OK) != 0, "%s is still there", debug);
  glib_idle_gaps("no-libc-debug", false);
}

static const test_case_t g_cases[] = {
    TEST_CASE(backtrace_text), TEST_CASE(file_sink),      TEST_CASE(c_backtrace_text),
    TEST_CASE(c_file_sink),    TEST_CASE(glib_idle_gaps), TEST_CASE(glib_idle_gaps_no_libc_debug),
};

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
