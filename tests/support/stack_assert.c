/*
 * stack_assert.c - see stack_assert.h.
 */
#include "stack_assert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "test_util.h"

static bool name_matches(const char *sym, const char *alternatives);
static bool stack_has_chain_at(const stack_syms_t *s, const char *const *chain, size_t n,
                               size_t start);

/* Capture until the chain is at the top (at_top) or anywhere in the stack. */
static char *wait_until(pid_t tid, const char *const *chain, size_t n, bool at_top,
                        int timeout_ms) {
  long long deadline = now_ms() + timeout_ms;
  char *text = NULL;
  for (;;) {
    perf_free(text);
    text = NULL;
    if (perf_backtrace_thread_text(tid, &text) == PERF_OK) {
      stack_syms_t *s = malloc(sizeof *s);
      if (!s) return text;
      stack_parse(text, s);
      bool ok = at_top ? s->count >= n && stack_has_chain_at(s, chain, n, 0)
                       : stack_has_chain(s, chain, n);
      free(s);
      if (ok) return text;
    }
    if (now_ms() > deadline) return text;
    usleep(2000);
  }
}

void stack_parse(const char *text, stack_syms_t *out) {
  out->count = 0;
  const char *line = strchr(text, '\n'); /* skip the "thread" header */
  while (line && *++line && *line != '\n' && out->count < STACK_MAX_FRAMES) {
    unsigned idx;
    char module[256], pc[64], sym[96];
    /* Sanitizer interceptors (an ASan build's read wrapper) are real frames
       but not part of any chain a test expects. */
    if (sscanf(line, "%u %255s %63s %95s", &idx, module, pc, sym) == 4 &&
        strcmp(sym, "[inline]") != 0 && strncmp(module, "libasan", 7) != 0 &&
        strncmp(module, "libubsan", 8) != 0) {
      if (!strstr(sym, "+0x")) sym[strcspn(sym, ".")] = '\0'; /* unnamed: <module>+0x<offset> */
      snprintf(out->symbols[out->count++], sizeof out->symbols[0], "%s", sym);
    }
    line = strchr(line, '\n');
  }
}

bool stack_has_chain(const stack_syms_t *s, const char *const *chain, size_t n) {
  for (size_t start = 0; start + n <= s->count; start++)
    if (stack_has_chain_at(s, chain, n, start)) return true;
  return false;
}

static bool stack_has_chain_at(const stack_syms_t *s, const char *const *chain, size_t n,
                               size_t start) {
  size_t k = 0;
  while (k < n && start + k < s->count && name_matches(s->symbols[start + k], chain[k]))
    k++;
  return k == n;
}

char *stack_wait_for_frame0(pid_t tid, const char *frame0, int timeout_ms) {
  return wait_until(tid, &frame0, 1, true, timeout_ms);
}

char *stack_wait_for_chain(pid_t tid, const char *const *chain, size_t n, int timeout_ms) {
  return wait_until(tid, chain, n, false, timeout_ms);
}

void stack_dump(const char *title, const char *text) {
  fprintf(stderr, "---- %s ----\n%s\n--------\n", title, text ? text : "(no text)");
}

static bool name_matches(const char *sym, const char *alternatives) {
  size_t len = strlen(sym);
  for (const char *p = alternatives; *p;) {
    size_t alt = strcspn(p, "|");
    if (alt == len && strncmp(p, sym, len) == 0) return true;
    p += alt;
    if (*p == '|') p++;
  }
  return false;
}
