/*
 * headline.c - a stack's or a group's headline (see headline.h).
 */
#include "collector/api/headline.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/frame_json.h"
#include "collector/model/in_app.h"

/* A name and its place among a group's names. */
typedef struct named_s {
  const char *name;
  size_t k;
} named_t;

/* One group being headed: its names and, per name, the frame found for it. */
typedef struct heading_s {
  const char **names; /* innermost first */
  size_t n;
  named_t *by_name; /* the names sorted */
  json_t **frames;  /* per name: its frame (a reference), or NULL */
  bool exact;       /* frames came from one stack ending in the names */
} heading_t;

static int cmp_named(const void *x, const void *y) {
  const named_t *a = x, *b = y;
  int c = strcmp(a->name, b->name);
  return c ? c : (a->k > b->k) - (a->k < b->k);
}

static void set_frame(heading_t *h, size_t k, json_t *frame) {
  json_decref(h->frames[k]);
  h->frames[k] = json_incref(frame);
}

/* The first index of by_name whose name is label, or h->n. */
static size_t first_named(const heading_t *h, const char *label) {
  size_t lo = 0, hi = h->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (strcmp(h->by_name[mid].name, label) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < h->n && strcmp(h->by_name[lo].name, label) == 0 ? lo : h->n;
}

/* The stack's frames for the names: all at once when its last frames are
   the names (the group's root part), else each name still without a frame
   from a frame of the same name. True when exact. */
static bool take_frames(heading_t *h, json_t *shown) {
  size_t m = json_array_size(shown);
  char(*labels)[FRAME_LABEL_MAX] = m ? malloc(m * sizeof *labels) : NULL;
  if (!labels) return false;
  for (size_t j = 0; j < m; j++)
    frame_json_label(json_array_get(shown, j), labels[j]);
  bool exact = m >= h->n;
  for (size_t k = 0; exact && k < h->n; k++)
    exact = strcmp(labels[m - h->n + k], h->names[k]) == 0;
  for (size_t k = 0; exact && k < h->n; k++)
    set_frame(h, k, json_array_get(shown, m - h->n + k));
  for (size_t j = 0; !exact && j < m; j++)
    for (size_t i = first_named(h, labels[j]);
         i < h->n && strcmp(h->by_name[i].name, labels[j]) == 0; i++)
      if (!h->frames[h->by_name[i].k]) set_frame(h, h->by_name[i].k, json_array_get(shown, j));
  free(labels);
  return exact;
}

static int on_group_stack(size_t index, const char *frames_json, void *user) {
  heading_t *h = &((heading_t *)user)[index];
  if (h->exact) return 1;
  json_t *stored = json_loads(frames_json, 0, NULL);
  json_t *shown = stored ? frame_json_expand(stored) : NULL;
  json_decref(stored);
  h->exact = shown && take_frames(h, shown);
  json_decref(shown);
  return h->exact;
}

static json_t *name_and_module(const heading_t *h, size_t k) {
  const char *module =
      h->frames[k] ? json_string_value(json_object_get(h->frames[k], "module")) : NULL;
  return json_pack("{s:s, s:s?}", "function", h->names[k], "module", module);
}

/* "in_app" and "headline" on out. */
static int head(const heading_t *h, json_t *out) {
  json_t *marks = json_array();
  size_t first = h->n;
  for (size_t k = 0; marks && k < h->n; k++) {
    bool in_app = h->frames[k] && in_app_frame(h->frames[k]);
    if (in_app && first == h->n) first = k;
    if (json_array_append_new(marks, json_boolean(in_app)) != 0) json_decref(marks), marks = NULL;
  }
  json_t *headline = json_null();
  if (h->n) {
    size_t at = first < h->n ? first : 0;
    headline = name_and_module(h, at);
    json_t *index = first < h->n ? json_integer((json_int_t)first) : json_null();
    if (headline && (json_object_set_new(headline, "in_app_index", index) != 0 ||
                     json_object_set_new(headline, "innermost", name_and_module(h, 0)) != 0))
      json_decref(headline), headline = NULL;
  }
  if (!marks || !headline || json_object_set_new(out, "in_app", marks) != 0) {
    json_decref(headline);
    return -1;
  }
  return json_object_set_new(out, "headline", headline) == 0 ? 0 : -1;
}

static void heading_free(heading_t *h) {
  for (size_t k = 0; h->frames && k < h->n; k++)
    json_decref(h->frames[k]);
  free(h->frames);
  free(h->by_name);
  free(h->names);
}

static int heading_init(heading_t *h, const json_t *names) {
  memset(h, 0, sizeof *h);
  h->n = json_array_size(names);
  size_t cap = h->n ? h->n : 1;
  h->names = calloc(cap, sizeof *h->names);
  h->by_name = calloc(cap, sizeof *h->by_name);
  h->frames = calloc(cap, sizeof *h->frames);
  if (!h->names || !h->by_name || !h->frames) return -1;
  for (size_t k = 0; k < h->n; k++) {
    const char *name = json_string_value(json_array_get(names, k));
    h->names[k] = name ? name : "";
    h->by_name[k] = (named_t){h->names[k], k};
  }
  if (h->n > 1) qsort(h->by_name, h->n, sizeof *h->by_name, cmp_named);
  return 0;
}

/* One call of group_stacks: objects first .. first + n - 1 (n at most
   STORE_GROUP_STACKS_SIGS). */
static int head_chunk(const store_ops_t *ops, store_t *store, json_t *objects, size_t first,
                      size_t n, const char *sig_key) {
  heading_t h[STORE_GROUP_STACKS_SIGS];
  const char *sigs[STORE_GROUP_STACKS_SIGS];
  size_t made = 0;
  int rc = 0;
  for (; rc == 0 && made < n; made++) {
    json_t *o = json_array_get(objects, first + made);
    rc = heading_init(&h[made], json_object_get(o, "frames"));
    sigs[made] = json_string_value(json_object_get(o, sig_key));
    if (!sigs[made]) rc = -1;
  }
  if (rc == 0 && ops->group_stacks(store, sigs, n, on_group_stack, h) != STORE_OK) rc = -1;
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = head(&h[i], json_array_get(objects, first + i));
  for (size_t i = 0; i < made; i++)
    heading_free(&h[i]);
  return rc;
}

int headline_objects(const store_ops_t *ops, store_t *store, json_t *objects, const char *sig_key) {
  size_t n = json_array_size(objects);
  for (size_t i = 0; i < n; i += STORE_GROUP_STACKS_SIGS) {
    size_t chunk = n - i < STORE_GROUP_STACKS_SIGS ? n - i : STORE_GROUP_STACKS_SIGS;
    if (head_chunk(ops, store, objects, i, chunk, sig_key) != 0) return -1;
  }
  return 0;
}

int headline_mark_frames(json_t *shown) {
  size_t i;
  json_t *f;
  json_array_foreach(shown, i, f) {
    if (json_object_set_new(f, "in_app", json_boolean(in_app_frame(f))) != 0) return -1;
  }
  return 0;
}
