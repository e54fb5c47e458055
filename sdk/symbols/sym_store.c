/*
 * sym_store.c - a module's interned names and cached lookups (see
 * sym_store.h). Names live in blocks that are never moved or freed before
 * the module, so the pointers handed out stay valid; the cache can be
 * emptied at any time because it only points at names. Runs under the
 * module's lock.
 */
#include "sdk/symbols/sym_store.h"

#include <stdlib.h>
#include <string.h>

#include "sdk/base/hash.h"

#define BLOCK_BYTES (64u << 10)

struct perf__sym_block_s {
  perf__sym_block_t *next;
  size_t used, cap;
  char data[];
};

struct perf__sym_name_s {
  const char *text;
  uint64_t hash;
  uint32_t len;
  uint32_t display; /* name + 1 of the display form; 0 not made yet */
};

struct perf__sym_slot_s {
  uint64_t vaddr;
  uint64_t offset;
  uint32_t first; /* in lines */
  uint8_t count;
  uint8_t used;
  uint8_t from_dwarf;
};

static int64_t intern(perf__sym_store_t *s, const char *text, size_t len);
static int64_t find_name(const perf__sym_store_t *s, const char *text, size_t len, uint64_t h);
static int64_t add_name(perf__sym_store_t *s, const char *text, size_t len, uint64_t h);
static char *block_alloc(perf__sym_store_t *s, size_t n);
static int grow_name_index(perf__sym_store_t *s);
static perf__sym_slot_t *slot_for(const perf__sym_store_t *s, uint64_t vaddr);
static int grow_slots(perf__sym_store_t *s);
static void empty_cache(perf__sym_store_t *s);

void perf__sym_store_init(perf__sym_store_t *s) {
  memset(s, 0, sizeof *s);
}

void perf__sym_store_free(perf__sym_store_t *s) {
  for (perf__sym_block_t *b = s->blocks, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  free(s->names);
  free(s->name_ix);
  free(s->slots);
  free(s->lines);
  memset(s, 0, sizeof *s);
}

const char *perf__sym_store_name(perf__sym_store_t *s, const char *text, size_t len) {
  int64_t i = intern(s, text, len);
  return i < 0 ? NULL : s->names[i].text;
}

const char *perf__sym_store_display(perf__sym_store_t *s, const char *raw,
                                    const char **stored_raw) {
  int64_t i = intern(s, raw, strlen(raw));
  if (i < 0) return NULL;
  *stored_raw = s->names[i].text;
  if (!s->names[i].display) {
    char *demangled = perf__sym_demangle(raw);
    int64_t d = demangled ? intern(s, demangled, strlen(demangled)) : -1;
    free(demangled);
    /* Not mangled, or no room for the demangled form: shown raw. */
    s->names[i].display = (uint32_t)(d >= 0 ? d : i) + 1;
  }
  return s->names[s->names[i].display - 1].text;
}

bool perf__sym_store_get(const perf__sym_store_t *s, uint64_t vaddr, perf__sym_frame_t *out) {
  const perf__sym_slot_t *slot = s->slots_cap ? slot_for(s, vaddr) : NULL;
  if (!slot || !slot->used) return false;
  out->count = slot->count;
  out->offset = slot->offset;
  out->from_dwarf = slot->from_dwarf;
  if (slot->count) memcpy(out->lines, s->lines + slot->first, slot->count * sizeof *out->lines);
  return true;
}

void perf__sym_store_put(perf__sym_store_t *s, uint64_t vaddr, const perf__sym_frame_t *f) {
  if (s->n_slots >= PERF__SYM_CACHE_MAX) empty_cache(s);
  if ((s->n_slots + 1) * 2 > s->slots_cap && grow_slots(s) != 0) return;
  if (s->n_lines + f->count > s->lines_cap) {
    size_t cap = s->lines_cap ? s->lines_cap * 2 : 256;
    while (cap < s->n_lines + f->count)
      cap *= 2;
    perf__sym_line_t *grown = realloc(s->lines, cap * sizeof *grown);
    if (!grown) return;
    s->lines = grown;
    s->lines_cap = cap;
  }
  perf__sym_slot_t *slot = slot_for(s, vaddr);
  if (slot->used) return; /* already there */
  if (f->count) memcpy(s->lines + s->n_lines, f->lines, f->count * sizeof *f->lines);
  *slot = (perf__sym_slot_t){vaddr, f->offset,    (uint32_t)s->n_lines, (uint8_t)f->count,
                             1,     f->from_dwarf};
  s->n_lines += f->count;
  s->n_slots++;
}

size_t perf__sym_store_bytes(const perf__sym_store_t *s) {
  size_t n = s->names_cap * sizeof *s->names + s->name_ix_cap * sizeof *s->name_ix +
             s->slots_cap * sizeof *s->slots + s->lines_cap * sizeof *s->lines;
  for (const perf__sym_block_t *b = s->blocks; b; b = b->next)
    n += sizeof *b + b->cap;
  return n;
}

/* ------------------------------------------------------------------------ */
/* Names                                                                     */
/* ------------------------------------------------------------------------ */

/* Index of the stored copy of text[0..len), added when new; -1 when full. */
static int64_t intern(perf__sym_store_t *s, const char *text, size_t len) {
  uint64_t h = perf__mix64(perf__fnv1a(PERF__FNV_OFFSET, text, len));
  int64_t i = find_name(s, text, len, h);
  return i >= 0 ? i : add_name(s, text, len, h);
}

static int64_t find_name(const perf__sym_store_t *s, const char *text, size_t len, uint64_t h) {
  if (!s->name_ix_cap) return -1;
  for (size_t j = h & (s->name_ix_cap - 1);; j = (j + 1) & (s->name_ix_cap - 1)) {
    uint32_t e = s->name_ix[j];
    if (!e) return -1;
    const perf__sym_name_t *n = &s->names[e - 1];
    if (n->hash == h && n->len == len && memcmp(n->text, text, len) == 0) return (int64_t)e - 1;
  }
}

static int64_t add_name(perf__sym_store_t *s, const char *text, size_t len, uint64_t h) {
  size_t cost = len + 1 + sizeof(perf__sym_name_t) + 2 * sizeof(uint32_t);
  if (len > UINT32_MAX || s->name_bytes + cost > PERF__SYM_NAMES_MAX) return -1;
  if ((s->n_names + 1) * 2 > s->name_ix_cap && grow_name_index(s) != 0) return -1;
  if (s->n_names == s->names_cap) {
    size_t cap = s->names_cap ? s->names_cap * 2 : 64;
    perf__sym_name_t *grown = realloc(s->names, cap * sizeof *grown);
    if (!grown) return -1;
    s->names = grown;
    s->names_cap = cap;
  }
  char *copy = block_alloc(s, len + 1);
  if (!copy) return -1;
  memcpy(copy, text, len);
  copy[len] = '\0';
  s->names[s->n_names] = (perf__sym_name_t){copy, h, (uint32_t)len, 0};
  size_t j = h & (s->name_ix_cap - 1);
  while (s->name_ix[j])
    j = (j + 1) & (s->name_ix_cap - 1);
  s->name_ix[j] = (uint32_t)++s->n_names;
  s->name_bytes += cost;
  return (int64_t)s->n_names - 1;
}

static char *block_alloc(perf__sym_store_t *s, size_t n) {
  perf__sym_block_t *b = s->blocks;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > BLOCK_BYTES ? n : BLOCK_BYTES;
    b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->next = s->blocks;
    b->used = 0;
    b->cap = cap;
    s->blocks = b;
  }
  char *p = b->data + b->used;
  b->used += n;
  return p;
}

