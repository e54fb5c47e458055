/*
 * test_names_gaps.c - names after idle gaps, against gdb. names_glib_app
 * (a GLib program, -O2 -g, perf_sdk_glib_watch, the file sink) hangs after
 * gaps of 0.5, 2, 3 and 10 s, each time in functions no earlier event
 * named, while the writer's idle release drops the symbol tables and DWARF
 * and unloads libdw and libelf between the hangs. Every frame of every
 * stack of every event, in the report and in perf-dump's text of the
 * spooled batches, is compared with what gdb, attached to the same process
 * afterwards, says of the same address (gdb_frames.py with GDB_FRAMES_PCS:
 * the inline chain and lines of its blocks, else its minimal symbol, as
 * `bt` names a frame there): function names, inline frames, file:line; a
 * frame gdb calls ?? must read <module>+0x<its offset from the module's
 * load address>. libc_debug runs with libc6-dbg's debug file for libc;
 * no_libc_debug in a mount namespace of its own with an empty tmpfs over
 * /usr/lib/debug (the app, gdb and perf-dump inherit it), so that libc is
 * named from its own .dynsym, where gdb names it too.
 */
#include <errno.h>
#include <inttypes.h>
#include <link.h>
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
#include "gdb_names.h"
#include "tempdir.h"

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
    stack_print("SDK", &sdk);
    stack_print("gdb", g);
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

static void case_libc_debug(void) {
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

static void case_no_libc_debug(void) {
  char debug[256];
  libc_debug_file(debug, sizeof debug);
  hide_debug_files();
  CHECKF(access(debug, F_OK) != 0, "%s is still there", debug);
  glib_idle_gaps("no-libc-debug", false);
}

static const test_case_t g_cases[] = {
    TEST_CASE(libc_debug),
    TEST_CASE(no_libc_debug),
};

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
