/*
 * frame_json.c - stored and shown frames (see frame_json.h).
 */
#include "collector/model/frame_json.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/signature.h"
#include "sdk/base/frame_text.h"
#include "sdk/base/utf8.h"

/* A name or path from a debug file as a JSON string: a debug file may
   hold bytes that are not UTF-8 (a program built in a directory with a
   Latin-1 name), which JSON cannot carry; each is shown as U+FFFD rather
   than the frame, and the batch, failing. NULL only when out of memory. */
static json_t *debug_text(const char *s) {
  if (perf__utf8_valid(s)) return json_string(s);
  char *repaired = perf__utf8_sanitize(s);
  json_t *j = repaired ? json_string(repaired) : NULL;
  free(repaired);
  return j;
}

static int set_line(json_t *o, const symbol_line_t *l) {
  if (!l->function) return -1;
  int err = json_object_set_new(o, "function", debug_text(l->function));
  if (l->system_name) err |= json_object_set_new(o, "system_name", debug_text(l->system_name));
  if (l->file && l->line)
    err |= json_object_set_new(o, "file", debug_text(l->file)) |
           json_object_set_new(o, "line", json_integer(l->line));
  return err ? -1 : 0;
}

/* The answer's fields as an object of their own: the frame is changed
   only once all of them were made. NULL when one could not be. */
static json_t *symbol_fields(const symbol_t *sym, uint64_t ret) {
  json_t *o = json_object();
  int err = o ? set_line(o, &sym->lines[sym->count - 1]) |
                    json_object_set_new(o, "offset", json_integer((json_int_t)(sym->offset + ret)))
              : -1;
  if (sym->count > 1 && !err) {
    json_t *inlined = json_array();
    err |= inlined ? 0 : -1;
    for (size_t i = 0; inlined && i + 1 < sym->count; i++) {
      json_t *l = json_object();
      err |= !l || set_line(l, &sym->lines[i]) != 0 ? -1 : 0;
      err |= json_array_append_new(inlined, l);
    }
    err |= json_object_set_new(o, "inlined", inlined);
  }
  if (err) json_decref(o);
  return err ? NULL : o;
}

int frame_json_set_symbol(json_t *frame, const symbol_t *sym, uint64_t ret) {
  if (!sym->count) return 0;
  json_t *fields = symbol_fields(sym, ret);
  if (!fields) return -1;
  static const char *const OLD[] = {"function", "system_name", "file", "line", "inlined"};
  for (size_t i = 0; i < sizeof OLD / sizeof OLD[0]; i++)
    json_object_del(frame, OLD[i]);
  int err = json_object_update(frame, fields);
  json_decref(fields);
  return err ? -1 : 0;
}

json_t *frame_json_end(int end) {
  if (end == 0 || end == 1) return NULL;
  const char *why = perf__stack_end_text(end);
  char name[64];
  snprintf(name, sizeof name, "<truncated: %s>", why);
  return json_pack("{s:s, s:s}", "function", name, "truncated", why);
}

/* An inline frame: line l of the physical frame f. */
static json_t *inline_frame(const json_t *f, const json_t *l) {
  json_t *o = json_deep_copy(l);
  static const char *const KEEP[] = {"module", "address", "build_id", "executable"};
  int err = o ? json_object_set_new(o, "inline", json_true()) : -1;
  for (size_t i = 0; o && i < sizeof KEEP / sizeof KEEP[0]; i++) {
    json_t *v = json_object_get(f, KEEP[i]);
    if (v) err |= json_object_set(o, KEEP[i], v);
  }
  if (err) json_decref(o);
  return err ? NULL : o;
}

json_t *frame_json_expand(const json_t *frames) {
  if (!json_is_array(frames)) return NULL;
  json_t *out = json_array();
  size_t i, k;
  json_t *f, *l;
  json_array_foreach(frames, i, f) {
    if (!out) break;
    json_t *inlined = json_object_get(f, "inlined");
    json_array_foreach(inlined, k, l) {
      if (json_array_append_new(out, inline_frame(f, l)) != 0) {
        json_decref(out);
        return NULL;
      }
    }
    json_t *copy = json_copy((json_t *)f);
    if (copy) json_object_del(copy, "inlined");
    if (json_array_append_new(out, copy) != 0) {
      json_decref(out);
      return NULL;
    }
  }
  return out;
}

void frame_json_label(const json_t *frame, char out[FRAME_LABEL_MAX]) {
  const char *fn = json_string_value(json_object_get(frame, "function"));
  if (fn && *fn && json_is_true(json_object_get(frame, "inline"))) {
    perf__group_label(out, FRAME_LABEL_MAX - (sizeof FRAME_INLINE_SUFFIX - 1), fn, NULL, NULL);
    strcat(out, FRAME_INLINE_SUFFIX); /* fits: room was left for it */
    return;
  }
  perf__group_label(out, FRAME_LABEL_MAX, fn, json_string_value(json_object_get(frame, "module")),
                    json_string_value(json_object_get(frame, "address")));
}

json_t *frame_json_labels(const json_t *frames) {
  json_t *shown = frame_json_expand(frames), *names = json_array();
  bool ok = shown && names;
  size_t i;
  json_t *f;
  json_array_foreach(shown, i, f) {
    if (!ok) break;
    char label[FRAME_LABEL_MAX];
    frame_json_label(f, label);
    ok = json_array_append_new(names, json_string(label)) == 0;
  }
  json_decref(shown);
  if (!ok) json_decref(names), names = NULL;
  return names;
}
