/*
 * stack_rename.c - renaming stored stacks once symbols arrive (see
 * stack_rename.h). A stored frame (frame_json.h) with a build-id is
 * looked up again, at address - 1 below the innermost frame (a return
 * address), as ingest does, whether the device named it or not: the
 * debug file's answer (inline chain, lines, names) replaces what it had.
 */
#include "collector/symbols/stack_rename.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/frame_json.h"
#include "collector/model/hang_key.h"
#include "collector/model/signature.h"

/* Name one frame at depth from the debug files; true when that changed it. */
static bool name_frame(symbolizer_t *symbols, symbol_t *sym, json_t *f, size_t depth, int *err) {
  const char *id = json_string_value(json_object_get(f, "build_id"));
  const char *text = json_string_value(json_object_get(f, "address"));
  if (!id || !text) return false;
  uint64_t address = strtoull(text, NULL, 16);
  uint64_t ret = depth > 0 && address > 0;
  if (symbolizer_lookup(symbols, id, address - ret, sym) != SYMBOLIZE_FOUND) return false;
  json_t *before = json_deep_copy(f);
  if (!before) return *err = -1, false;
  /* An answer that cannot be stored leaves the frame as it was (set_symbol
     keeps it so): the stack's other frames, and the other stacks, are
     still renamed. */
  bool changed = frame_json_set_symbol(f, sym, ret) == 0 && !json_equal(before, f);
  json_decref(before);
  return changed;
}

static void labels_free(char **labels, size_t n) {
  for (size_t i = 0; labels && i < n; i++)
    free(labels[i]);
  free(labels);
}

/* The frames' labels (strdup'ed, expanded, innermost first) into *labels;
   the count, or -1 on failure (nothing left to free). */
static long labels_of(json_t *frames, char ***labels) {
  json_t *names = frame_json_labels(frames);
  size_t n = json_array_size(names);
  *labels = names ? calloc(n ? n : 1, sizeof **labels) : NULL;
  if (!*labels) return json_decref(names), -1;
  for (size_t i = 0; i < n; i++)
    if (!((*labels)[i] = strdup(json_string_value(json_array_get(names, i))))) {
      json_decref(names);
      labels_free(*labels, i);
      return *labels = NULL, -1;
    }
  json_decref(names);
  return (long)n;
}

static int rename_stack(void *user, const char *frames_json, store_stack_t *stack,
                        store_group_t *group) {
  json_t *frames = json_loads(frames_json, 0, NULL);
  if (!json_is_array(frames)) {
    json_decref(frames);
    return 0; /* not ours to fix */
  }
  bool changed = false;
  int err = 0;
  symbol_t *sym = malloc(sizeof *sym);
  for (size_t i = 0; sym && i < json_array_size(frames); i++)
    changed |= name_frame(user, sym, json_array_get(frames, i), i, &err);
  free(sym);
  if (!sym || err || !changed) {
    json_decref(frames);
    return !sym || err ? -1 : 0;
  }
  char **labels;
  long n = labels_of(frames, &labels);
  int rc = n >= 0 && hang_key_group((const char *const *)labels, (size_t)n, group) == 0 &&
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
    if (depth < 0) rc = -1;
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
