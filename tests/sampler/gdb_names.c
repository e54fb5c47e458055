/*
 * gdb_names.c - see gdb_names.h.
 */
#include "gdb_names.h"

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

size_t gdb_stacks(pid_t pid, const char *pcs_file, thread_stack_t *stacks, size_t max, char **log) {
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
      stacks[n] = (thread_stack_t){.tid = tid};
      n++;
    } else if (sscanf(line, "@pc %" SCNx64, &pc) == 1 && n < max) {
      stacks[n] = (thread_stack_t){.pc = pc};
      n++;
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

/* Why the two frames differ, or NULL. */
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

const char *stack_differs(const thread_stack_t *sdk, const thread_stack_t *gdb, size_t *at) {
  const char *why = sdk->n == gdb->n ? NULL : "frame counts differ";
  for (*at = 0; !why && *at < sdk->n; ++*at)
    why = frame_differs(&sdk->frames[*at], &gdb->frames[*at]);
  if (why && *at) --*at;
  return why;
}

void stack_print(const char *title, const thread_stack_t *s) {
  fprintf(stderr, "%s (thread %d, %zu frames):\n", title, s->tid, s->n);
  for (size_t i = 0; i < s->n; i++)
    fprintf(stderr, "  %2zu %s%s  %s:%u\n", i, s->frames[i].is_inline ? "[inline] " : "",
            s->frames[i].name, frame_basename(s->frames[i].file), s->frames[i].line);
}

bool read_line(int fd, char *buf, size_t cap, int timeout_ms) {
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

char *read_all(const char *path) {
  FILE *f = fopen(path, "r");
  CHECKF(f != NULL, "cannot open %s", path);
  char *buf = calloc(1, 4 << 20);
  CHECK(buf != NULL);
  size_t n = fread(buf, 1, (4 << 20) - 1, f);
  fclose(f);
  buf[n] = '\0';
  return buf;
}
