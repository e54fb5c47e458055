/*
 * state_text.c - thread states in words (see state_text.h).
 */
#include "sdk/wire/state_text.h"

#include <stdio.h>
#include <string.h>

#include "perf/v1/perf.pb-c.h"
#include "perf_sdk.h"

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
  static const char *const FDS[] = {"", "file", "pipe", "socket", "other"};
  const char *fd_name = fd > 0 && (size_t)fd < sizeof FDS / sizeof FDS[0] ? FDS[fd] : "";
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
