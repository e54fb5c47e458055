/*
 * dump_states.c - an event's thread states for perf-dump (see
 * dump_states.h).
 */
#include "tools/dump_states.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/strbuf.h"
#include "sdk/base/utf8.h"

char *dump_states_words(const perf__state_tally_t *t) {
  perf__strbuf_t sb;
  perf__strbuf_init(&sb, 4096);
  char *out = NULL;
  if (perf__format_state_tally(&sb, t) == 0) perf__strbuf_take(&sb, &out); /* "" when empty */
  perf__strbuf_free(&sb);
  return out;
}

/* A JSON string of s, bytes that are not UTF-8 replaced (a call's name cut
   to the tally's size, or a crafted batch's). */
static json_t *text_json(const char *s) {
  json_t *j = json_string(s);
  if (j) return j;
  char *clean = perf__utf8_sanitize(s);
  j = clean ? json_string(clean) : NULL;
  free(clean);
  return j;
}

static json_t *count_json(const perf__state_count_t *c) {
  json_t *o = json_object();
  if (o && (json_object_set_new(o, "state",
                                json_string(c->elsewhere ? "other" : perf__state_name(c->state))) ||
            json_object_set_new(o, "syscall", text_json(c->elsewhere ? "" : c->call)) ||
            json_object_set_new(o, "fd", json_string(perf__fd_name(c->fd))) ||
            json_object_set_new(o, "samples", json_integer(c->samples)))) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static json_t *thread_json(const Perf__V1__Batch *b, const Perf__V1__Event *e, uint32_t tid) {
  perf__state_tally_t t;
  perf__state_tally_event(b, e, tid, 0, &t);
  char *words = dump_states_words(&t);
  json_t *counts = json_array(), *o = json_object();
  bool ok = words && counts && o;
  for (size_t i = 0; ok && i < t.count; i++)
    ok = json_array_append_new(counts, count_json(&t.items[i])) == 0;
  ok = ok && json_object_set_new(o, "tid", json_integer(tid)) == 0 &&
       json_object_set_new(o, "states", text_json(words)) == 0 &&
       json_object_set(o, "counts", counts) == 0;
  free(words);
  json_decref(counts);
  if (!ok) {
    json_decref(o);
    return NULL;
  }
  return o;
}

json_t *dump_states_json(const Perf__V1__Batch *b, const Perf__V1__Event *e) {
  uint32_t *tids;
  size_t n;
  json_t *a = json_array();
  if (!a || perf__state_threads(e, &tids, &n) != 0) {
    json_decref(a);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    json_t *t = thread_json(b, e, tids[i]);
    if (!t || json_array_append_new(a, t) != 0) {
      json_decref(a);
      a = NULL;
      break;
    }
  }
  free(tids);
  return a;
}
