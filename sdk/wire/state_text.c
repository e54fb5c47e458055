/*
 * state_text.c - thread states in words (see state_text.h).
 */
#include "sdk/wire/state_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/v1/perf.pb-c.h"
#include "perf_sdk.h"

const char *perf__state_name(int state) {
  static const char *const NAMES[] = {"unknown", "running", "lock", "io", "poll", "sleep", "other"};
  return state >= 0 && (size_t)state < sizeof NAMES / sizeof NAMES[0] ? NAMES[state] : "unknown";
}

const char *perf__fd_name(int fd) {
  static const char *const NAMES[] = {"", "file", "pipe", "socket", "other"};
  return fd >= 0 && (size_t)fd < sizeof NAMES / sizeof NAMES[0] ? NAMES[fd] : "";
}

void perf__state_tally_add(perf__state_tally_t *t, int state, int fd, const char *call) {
  t->total++;
  if (state != PERF__V1__SAMPLE_STATE__SAMPLE_STATE_UNKNOWN) t->known++;
  if (!call) call = "";
  size_t i = 0;
  while (i < t->count &&
         (t->items[i].elsewhere || t->items[i].state != state || t->items[i].fd != fd ||
          strncmp(t->items[i].call, call, PERF__STATE_CALL_MAX - 1) != 0))
    i++;
  if (i == t->count) {
    if (t->count == PERF__STATE_TALLY_MAX) {
      i = t->count - 1; /* the last slot becomes "waiting elsewhere" */
      t->items[i].elsewhere = true;
    } else {
      perf__state_count_t *c = &t->items[t->count++];
      *c = (perf__state_count_t){(uint8_t)state, (uint8_t)fd, false, "", 0};
      snprintf(c->call, sizeof c->call, "%s", call);
    }
  }
  t->items[i].samples++;
}

void perf__state_words(int state, int fd, const char *call, char *out, size_t len) {
  const char *fd_name = perf__fd_name(fd);
  if (state == PERF__V1__SAMPLE_STATE__SAMPLE_STATE_RUNNING) {
    snprintf(out, len, "running");
  } else if (state <= PERF__V1__SAMPLE_STATE__SAMPLE_STATE_UNKNOWN ||
             state > PERF__V1__SAMPLE_STATE__SAMPLE_STATE_OTHER) {
    snprintf(out, len, "unknown");
  } else if (!call || !call[0]) {
    snprintf(out, len, "waiting outside a system call");
  } else {
    bool numbered = strncmp(call, "syscall", 7) == 0 && (call[7] == ' ' || !call[7]);
    snprintf(out, len, fd_name[0] ? "waiting in %s%s (%s)" : "waiting in %s%s", call,
             numbered ? "" : "()", fd_name);
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
    const perf__state_count_t *c = &t->items[best];
    char words[80];
    if (c->elsewhere)
      snprintf(words, sizeof words, "waiting elsewhere");
    else
      perf__state_words(c->state, c->fd, c->call, words, sizeof words);
    unsigned pct = (unsigned)(((uint64_t)c->samples * 100 + t->total / 2) / t->total);
    err = perf__strbuf_appendf(b, "%s%s %u%%", k ? ", " : "", words, pct);
  }
  return err;
}

void perf__state_tally_event(const Perf__V1__Batch *b, const Perf__V1__Event *e, uint32_t tid,
                             uint32_t stack, perf__state_tally_t *t) {
  memset(t, 0, sizeof *t);
  size_t n = e->n_sample_states;
  if (n == 0 || n != e->n_sample_stacks) return; /* no states: an older SDK */
  for (size_t i = 0; i < n; i++) {
    uint32_t sample_tid = e->n_sample_tids ? e->sample_tids[i] : e->tid;
    if (sample_tid != tid || (stack && e->sample_stacks[i] != stack)) continue;
    uint32_t call = e->n_sample_syscalls ? e->sample_syscalls[i] : 0;
    int fd = e->n_sample_fds ? (int)e->sample_fds[i] : 0;
    perf__state_tally_add(t, (int)e->sample_states[i], fd,
                          call < b->n_strings ? b->strings[call] : "");
  }
}

int perf__state_threads(const Perf__V1__Event *e, uint32_t **tids, size_t *n) {
  *tids = NULL;
  *n = 0;
  size_t count = e->n_sample_states;
  if (count == 0 || count != e->n_sample_stacks) return 0;
  uint32_t *out = malloc(count * sizeof *out);
  if (!out) return PERF_E_NO_MEMORY;
  size_t m = 0;
  for (size_t i = 0; i < count && m < PERF__STATE_THREADS_MAX; i++) {
    uint32_t tid = e->n_sample_tids ? e->sample_tids[i] : e->tid;
    bool seen = false;
    for (size_t k = 0; k < m && !seen; k++)
      seen = out[k] == tid;
    if (!seen && e->sample_states[i] != PERF__V1__SAMPLE_STATE__SAMPLE_STATE_UNKNOWN)
      out[m++] = tid;
  }
  *tids = out;
  *n = m;
  return 0;
}
