/*
 * symbolize.c - the build-id symbolizer (see symbolize.h). A debug file is
 * opened as the module itself (perf__sym_module_open: objcopy
 * --only-keep-debug keeps .symtab and the DWARF); sdk/symbols reads its
 * DWARF lazily and caches lookups per address.
 */
#include "collector/symbols/symbolize.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "collector/base/log.h"
#include "collector/symbols/symbol_files.h"

#define MISSING_RECHECK_S SYMBOLIZER_MISSING_RECHECK_S

typedef struct entry_s {
  char id[SYMBOL_ID_MAX_HEX + 1]; /* "" for a free slot */
  perf__sym_module_t *module;     /* NULL: no usable file (as of checked_at) */
  double checked_at;
  uint64_t used; /* the cache's clock at the last lookup */
} entry_t;

struct symbolizer_s {
  pthread_mutex_t lock;
  const char *dir;
  entry_t *entries;
  size_t max;
  uint64_t clock;
  _Atomic uint64_t generation; /* symbolizer_forget's count */
};

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

symbolizer_t *symbolizer_new(const char *dir, size_t max_files) {
  symbolizer_t *s = calloc(1, sizeof *s);
  if (!s || !(s->entries = calloc(max_files ? max_files : 1, sizeof *s->entries))) {
    free(s);
    return NULL;
  }
  pthread_mutex_init(&s->lock, NULL);
  s->dir = dir;
  s->max = max_files ? max_files : 1;
  return s;
}

static void entry_clear(entry_t *e) {
  if (e->module) perf__sym_module_free(e->module);
  memset(e, 0, sizeof *e);
}

void symbolizer_free(symbolizer_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->max; i++)
    entry_clear(&s->entries[i]);
  pthread_mutex_destroy(&s->lock);
  free(s->entries);
  free(s);
}

const char *symbolizer_dir(const symbolizer_t *s) {
  return s->dir;
}

static bool has_file(const symbolizer_t *s, const char *id) {
  char path[4096];
  struct stat st;
  return symbol_file_path(s->dir, id, path, sizeof path) && stat(path, &st) == 0 &&
         S_ISREG(st.st_mode);
}

/* Open the debug file of e->id; e->module stays NULL when there is none. */
static void entry_load(const symbolizer_t *s, entry_t *e) {
  char path[4096];
  e->checked_at = monotonic_s();
  if (!has_file(s, e->id) || !symbol_file_path(s->dir, e->id, path, sizeof path)) return;
  int rc = perf__sym_module_open(path, NULL, 0, NULL, 0, s->dir, &e->module);
  if (rc != 0) {
    collector_log("symbols %s: not a readable ELF file (%d)\n", path, rc);
    e->module = NULL;
  }
}

/* id's entry, loaded or found missing; NULL only when it is missing. */
static entry_t *entry_for(symbolizer_t *s, const char *id) {
  entry_t *e = NULL, *oldest = &s->entries[0];
  for (size_t i = 0; i < s->max && !e; i++) {
    entry_t *c = &s->entries[i];
    if (strcmp(c->id, id) == 0) e = c;
    if (c->used < oldest->used) oldest = c;
  }
  if (e && !e->module && monotonic_s() - e->checked_at >= MISSING_RECHECK_S) entry_load(s, e);
  if (!e) {
    e = oldest; /* a free slot has used 0 */
    entry_clear(e);
    snprintf(e->id, sizeof e->id, "%s", id);
    entry_load(s, e);
  }
  e->used = ++s->clock;
  return e->module ? e : NULL;
}

/* A copy of text into out's arena; NULL when it does not fit. */
static const char *keep(symbol_t *out, size_t *used, const char *text) {
  if (!text) return NULL;
  size_t n = strlen(text) + 1;
  if (n > sizeof out->text - *used) return NULL;
  char *p = memcpy(out->text + *used, text, n);
  *used += n;
  return p;
}

static bool keep_line(symbol_t *out, size_t *used, const perf__sym_line_t *from,
                      symbol_line_t *to) {
  size_t mark = *used;
  to->function = keep(out, used, from->function);
  to->system_name = from->linkage ? keep(out, used, from->linkage) : NULL;
  to->file = from->file ? keep(out, used, from->file) : NULL;
  to->line = from->file ? from->line : 0;
  if (to->function && (!from->linkage || to->system_name) && (!from->file || to->file)) return true;
  *used = mark;
  return false;
}

/* The chain copied out of the module (its strings live as long as it): the
   physical function first, then the inline ones from the innermost while
   the arena has room. */
static void name_address(perf__sym_module_t *m, uint64_t addr, symbol_t *out) {
  perf__sym_frame_t f;
  if (!perf__sym_lookup(m, addr, &f) || f.count == 0) return;
  size_t used = 0, n = f.count;
  symbol_line_t physical;
  if (!keep_line(out, &used, &f.lines[n - 1], &physical)) return;
  size_t k = 0;
  while (k + 1 < n && keep_line(out, &used, &f.lines[k], &out->lines[k]))
    k++;
  out->lines[k] = physical;
  out->count = k + 1;
  out->offset = f.offset;
}

int symbolizer_lookup(symbolizer_t *s, const char *id, uint64_t address, symbol_t *out) {
  out->count = 0;
  out->offset = 0;
  pthread_mutex_lock(&s->lock);
  entry_t *e = entry_for(s, id);
  if (e) name_address(e->module, address, out);
  pthread_mutex_unlock(&s->lock);
  if (!e) return SYMBOLIZE_NO_FILE;
  return out->count ? SYMBOLIZE_FOUND : SYMBOLIZE_NO_SYMBOL;
}

bool symbolizer_available(symbolizer_t *s, const char *id) {
  pthread_mutex_lock(&s->lock);
  bool found = entry_for(s, id) != NULL;
  pthread_mutex_unlock(&s->lock);
  return found;
}

void symbolizer_forget(symbolizer_t *s, const char *id) {
  pthread_mutex_lock(&s->lock);
  for (size_t i = 0; i < s->max; i++)
    if (strcmp(s->entries[i].id, id) == 0) entry_clear(&s->entries[i]);
  atomic_fetch_add(&s->generation, 1);
  pthread_mutex_unlock(&s->lock);
}

uint64_t symbolizer_generation(symbolizer_t *s) {
  return atomic_load(&s->generation);
}

double symbolizer_now_s(void) {
  return monotonic_s();
}
