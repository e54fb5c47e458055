/*
 * signature.c - stack signatures and hang keys for grouping (see
 * signature.h). Stacks are innermost first; the key is walked from the
 * root, so "root index k" of a stack of depth d is frames[d - 1 - k].
 */
#include "collector/model/signature.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/utf8.h"
#include "sdk/symbols/symbols.h"

/* A label cut short by size ends after its last whole UTF-8 character
   (names are UTF-8 once ingest repaired them; JSON needs it). */
static void end_on_character(char *out) {
  size_t n = strlen(out), at = 0;
  while (at < n) {
    size_t k = perf__utf8_seq((const unsigned char *)out + at, n - at);
    if (k == 0) break;
    at += k;
  }
  out[at] = '\0';
}

/* A label made whole UTF-8 text: a name that is not (a mangled name whose
   length prefix cuts a repaired character, as the demangler reads it, or
   a name from a hostile debug file) gets U+FFFD for its bad bytes, so a
   label always goes into JSON. Without memory it ends before the first
   bad byte. */
static void keep_utf8(char *out, size_t size) {
  if (perf__utf8_valid(out)) return;
  char *clean = perf__utf8_sanitize(out);
  if (clean) snprintf(out, size, "%s", clean);
  free(clean);
  end_on_character(out);
}

void perf__frame_label(char *out, size_t size, const char *function, const char *module,
                       const char *address) {
  if (function && *function) {
    if ((size_t)snprintf(out, size, "%s", function) >= size) end_on_character(out);
    keep_utf8(out, size);
    return;
  }
  if (!module) module = "??";
  const char *slash = strrchr(module, '/');
  if ((size_t)snprintf(out, size, "%s+%s", slash ? slash + 1 : module, address ? address : "0x0") >=
      size)
    end_on_character(out);
  keep_utf8(out, size);
}

void perf__group_label(char *out, size_t size, const char *function, const char *module,
                       const char *address) {
  if (size == 0) return;
  if (!function || !*function) {
    perf__frame_label(out, size, function, module, address);
    return;
  }
  char *demangled = perf__sym_demangle(function); /* NULL: not mangled (or no memory) */
  const char *name = demangled ? demangled : function;
  perf__sym_base_name(name, out, size);
  if (!out[0]) snprintf(out, size, "%s", name); /* a name that is all suffix stays as it is */
  if (strlen(name) >= size) end_on_character(out);
  keep_utf8(out, size);
  free(demangled);
}

void perf__truncated_label(char *out, size_t size, const char *reason) {
  if (reason && *reason)
    snprintf(out, size, "%s: %s>", PERF__TRUNCATED_PREFIX, reason);
  else
    snprintf(out, size, "%s>", PERF__TRUNCATED_PREFIX);
}

bool perf__stack_complete(const perf__named_stack_t *s) {
  return s->depth > 0 && strncmp(s->frames[s->depth - 1], PERF__TRUNCATED_PREFIX,
                                 sizeof PERF__TRUNCATED_PREFIX - 1) != 0;
}

/* Whether stack i counts for h's key (complete ones only, unless none is). */
static bool counted(const perf__hang_samples_t *h, size_t i, bool any_complete) {
  return h->samples[i] > 0 && (!any_complete || perf__stack_complete(&h->stacks[i]));
}

static bool any_complete(const perf__hang_samples_t *h) {
  for (size_t i = 0; i < h->n; i++)
    if (h->samples[i] > 0 && perf__stack_complete(&h->stacks[i])) return true;
  return false;
}

static const char *root_frame(const perf__named_stack_t *s, size_t k) {
  return s->frames[s->depth - 1 - k];
}

/* Whether the root path a (innermost first, alen frames) starts b's. */
static bool path_prefix(const char *const *a, size_t alen, const char *const *b, size_t blen) {
  if (alen > blen) return false;
  for (size_t k = 0; k < alen; k++)
    if (strcmp(a[alen - 1 - k], b[blen - 1 - k]) != 0) return false;
  return true;
}

/* The frame at root index k taken by more than half of total, among the
   stacks still on the path (alive); NULL when none. Weighted
   Boyer-Moore vote, then a count to confirm. */
