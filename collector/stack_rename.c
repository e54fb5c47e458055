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
    perf__frame_label(label, sizeof label, json_string_value(json_object_get(f, "function")),
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

/* The group of the names[0..n): its signature and names as JSON. */
static int set_group(const char *const *names, size_t n, store_group_t *g) {
  snprintf(g->signature, sizeof g->signature, "%016llx",
           (unsigned long long)perf__signature_hash(names, n));
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++)
    if (json_array_append_new(a, json_string(names[i])) != 0) {
      json_decref(a);
      a = NULL;
    }
  g->names_json = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  return g->names_json ? 0 : -1;
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
                   set_group((const char *const *)labels, (size_t)n, group) == 0 &&
                   (stack->frames_json = json_dumps(frames, JSON_COMPACT)) != NULL
               ? 1
               : -1;
  if (rc == 1) memcpy(stack->signature, group->signature, sizeof stack->signature);
  labels_free(labels, n < 0 ? 0 : (size_t)n);
  json_decref(frames);
  return rc;
}

static int hang_group(void *user, const char *const *frames_json, size_t n, store_group_t *group) {
  (void)user;
  perf__named_stack_t *stacks = calloc(n, sizeof *stacks);
  size_t made = 0, max_depth = 0;
  int rc = stacks ? 0 : -1;
  for (; rc == 0 && made < n; made++) {
    json_t *frames = json_loads(frames_json[made], 0, NULL);
    char **labels = NULL;
    long depth = json_is_array(frames) ? labels_of(frames, &labels) : -1;
    if (depth != (long)json_array_size(frames)) rc = -1;
    stacks[made] = (perf__named_stack_t){(const char *const *)labels, depth < 0 ? 0 : depth};
    if (stacks[made].depth > max_depth) max_depth = stacks[made].depth;
    json_decref(frames);
  }
  const char **shared = rc == 0 ? calloc(max_depth ? max_depth : 1, sizeof *shared) : NULL;
  size_t len = 0;
  if (shared) {
    perf__hang_signature(stacks, n, shared, max_depth, &len);
    /* No frame shared: the first (dominant) stack is the group. */
    rc = len ? set_group(shared, len, group) : set_group(stacks[0].frames, stacks[0].depth, group);
  }
  for (size_t i = 0; stacks && i < made; i++)
    labels_free((char **)stacks[i].frames, stacks[i].depth);
  free(shared);
  free(stacks);
  return shared || rc != 0 ? rc : -1;
}

store_renamer_t stack_renamer(symbolizer_t *symbols) {
  return (store_renamer_t){rename_stack, hang_group, symbols};
}
