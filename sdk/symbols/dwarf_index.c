/*
 * dwarf_index.c - one walk per compilation unit (see dwarf_index.h): the
 * DIEs in order (dwarf_child, dwarf_siblingof), a stack of the
 * namespace and class names around them; each DW_TAG_subprogram leaves its
 * code ranges (dwarf_ranges) and the prefix of names around it. Prefixes
 * are interned per unit (std:: and its classes repeat thousands of times).
 * Runs under the lock of the module that owns the DWARF handle.
 */
#include "sdk/symbols/dwarf_index.h"

#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/hash.h"

#define PREFIX_MAX 4096 /* a deeper nesting is cut: its functions go unqualified */
#define DEPTH_MAX 256   /* DIE nesting walked */
#define NEST_SCAN 64    /* ranges looked back at for nested functions */

typedef struct fn_range_s {
  uint64_t lo, hi, die;
} fn_range_t;

typedef struct fn_prefix_s {
  uint64_t die;
  uint32_t prefix; /* offset in names */
} fn_prefix_t;

struct perf__sym_unit_s {
  const void *key; /* the unit DIE's address in the mapped DWARF: unique across files */
  fn_range_t *ranges;
  size_t n_ranges, ranges_cap;
  fn_prefix_t *prefixes; /* in DIE order: sorted */
  size_t n_prefixes, prefixes_cap;
  char *names; /* prefixes, NUL-terminated, back to back; names[0] is "" */
  size_t names_len, names_cap;
  uint32_t *name_ix; /* open addressing: offset + 1 of a name, 0 empty */
  size_t name_ix_cap, n_names;
};

typedef struct walk_s {
  perf__sym_unit_t *u;
  char path[PREFIX_MAX];
  size_t len;      /* of path */
  uint32_t prefix; /* path's interned offset */
  bool failed;     /* out of memory */
} walk_t;

static perf__sym_unit_t *build_unit(Dwarf_Die *cu);
static void free_unit(perf__sym_unit_t *u);
static size_t unit_bytes(const perf__sym_unit_t *u);
static int compare_ranges(const void *a, const void *b);

const perf__sym_unit_t *perf__sym_index_unit(perf__sym_index_t *ix, Dwarf_Die *die, size_t *grown) {
  *grown = 0;
  Dwarf_Die cu;
  if (!dwarf_diecu(die, &cu, NULL, NULL)) return NULL;
  size_t lo = 0, hi = ix->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)ix->units[mid]->key < (uintptr_t)cu.addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < ix->n && ix->units[lo]->key == cu.addr) return ix->units[lo];
  if (ix->n == ix->cap) {
    size_t cap = ix->cap ? ix->cap * 2 : 16;
    perf__sym_unit_t **grown_units = realloc(ix->units, cap * sizeof *grown_units);
    if (!grown_units) return NULL;
    ix->units = grown_units;
    ix->cap = cap;
  }
  perf__sym_unit_t *u = build_unit(&cu);
  if (!u) return NULL;
  memmove(ix->units + lo + 1, ix->units + lo, (ix->n - lo) * sizeof *ix->units);
  ix->units[lo] = u;
  ix->n++;
  *grown = unit_bytes(u) + sizeof *ix->units;
  return u;
}

bool perf__sym_unit_function(const perf__sym_unit_t *u, uint64_t vaddr, uint64_t *die_offset) {
  size_t lo = 0, hi = u->n_ranges; /* the first range starting above vaddr */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (u->ranges[mid].lo <= vaddr)
      lo = mid + 1;
    else
      hi = mid;
  }
  /* Going back, the first range that holds vaddr starts last: the
     innermost of nested functions. */
  for (size_t i = lo, seen = 0; i-- > 0 && seen < NEST_SCAN; seen++) {
    if (vaddr < u->ranges[i].hi) {
      *die_offset = u->ranges[i].die;
      return true;
    }
  }
  return false;
}

const char *perf__sym_unit_prefix(const perf__sym_unit_t *u, uint64_t die_offset) {
  size_t lo = 0, hi = u->n_prefixes;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (u->prefixes[mid].die < die_offset)
      lo = mid + 1;
    else
      hi = mid;
  }
  bool found = lo < u->n_prefixes && u->prefixes[lo].die == die_offset;
  return u->names + (found ? u->prefixes[lo].prefix : 0);
}

void perf__sym_index_free(perf__sym_index_t *ix) {
  for (size_t i = 0; i < ix->n; i++)
    free_unit(ix->units[i]);
  free(ix->units);
  memset(ix, 0, sizeof *ix);
}

/* ------------------------------------------------------------------------ */
/* Building                                                                  */
/* ------------------------------------------------------------------------ */

static bool grow(void **items, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap * 2 : 64;
  while (c < need)
    c *= 2;
  void *p = realloc(*items, c * size);
  if (!p) return false;
  *items = p;
  *cap = c;
  return true;
}

