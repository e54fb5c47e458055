/*
 * symbolize.c - the build-id symbolizer (see symbolize.h). A debug file is
 * reported to its own Dwfl as the module's main file (dwfl_report_elf, at
 * its own addresses); its callbacks never look anywhere else (no
 * /usr/lib/debug, no debuginfod: this runs on the ingest path).
 */
#include "symbolize.h"

#include <elfutils/libdwfl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "symbol_files.h"

#define MISSING_RECHECK_S 2.0 /* a missing file is looked for again after this */

typedef struct entry_s {
  char id[SYMBOL_ID_MAX_HEX + 1]; /* "" for a free slot */
  Dwfl *dwfl;                     /* NULL: no usable file (as of checked_at) */
  Dwfl_Module *module;
  GElf_Addr bias; /* Dwfl address = ELF address + bias */
  double checked_at;
  uint64_t used; /* the cache's clock at the last lookup */
} entry_t;

struct symbolizer_s {
  pthread_mutex_t lock;
  const char *dir;
  entry_t *entries;
  size_t max;
  uint64_t clock;
};

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The debug file has everything: no other file is ever searched for. */
static int no_debuginfo(Dwfl_Module *m, void **user, const char *name, Dwarf_Addr base,
                        const char *file, const char *debuglink, GElf_Word crc, char **path) {
  (void)m, (void)user, (void)name, (void)base, (void)file, (void)debuglink, (void)crc, (void)path;
  return -1;
}

static const Dwfl_Callbacks CALLBACKS = {
    .find_debuginfo = no_debuginfo,
    .section_address = dwfl_offline_section_address,
};

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
  if (e->dwfl) dwfl_end(e->dwfl);
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

/* Open the debug file of e->id; e->dwfl stays NULL when there is none. */
static void entry_load(const symbolizer_t *s, entry_t *e) {
  char path[4096];
  e->checked_at = monotonic_s();
  if (!has_file(s, e->id) || !symbol_file_path(s->dir, e->id, path, sizeof path)) return;
  Dwfl *dwfl = dwfl_begin(&CALLBACKS);
  if (!dwfl) return;
  dwfl_report_begin(dwfl);
  Dwfl_Module *m = dwfl_report_elf(dwfl, e->id, path, -1, 0, false);
  dwfl_report_end(dwfl, NULL, NULL);
  GElf_Addr bias = 0;
  if (!m || !dwfl_module_getelf(m, &bias)) {
    fprintf(stderr, "perf-collector: symbols %s: %s\n", path, dwfl_errmsg(-1));
    dwfl_end(dwfl);
    return;
  }
  e->dwfl = dwfl;
  e->module = m;
  e->bias = bias;
}

/* id's entry, loaded or found missing; NULL only when it is missing. */
static entry_t *entry_for(symbolizer_t *s, const char *id) {
  entry_t *e = NULL, *oldest = &s->entries[0];
  for (size_t i = 0; i < s->max && !e; i++) {
    entry_t *c = &s->entries[i];
    if (strcmp(c->id, id) == 0) e = c;
    if (c->used < oldest->used) oldest = c;
  }
  if (e && !e->dwfl && monotonic_s() - e->checked_at >= MISSING_RECHECK_S) entry_load(s, e);
  if (!e) {
    e = oldest; /* a free slot has used 0 */
    entry_clear(e);
    snprintf(e->id, sizeof e->id, "%s", id);
    entry_load(s, e);
  }
  e->used = ++s->clock;
  return e->dwfl ? e : NULL;
}

static void name_address(entry_t *e, Dwarf_Addr addr, symbol_t *out) {
  GElf_Off offset = 0;
  GElf_Sym sym;
  const char *name = dwfl_module_addrinfo(e->module, addr, &offset, &sym, NULL, NULL, NULL);
  snprintf(out->function, sizeof out->function, "%s", name ? name : "");
  char *version = strchr(out->function, '@'); /* "memcpy@@GLIBC_2.14": as the SDK names it */
  if (version) *version = '\0';
  out->offset = offset;
  Dwfl_Line *line = dwfl_module_getsrc(e->module, addr);
  int lineno = 0;
  const char *file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
  snprintf(out->file, sizeof out->file, "%s", file ? file : "");
  out->line = file ? lineno : 0;
}

int symbolizer_lookup(symbolizer_t *s, const char *id, uint64_t address, symbol_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&s->lock);
  entry_t *e = entry_for(s, id);
  if (e) name_address(e, (Dwarf_Addr)(address + e->bias), out);
  pthread_mutex_unlock(&s->lock);
  if (!e) return SYMBOLIZE_NO_FILE;
  return out->function[0] ? SYMBOLIZE_FOUND : SYMBOLIZE_NO_SYMBOL;
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
  pthread_mutex_unlock(&s->lock);
}
