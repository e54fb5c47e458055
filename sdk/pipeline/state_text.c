/*
 * state_text.c - thread states in words (see state_text.h).
 */
#include "sdk/pipeline/state_text.h"

#include <stdbool.h>
#include <stdio.h>

#include "perf_sdk.h"

static bool same_state(perf__sample_state_t a, perf__sample_state_t b);

void perf__state_tally_add(perf__state_tally_t *t, perf__sample_state_t s) {
  t->total++;
  if (s.state != PERF__STATE_UNKNOWN) t->known++;
  size_t i = 0;
  while (i < t->count && !same_state(t->items[i].state, s))
    i++;
  if (i == t->count) {
    if (t->count == PERF__STATE_TALLY_MAX) {
      s = (perf__sample_state_t){PERF__STATE_OTHER, PERF__FD_NONE, -2};
      i = t->count - 1;
      t->items[i].state = s; /* the last slot becomes "waiting elsewhere" */
    } else {
      t->items[t->count++].state = s;
    }
  }
  t->items[i].samples++;
}

void perf__state_words(perf__sample_state_t s, char *out, size_t len) {
  if (s.state == PERF__STATE_UNKNOWN) {
    snprintf(out, len, "unknown");
  } else if (s.state == PERF__STATE_RUNNING) {
    snprintf(out, len, "running");
  } else if (s.syscall == -2) {
    snprintf(out, len, "waiting elsewhere");
  } else if (s.syscall < 0) {
    snprintf(out, len, "waiting outside a system call");
  } else {
    const char *name = perf__syscall_name(s.syscall);
    const char *fd = perf__fd_kind_name((perf__fd_kind_t)s.fd_kind);
    char call[32];
    if (name) {
      snprintf(call, sizeof call, "%s()", name);
    } else {
      snprintf(call, sizeof call, "syscall %ld", (long)s.syscall);
    }
    snprintf(out, len, fd[0] ? "waiting in %s (%s)" : "waiting in %s", call, fd);
  }
}

int perf__format_state_tally(perf__strbuf_t *b, const perf__state_tally_t *t) {
  if (t->known == 0) return PERF_OK;
  bool shown[PERF__STATE_TALLY_MAX] = {false};
  int err = PERF_OK;
  for (size_t k = 0; k < t->count && !err; k++) {
    size_t best = t->count;
    for (size_t i = 0; i < t->count; i++)
      if (!shown[i] && (best == t->count || t->items[i].samples > t->items[best].samples)) best = i;
    shown[best] = true;
    char words[64];
    perf__state_words(t->items[best].state, words, sizeof words);
    unsigned pct = (unsigned)(((uint64_t)t->items[best].samples * 100 + t->total / 2) / t->total);
    err = perf__strbuf_appendf(b, "%s%s %u%%", k ? ", " : "", words, pct);
  }
  return err;
}

static bool same_state(perf__sample_state_t a, perf__sample_state_t b) {
  return a.state == b.state && a.fd_kind == b.fd_kind && a.syscall == b.syscall;
}