/* The offset of the interned copy of s[0..len) in u->names. */
static bool intern(perf__sym_unit_t *u, const char *s, size_t len, uint32_t *out) {
  uint64_t h = perf__mix64(perf__fnv1a(PERF__FNV_OFFSET, s, len));
  if ((u->n_names + 1) * 2 > u->name_ix_cap) {
    size_t cap = u->name_ix_cap ? u->name_ix_cap * 2 : 64;
    uint32_t *ix = calloc(cap, sizeof *ix);
    if (!ix) return false;
    for (size_t i = 0; i < u->name_ix_cap; i++) {
      if (!u->name_ix[i]) continue;
      const char *n = u->names + u->name_ix[i] - 1;
      size_t j = perf__mix64(perf__fnv1a(PERF__FNV_OFFSET, n, strlen(n))) & (cap - 1);
      while (ix[j])
        j = (j + 1) & (cap - 1);
      ix[j] = u->name_ix[i];
    }
    free(u->name_ix);
    u->name_ix = ix;
    u->name_ix_cap = cap;
  }
  size_t j = h & (u->name_ix_cap - 1);
  for (; u->name_ix[j]; j = (j + 1) & (u->name_ix_cap - 1)) {
    const char *n = u->names + u->name_ix[j] - 1;
    if (strncmp(n, s, len) == 0 && n[len] == '\0') {
      *out = u->name_ix[j] - 1;
      return true;
    }
  }
  if (u->names_len + len + 1 > UINT32_MAX - 1 ||
      !grow((void **)&u->names, &u->names_cap, u->names_len + len + 1, 1))
    return false;
  memcpy(u->names + u->names_len, s, len);
  u->names[u->names_len + len] = '\0';
  *out = (uint32_t)u->names_len;
  u->name_ix[j] = (uint32_t)u->names_len + 1;
  u->names_len += len + 1;
  u->n_names++;
  return true;
}

static void add_function(walk_t *w, Dwarf_Die *die) {
  perf__sym_unit_t *u = w->u;
  uint64_t off = dwarf_dieoffset(die);
  if (w->prefix) {
    if (!grow((void **)&u->prefixes, &u->prefixes_cap, u->n_prefixes + 1, sizeof *u->prefixes)) {
      w->failed = true;
      return;
    }
    u->prefixes[u->n_prefixes++] = (fn_prefix_t){off, w->prefix};
  }
  Dwarf_Addr base, start, end;
  for (ptrdiff_t r = 0; (r = dwarf_ranges(die, r, &base, &start, &end)) > 0;) {
    if (end <= start) continue;
    if (!grow((void **)&u->ranges, &u->ranges_cap, u->n_ranges + 1, sizeof *u->ranges)) {
      w->failed = true;
      return;
    }
    u->ranges[u->n_ranges++] = (fn_range_t){start, end, off};
  }
}

static bool is_scope(int tag) {
  return tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
         tag == DW_TAG_union_type;
}

static void walk(walk_t *w, Dwarf_Die *parent, int depth);

/* The scope's name appended to the prefix while its children are walked
   ("(anonymous namespace)" as gdb spells an unnamed one; an unnamed class
   adds nothing). */
static void walk_scope(walk_t *w, Dwarf_Die *scope, int depth) {
  const char *name = dwarf_diename(scope);
  if (!name && dwarf_tag(scope) == DW_TAG_namespace) name = "(anonymous namespace)";
  size_t len = w->len, n = name ? strlen(name) : 0;
  uint32_t prefix = w->prefix;
  if (name && len + n + 2 < PREFIX_MAX) {
    memcpy(w->path + len, name, n);
    memcpy(w->path + len + n, "::", 2);
    w->len = len + n + 2;
    if (!intern(w->u, w->path, w->len, &w->prefix)) w->failed = true;
  }
  walk(w, scope, depth + 1);
  w->len = len;
  w->prefix = prefix;
}

/* A function's own children (nested functions, local classes) are local:
   named without a prefix, as gdb names them. */
static void walk_function(walk_t *w, Dwarf_Die *fn, int depth) {
  add_function(w, fn);
  size_t len = w->len;
  uint32_t prefix = w->prefix;
  w->len = 0;
  w->prefix = 0;
  walk(w, fn, depth + 1);
  w->len = len;
  w->prefix = prefix;
}

static void walk(walk_t *w, Dwarf_Die *parent, int depth) {
  Dwarf_Die child;
  if (depth > DEPTH_MAX || w->failed || dwarf_child(parent, &child) != 0) return;
  do {
    int tag = dwarf_tag(&child);
    if (tag == DW_TAG_subprogram)
      walk_function(w, &child, depth);
    else if (is_scope(tag))
      walk_scope(w, &child, depth);
    else if (dwarf_haschildren(&child))
      walk(w, &child, depth + 1);
  } while (!w->failed && dwarf_siblingof(&child, &child) == 0);
}

static perf__sym_unit_t *build_unit(Dwarf_Die *cu) {
  perf__sym_unit_t *u = calloc(1, sizeof *u);
  walk_t *w = malloc(sizeof *w);
  uint32_t empty;
  if (!u || !w || !intern(u, "", 0, &empty)) {
    free(w);
    free_unit(u);
    return NULL;
  }
  u->key = cu->addr;
  *w = (walk_t){u, {0}, 0, 0, false};
  walk(w, cu, 0);
  bool failed = w->failed;
  free(w);
  if (failed) {
    free_unit(u);
    return NULL;
  }
  /* A unit without functions has no ranges array at all (NULL), which
     qsort must not be given even for zero elements. */
  if (u->n_ranges > 1) qsort(u->ranges, u->n_ranges, sizeof *u->ranges, compare_ranges);
  return u;
}

static void free_unit(perf__sym_unit_t *u) {
  if (!u) return;
  free(u->ranges);
  free(u->prefixes);
  free(u->names);
  free(u->name_ix);
  free(u);
}

static size_t unit_bytes(const perf__sym_unit_t *u) {
  return sizeof *u + u->ranges_cap * sizeof *u->ranges + u->prefixes_cap * sizeof *u->prefixes +
         u->names_cap + u->name_ix_cap * sizeof *u->name_ix;
}

/* By start; at the same start the larger range first (the outer). */
static int compare_ranges(const void *a, const void *b) {
  const fn_range_t *x = a, *y = b;
  if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
  return (x->hi < y->hi) - (x->hi > y->hi);
}