static const char *majority_at(const perf__hang_samples_t *h, const bool *alive, size_t k,
                               uint64_t total) {
  const char *cand = NULL;
  uint64_t lead = 0;
  for (size_t i = 0; i < h->n; i++) {
    if (!alive[i] || h->stacks[i].depth <= k) continue;
    const char *name = root_frame(&h->stacks[i], k);
    uint64_t w = h->samples[i];
    if (lead == 0 || strcmp(name, cand) == 0) {
      if (lead == 0) cand = name;
      lead += w;
    } else if (lead >= w) {
      lead -= w;
    } else {
      cand = name;
      lead = w - lead;
    }
  }
  if (!cand) return NULL;
  uint64_t sum = 0;
  for (size_t i = 0; i < h->n; i++)
    if (alive[i] && h->stacks[i].depth > k && strcmp(root_frame(&h->stacks[i], k), cand) == 0)
      sum += h->samples[i];
  return sum > total - sum ? cand : NULL;
}

void perf__hang_key(const perf__hang_samples_t *h, const char **out, size_t max, size_t *len) {
  *len = 0;
  bool *alive = h->n ? calloc(h->n, sizeof *alive) : NULL;
  if (!alive) return;
  bool complete = any_complete(h);
  uint64_t total = 0;
  for (size_t i = 0; i < h->n; i++)
    if ((alive[i] = counted(h, i, complete))) total += h->samples[i];
  size_t k = 0;
  for (; k < max; k++) {
    const char *name = majority_at(h, alive, k, total);
    if (!name) break;
    out[k] = name; /* root first for now */
    for (size_t i = 0; i < h->n; i++)
      alive[i] =
          alive[i] && h->stacks[i].depth > k &&
          (root_frame(&h->stacks[i], k) == name || strcmp(root_frame(&h->stacks[i], k), name) == 0);
  }
  for (size_t a = 0, b = k; a + 1 < b; a++, b--) { /* innermost first */
    const char *t = out[a];
    out[a] = out[b - 1];
    out[b - 1] = t;
  }
  *len = k;
  free(alive);
}

size_t perf__hang_children(const perf__hang_samples_t *h, const char *const *key, size_t len,
                           const char **names, uint64_t *samples, size_t cap, uint64_t *self,
                           uint64_t *through) {
  bool complete = any_complete(h);
  size_t m = 0;
  uint64_t at_end = 0, passing = 0;
  for (size_t i = 0; i < h->n; i++) {
    const perf__named_stack_t *s = &h->stacks[i];
    if (!counted(h, i, complete) || !path_prefix(key, len, s->frames, s->depth)) continue;
    passing += h->samples[i];
    if (s->depth == len) {
      at_end += h->samples[i];
      continue;
    }
    const char *child = root_frame(s, len);
    size_t c = 0;
    while (c < m && strcmp(names[c], child) != 0)
      c++;
    if (c == m && m == cap) continue; /* no room: left out of the children, still passing */
    if (c == m) names[m] = child, samples[m++] = 0;
    samples[c] += h->samples[i];
  }
  if (self) *self = at_end;
  if (through) *through = passing;
  return m;
}

/* The hang's samples at the end of key going on into child, and all at
   that end. */
static uint64_t hang_child(const perf__hang_samples_t *h, const char *const *key, size_t len,
                           const char *child, uint64_t *through) {
  bool complete = any_complete(h);
  uint64_t into = 0;
  *through = 0;
  for (size_t i = 0; i < h->n; i++) {
    const perf__named_stack_t *s = &h->stacks[i];
    if (!counted(h, i, complete) || !path_prefix(key, len, s->frames, s->depth)) continue;
    *through += h->samples[i];
    if (s->depth > len && strcmp(root_frame(s, len), child) == 0) into += h->samples[i];
  }
  return into;
}

/* Group g's samples at its key's end going on into child, and all there. */
static uint64_t group_child(const perf__group_view_t *g, const char *child, uint64_t *through) {
  uint64_t into = 0;
  *through = g->self;
  for (size_t c = 0; c < g->n_children; c++) {
    *through += g->child_samples[c];
    if (strcmp(g->child_names[c], child) == 0) into += g->child_samples[c];
  }
  return into;
}