static int grow_name_index(perf__sym_store_t *s) {
  size_t cap = s->name_ix_cap ? s->name_ix_cap * 2 : 256;
  uint32_t *ix = calloc(cap, sizeof *ix);
  if (!ix) return -1;
  for (size_t i = 0; i < s->n_names; i++) {
    size_t j = s->names[i].hash & (cap - 1);
    while (ix[j])
      j = (j + 1) & (cap - 1);
    ix[j] = (uint32_t)i + 1;
  }
  free(s->name_ix);
  s->name_ix = ix;
  s->name_ix_cap = cap;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Answers by address                                                        */
/* ------------------------------------------------------------------------ */

/* The slot holding vaddr, or the empty one where it would go. */
static perf__sym_slot_t *slot_for(const perf__sym_store_t *s, uint64_t vaddr) {
  size_t j = perf__mix64(vaddr) & (s->slots_cap - 1);
  while (s->slots[j].used && s->slots[j].vaddr != vaddr)
    j = (j + 1) & (s->slots_cap - 1);
  return &s->slots[j];
}

static int grow_slots(perf__sym_store_t *s) {
  size_t cap = s->slots_cap ? s->slots_cap * 2 : 256;
  perf__sym_slot_t *slots = calloc(cap, sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < s->slots_cap; i++) {
    if (!s->slots[i].used) continue;
    size_t j = perf__mix64(s->slots[i].vaddr) & (cap - 1);
    while (slots[j].used)
      j = (j + 1) & (cap - 1);
    slots[j] = s->slots[i];
  }
  free(s->slots);
  s->slots = slots;
  s->slots_cap = cap;
  return 0;
}

/* Forget every answer (the names stay). */
static void empty_cache(perf__sym_store_t *s) {
  if (s->slots) memset(s->slots, 0, s->slots_cap * sizeof *s->slots);
  s->n_slots = 0;
  s->n_lines = 0;
}
