/*
 * log.c - delivers SDK messages to the app's log callback (see log.h).
 * Any thread but the signal handler may log.
 */
#include "sdk/base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

typedef struct {
  perf_log_fn fn;
  void *user;
} log_sink_t;

static _Atomic(log_sink_t *) g_sink;
static log_sink_t g_sinks[2];
static atomic_int g_next;

void perf__log_set(perf_log_fn fn, void *user) {
  if (!fn) {
    atomic_store(&g_sink, NULL);
    return;
  }
  /* Two alternating slots: a reader that loaded the previous one still sees a
     complete pair while the other is rewritten. */
  log_sink_t *s = &g_sinks[atomic_fetch_add(&g_next, 1) & 1];
  s->fn = fn;
  s->user = user;
  atomic_store(&g_sink, s);
}

void perf__log(int level, const char *fmt, ...) {
  log_sink_t *s = atomic_load(&g_sink);
  if (!s) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  s->fn((perf_log_level_t)level, buf, s->user);
}