static bool share_of(uint64_t into, uint64_t through, unsigned share) {
  return through > 0 && into >= (through + share - 1) / share;
}

static bool big_enough(uint64_t into, uint64_t through) {
  return share_of(into, through, PERF__GROUP_CHILD_SHARE);
}

/* The children at root index k of the alive stacks (other than skip)
   holding at least 1/PERF__GROUP_LOOK_SHARE of through: a weighted
   Misra-Gries pass with PERF__GROUP_LOOK_SHARE counters finds every such
   child, a count confirms it. Written as turns at depth k into out; how many. */
static size_t heavy_children(const perf__hang_samples_t *h, const bool *alive, size_t k,
                             const char *skip, uint64_t through, perf__hang_turn_t *out,
                             size_t cap) {
  enum { SLOTS = PERF__GROUP_LOOK_SHARE }; /* finds all over 1/(SLOTS + 1) */
  const char *cand[SLOTS] = {0};
  uint64_t lead[SLOTS] = {0};
  for (size_t i = 0; i < h->n; i++) {
    if (!alive[i] || h->stacks[i].depth <= k) continue;
    const char *name = root_frame(&h->stacks[i], k);
    uint64_t w = h->samples[i];
    int at = -1, empty = -1;
    for (int c = 0; c < SLOTS; c++) {
      if (lead[c] && strcmp(cand[c], name) == 0) at = c;
      if (!lead[c] && empty < 0) empty = c;
    }
    if (at >= 0) {
      lead[at] += w;
    } else if (empty >= 0) {
      cand[empty] = name, lead[empty] = w;
    } else { /* take the smallest lead off every counter and the newcomer */
      uint64_t least = w;
      for (int c = 0; c < SLOTS; c++)
        if (lead[c] < least) least = lead[c];
      for (int c = 0; c < SLOTS; c++)
        lead[c] -= least;
      if (w > least)
        for (int c = 0; c < SLOTS; c++)
          if (!lead[c]) {
            cand[c] = name, lead[c] = w - least;
            break;
          }
    }
  }
  size_t m = 0;
  for (int c = 0; c < SLOTS && m < cap; c++) {
    if (!cand[c] || (skip && strcmp(cand[c], skip) == 0)) continue;
    bool seen = false;
    for (int d = 0; d < c; d++)
      seen = seen || (cand[d] && strcmp(cand[d], cand[c]) == 0);
    uint64_t into = 0;
    for (size_t i = 0; !seen && i < h->n; i++)
      if (alive[i] && h->stacks[i].depth > k && strcmp(root_frame(&h->stacks[i], k), cand[c]) == 0)
        into += h->samples[i];
    if (!seen && share_of(into, through, PERF__GROUP_LOOK_SHARE))
      out[m++] = (perf__hang_turn_t){k, cand[c]};
  }
  return m;
}

/* How many root frames two keys (innermost first) share. */
static size_t shared_root(const char *const *a, size_t alen, const char *const *b, size_t blen) {
  size_t k = 0;
  while (k < alen && k < blen && strcmp(a[alen - 1 - k], b[blen - 1 - k]) == 0)
    k++;
  return k;
}

bool perf__group_crosses(const perf__hang_samples_t *h, const char *const *key, size_t len,
                         size_t p, const char *g_next, uint64_t g_at, uint64_t g_into,
                         uint64_t *h_into) {
  /* The group's key leaves the hang's path after p frames, into g_next;
     the group's samples away from it go the hang's way (its key ends
     there, or turns into a sibling). */
  uint64_t h_at;
  *h_into = hang_child(h, key + len - p, p, g_next, &h_at);
  /* Pooled, or this hang's own samples alone: a long history that never
     went the hang's way would otherwise outvote a hang that went the
     group's way with most of its samples there. */
  return big_enough((g_at - g_into) + *h_into, g_at + h_at) || big_enough(*h_into, h_at);
}

