/*
 * log.c - delivers SDK messages to the app's log callback (see log.h), each
 * on one line. Any thread but the signal handler may log.
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

static void one_line(char *text);

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
  one_line(buf);
  s->fn((perf_log_level_t)level, buf, s->user);
}

/* A message is one line whatever it quotes (a server's reason, a path, an
   environment value): each control character becomes a space, and the
   ones that end it are dropped. A log line reader never sees a message
   split, or a forged line of its own. */
static void one_line(char *text) {
  size_t end = 0;
  for (size_t i = 0; text[i]; i++) {
    if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
      text[i] = ' ';
    else
      end = i + 1;
  }
  text[end] = '\0';
}
