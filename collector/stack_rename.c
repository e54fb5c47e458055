/*
 * stack_rename.c - renaming stored stacks once symbols arrive (see
 * stack_rename.h). A stored frame is {"function"?, "module", "address",
 * "offset", "build_id"?, "file"?, "line"?} (ingest.c); one without a
 * function but with a build-id is looked up again, at address - 1 below
 * the innermost frame (a return address), as ingest does.
 */
#include "stack_rename.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hang_key.h"
#include "signature.h"

#define LABEL_MAX 512

/* Name one frame at depth from the debug files; true when it got a name. */
static bool name_frame(symbolizer_t *symbols, json_t *f, size_t depth) {
  const char *fn = json_string_value(json_object_get(f, "function"));
  const char *id = json_string_value(json_object_get(f, "build_id"));
  const char *text = json_string_value(json_object_get(f, "address"));
  if ((fn && *fn) || !id || !text) return false;
  uint64_t address = strtoull(text, NULL, 16);
  bool ret = depth > 0 && address > 0;
  symbol_t sym;
  if (symbolizer_lookup(symbols, id, address - ret, &sym) != SYMBOLIZE_FOUND) return false;
  int err = json_object_set_new(f, "function", json_string(sym.function)) ||
            json_object_set_new(f, "offset", json_integer((json_int_t)(sym.offset + ret)));
  if (!err && sym.file[0])
    err = json_object_set_new(f, "file", json_string(sym.file)) ||
          json_object_set_new(f, "line", json_integer(sym.line));
  return !err;
}

/* The frames' labels (strdup'ed, innermost first) into *labels; the count,
   or -1 on failure. */
static long labels_of(json_t *frames, char ***labels) {
  size_t n = json_array_size(frames);
  *labels = calloc(n ? n : 1, sizeof **labels);
  if (!*labels) return -1;
  for (size_t i = 0; i < n; i++) {
    json_t *f = json_array_get(frames, i);
    char label[LABEL_MAX];
    perf__group_label(label, sizeof label, json_string_value(json_object_get(f, "function")),
                      json_string_value(json_object_get(f, "module")),
                      json_string_value(json_object_get(f, "address")));
    if (!((*labels)[i] = strdup(label))) return (long)i; /* the caller frees what was made */
  }
  return (long)n;
}

static void labels_free(char **labels, size_t n) {
  for (size_t i = 0; labels && i < n; i++)
    free(labels[i]);
  free(labels);
}

static int rename_stack(void *user, const char *frames_json, store_stack_t *stack,
                        store_group_t *group) {
  json_t *frames = json_loads(frames_json, 0, NULL);
  if (!json_is_array(frames)) {
    json_decref(frames);
    return 0; /* not ours to fix */
  }
  bool changed = false;
  for (size_t i = 0; i < json_array_size(frames); i++)
    changed |= name_frame(user, json_array_get(frames, i), i);
  if (!changed) {
    json_decref(frames);
    return 0;
  }
  char **labels;
  long n = labels_of(frames, &labels);
  int rc = n == (long)json_array_size(frames) &&
                   hang_key_group((const char *const *)labels, (size_t)n, group) == 0 &&
                   (stack->frames_json = json_dumps(frames, JSON_COMPACT)) != NULL
               ? 1
               : -1;
  if (rc == 1) memcpy(stack->signature, group->signature, sizeof stack->signature);
  labels_free(labels, n < 0 ? 0 : (size_t)n);
  json_decref(frames);
  return rc;
}

/* The hang's stacks (their labels) and samples: hang->owned. */
typedef struct hang_stacks_s {
  perf__named_stack_t *stacks;
  uint64_t *samples;
  size_t n;
} hang_stacks_t;

static void hang_free(void *user, store_hang_t *hang) {
  (void)user;
  hang_stacks_t *hs = hang->owned;
  hang_key_release(hang);
  for (size_t i = 0; hs && i < hs->n; i++)
    labels_free((char **)hs->stacks[i].frames, hs->stacks[i].depth);
  if (hs) free(hs->stacks), free(hs->samples);
  free(hs);
  *hang = (store_hang_t){0};
}

static int hang_group(void *user, const char *const *frames_json, const uint64_t *samples, size_t n,
                      store_hang_t *hang) {
  *hang = (store_hang_t){0};
  hang_stacks_t *hs = calloc(1, sizeof *hs);
  if (!hs) return -1;
  hang->owned = hs;
  hs->stacks = calloc(n ? n : 1, sizeof *hs->stacks);
  hs->samples = calloc(n ? n : 1, sizeof *hs->samples);
  int rc = hs->stacks && hs->samples ? 0 : -1;
  for (; rc == 0 && hs->n < n; hs->n++) {
    json_t *frames = json_loads(frames_json[hs->n], 0, NULL);
    char **labels = NULL;
    long depth = json_is_array(frames) ? labels_of(frames, &labels) : -1;
    if (depth != (long)json_array_size(frames)) rc = -1;
    hs->stacks[hs->n] = (perf__named_stack_t){(const char *const *)labels, depth < 0 ? 0 : depth};
    hs->samples[hs->n] = samples[hs->n];
    json_decref(frames);
  }
  hang->samples = (perf__hang_samples_t){hs->stacks, hs->samples, hs->n};
  if (rc == 0) rc = hang_key_make(hang, 0);
  if (rc != 0) hang_free(user, hang);
  return rc;
}

store_renamer_t stack_renamer(symbolizer_t *symbols) {
  return (store_renamer_t){rename_stack, hang_group, hang_free, symbols};
}