long perf__group_pick(const perf__hang_samples_t *h, const char *const *key, size_t len,
                      const perf__group_view_t *groups, size_t n) {
  long deeper = -1, turned = -1;
  size_t turned_at = 0;
  uint64_t turned_into = 0;
  for (size_t i = 0; i < n; i++) {
    const perf__group_view_t *g = &groups[i];
    size_t p = shared_root(g->key, g->len, key, len);
    uint64_t h_at, h_into, g_at, g_into;
    if (p == 0) continue;
    if (p == g->len && p == len) return (long)i;
    if (p == g->len) { /* the group's key ends where the hang's goes on */
      const char *child = key[len - 1 - p];
      g_into = group_child(g, child, &g_at);
      h_into = hang_child(h, key + len - p, p, child, &h_at);
      /* The group's samples going the hang's way, the hang's the group's. */
      if (big_enough(g_into + (h_at - h_into), g_at + h_at) &&
          (deeper < 0 || g->len > groups[deeper].len))
        deeper = (long)i;
      continue;
    }
    g_at = g->through ? g->through[p - 1] : 0;
    g_into = g->through ? g->through[p] : 0;
    if (!perf__group_crosses(h, key, len, p, g->key[g->len - 1 - p], g_at, g_into, &h_into))
      continue;
    bool better = turned < 0 || p > turned_at ||
                  (p == turned_at && (g->len < groups[turned].len ||
                                      (g->len == groups[turned].len && h_into > turned_into)));
    if (better) turned = (long)i, turned_at = p, turned_into = h_into;
  }
  return deeper >= 0 ? deeper : turned;
}

void perf__hang_through(const perf__hang_samples_t *h, const char *const *key, size_t len,
                        uint64_t *through) {
  bool *alive = h->n ? calloc(h->n, sizeof *alive) : NULL;
  memset(through, 0, len * sizeof *through);
  if (!alive) return;
  bool complete = any_complete(h);
  for (size_t i = 0; i < h->n; i++)
    alive[i] = counted(h, i, complete);
  for (size_t d = 0; d < len; d++) {
    const char *frame = key[len - 1 - d];
    for (size_t i = 0; i < h->n; i++) {
      const perf__named_stack_t *s = &h->stacks[i];
      alive[i] = alive[i] && s->depth > d && strcmp(root_frame(s, d), frame) == 0;
      if (alive[i]) through[d] += h->samples[i];
    }
  }
  free(alive);
}

size_t perf__hang_turns(const perf__hang_samples_t *h, const char *const *key, size_t len,
                        perf__hang_turn_t *out, size_t cap) {
  bool *alive = h->n ? calloc(h->n, sizeof *alive) : NULL;
  if (!alive) return 0;
  bool complete = any_complete(h);
  for (size_t i = 0; i < h->n; i++)
    alive[i] = counted(h, i, complete);
  size_t m = 0;
  for (size_t p = 0; p < len && m < cap; p++) {
    const char *frame = key[len - 1 - p];
    uint64_t through = 0;
    for (size_t i = 0; i < h->n; i++) { /* on the key's first p + 1 frames */
      const perf__named_stack_t *s = &h->stacks[i];
      alive[i] = alive[i] && s->depth > p && strcmp(root_frame(s, p), frame) == 0;
      if (alive[i]) through += h->samples[i];
    }
    const char *next = p + 1 < len ? key[len - 2 - p] : NULL;
    m += heavy_children(h, alive, p + 1, next, through, out + m, cap - m);
  }
  free(alive);
  return m;
}

size_t perf__group_majority_len(const uint64_t *through, size_t len) {
  if (len == 0 || through[0] == 0) return len;
  size_t d = 1;
  while (d < len && through[d] > through[0] - through[d])
    d++;
  return d;
}

uint64_t perf__signature_add(uint64_t h, const char *frame) {
  for (const unsigned char *p = (const unsigned char *)frame; *p; p++)
    h = (h ^ *p) * 1099511628211ULL;
  return (h ^ 0x1f) * 1099511628211ULL; /* unit separator between names */
}

uint64_t perf__signature_hash(const char *const *frames, size_t depth) {
  uint64_t h = PERF__SIGNATURE_START;
  for (size_t i = 0; i < depth; i++)
    h = perf__signature_add(h, frames[i]);
  return h;
}
