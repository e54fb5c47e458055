/*
 * modules.c - module snapshots and the per-file cache of unwind rules and
 * symbolizer modules (see modules.h).
 *
 * Runs on capture-requesting threads; one mutex guards the cache and the
 * current snapshot. Snapshots are immutable once published, except for the
 * lazily made dwfl unwinder, which is also set under the mutex.
 *
 * fork: the mutex is taken around fork (pthread_atfork, registered when the
 * library loads and always before the sampler's own handlers,
 * perf__modules_fork_register: prepare handlers run last registered first,
 * so the sampler's lock is taken first, the order captures take them in). A fork while a thread
 * builds rules waits for that build; the child then finds the cache whole
 * and the mutex free. The symbolizer's fork gate is taken next
 * (perf__symbols_fork_prepare; lookups run outside this mutex, a module is
 * opened inside it): a fork while the writer names frames waits for that
 * lookup, and the child's symbolizer modules are whole and unlocked.
 */
#include "sdk/sampler/modules.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "sdk/sampler/dwfl_unwind.h"

struct perf__module_entry_s {
  char *path;
  uint8_t build_id[PERF__BUILD_ID_MAX];
  size_t build_id_len;
  /* Without a build-id: the file's identity and the load address (see
     same_file). */
  uint64_t file_dev, file_ino, file_size;
  int64_t file_mtime_ns;
  uintptr_t bias;
  perf__unwind_table_t *table; /* NULL when the module has no usable CFI */
  bool rules_tried;            /* table compiled (or found impossible) */
  bool compiling;              /* a thread compiles it, outside the lock */
  perf__sym_module_t *symbols; /* opened on first symbolization */
  bool symbols_tried;
  size_t symbols_tried_at; /* perf__symbols_drops() then: a failed open waits for the next */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_compiled = PTHREAD_COND_INITIALIZER; /* a compile ended (g_lock) */
static unsigned g_compiling;                                 /* compiles in flight (g_lock) */
static perf__modules_t *g_current;
static perf__module_entry_t *g_cache[PERF__MODULE_CACHE_MAX];
static size_t g_cache_count;

static void fork_lock(void);
static void fork_parent(void);
static void fork_child(void);
static perf__modules_t *build_snapshot(void);
static perf__sym_module_t *entry_symbols(perf__module_entry_t *e, const perf__module_t *m);
static perf__module_entry_t *cache_entry(const perf__module_t *m);
static void free_snapshot(perf__modules_t *mods);

perf__modules_t *perf__modules_acquire(void) {
  pthread_mutex_lock(&g_lock);
  if (!g_current || perf__module_map_is_stale(g_current->map)) {
    perf__modules_t *fresh = build_snapshot();
    if (fresh) {
      if (g_current) perf__modules_release(g_current);
      g_current = fresh;
    }
  }
  perf__modules_t *mods = g_current;
  if (mods) atomic_fetch_add(&mods->refs, 1);
  pthread_mutex_unlock(&g_lock);
  return mods;
}

void perf__modules_release(perf__modules_t *mods) {
  if (mods && atomic_fetch_sub(&mods->refs, 1) == 1) free_snapshot(mods);
}

void perf__modules_symbolize(perf__modules_t *mods, uintptr_t pc, bool return_address,
                             perf__frame_info_t *out) {
  uintptr_t lookup = return_address ? pc - 1 : pc;
  out->module = "??";
  out->module_rel = pc;
  out->sym.count = 0;
  out->sym.offset = 0;
  out->sym.from_dwarf = false;
  const perf__module_t *m = perf__module_map_find(mods->map, lookup);
  if (!m) return;
  size_t idx = (size_t)(m - mods->map->modules);
  out->module = m->basename;
  out->module_rel = pc - m->bias;
  perf__module_entry_t *e = mods->entries[idx];
  perf__sym_module_t *sm = e ? entry_symbols(e, m) : NULL;
  /* The symbolizer module locks itself; the snapshot's lock is not held. */
  if (sm && perf__sym_lookup(sm, lookup - m->bias, &out->sym)) {
    out->sym.offset += pc - lookup;
    return;
  }
  /* dladdr only for modules past the cache bound: it answers with the
     nearest exported symbol below the pc, which names a static function
     after its neighbour (gdb says `??` there, and so do we). */
  Dl_info info;
  if (!e && dladdr((void *)lookup, &info) && info.dli_sname && info.dli_saddr) {
    /* dladdr's strings belong to the loader and live while the module is
       loaded; the caller formats them right away. */
    out->sym.lines[0] = (perf__sym_line_t){info.dli_sname, NULL, NULL, 0, 0};
    out->sym.count = 1;
    out->sym.offset = pc - (uintptr_t)info.dli_saddr;
  }
}

void *perf__modules_dwfl_unwinder(perf__modules_t *mods) {
  pthread_mutex_lock(&g_lock);
  if (!mods->dwfl_unwinder) {
    perf__dwfl_unwinder_t *u = NULL;
    if (perf__dwfl_unwinder_create(mods->map, &u) == 0) mods->dwfl_unwinder = u;
  }
  void *u = mods->dwfl_unwinder;
  pthread_mutex_unlock(&g_lock);
  return u;
}

static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

static void register_fork_handlers(void) {
  pthread_atfork(fork_lock, fork_parent, fork_child);
}

void perf__modules_fork_register(void) {
  pthread_once(&g_fork_once, register_fork_handlers);
}

__attribute__((constructor)) static void register_at_load(void) {
  perf__modules_fork_register();
}

static void fork_lock(void) {
  pthread_mutex_lock(&g_lock);
  /* A compile in flight runs outside the lock: the child would find its
     module marked compiling by a thread it does not have. */
  while (g_compiling)
    pthread_cond_wait(&g_compiled, &g_lock);
  perf__symbols_fork_prepare();
}

static void fork_parent(void) {
  perf__symbols_fork_parent();
  pthread_mutex_unlock(&g_lock);
}

static void fork_child(void) {
  perf__symbols_fork_child();
  g_compiled = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
  pthread_mutex_unlock(&g_lock);
}

static perf__modules_t *build_snapshot(void) {
  perf__modules_t *mods = calloc(1, sizeof *mods);
  if (!mods) return NULL;
  atomic_init(&mods->refs, 1);
  if (perf__module_map_build(&mods->map) != 0) goto fail;
  size_t n = mods->map->count;
  mods->entries = calloc(n ? n : 1, sizeof *mods->entries);
  mods->unwind = calloc(1, sizeof *mods->unwind + n * sizeof mods->unwind->tables[0]);
  if (!mods->entries || !mods->unwind) goto fail;
  mods->unwind->modules = mods->map;
  for (size_t i = 0; i < n; i++) {
    mods->entries[i] = cache_entry(&mods->map->modules[i]);
    perf__module_entry_t *e = mods->entries[i];
    mods->unwind->tables[i] = !e ? NULL : e->rules_tried ? e->table : &perf__unwind_table_pending;
  }
  return mods;
fail:
  free_snapshot(mods);
  return NULL;
}

/* e was made from m's file. A build-id names the contents: the same path
   and build-id is the same file wherever it is loaded. Without one, a
   library rewritten at the same path (dlclose, new file, dlopen) would
   keep the old file's names and unwind rules: the file's device, inode,
   size and mtime must match too, and the load address (a file replaced
   with one that happens to match all of those is still a new load). Only
   a rewrite in place to the same size within one mtime tick, loaded at the
   same address again, still passes for the old file: a build-id (the
   linker's default) settles it. */
static bool same_file(const perf__module_entry_t *e, const perf__module_t *m) {
  if (e->build_id_len != m->build_id_len || strcmp(e->path, m->path) != 0 ||
      memcmp(e->build_id, m->build_id, m->build_id_len) != 0)
    return false;
  return m->build_id_len || (e->file_dev == m->file_dev && e->file_ino == m->file_ino &&
                             e->file_size == m->file_size && e->file_mtime_ns == m->file_mtime_ns &&
                             e->bias == m->bias);
}

/* The cache entry for m's file, made when new (rules still pending). */
static perf__module_entry_t *cache_entry(const perf__module_t *m) {
  for (size_t i = 0; i < g_cache_count; i++)
    if (same_file(g_cache[i], m)) return g_cache[i];
  if (g_cache_count == PERF__MODULE_CACHE_MAX) return NULL;
  perf__module_entry_t *e = calloc(1, sizeof *e);
  if (!e || !(e->path = strdup(m->path))) {
    free(e);
    return NULL;
  }
  memcpy(e->build_id, m->build_id, m->build_id_len);
  e->build_id_len = m->build_id_len;
  e->file_dev = m->file_dev, e->file_ino = m->file_ino, e->file_size = m->file_size;
  e->file_mtime_ns = m->file_mtime_ns, e->bias = m->bias;
  g_cache[g_cache_count++] = e;
  return e;
}

/* Module i's rules compiled if pending and published in mods. Cache lock
   held; it is let go while the rules are compiled (tens of milliseconds
   for libc), so that a snapshot can be had and other modules compiled
   meanwhile; a second thread wanting the same module waits for the first.
   True when the slot changed. */
static bool compile_rules_locked(perf__modules_t *mods, size_t i) {
  perf__module_entry_t *e = mods->entries[i];
  if (!e || mods->unwind->tables[i] != &perf__unwind_table_pending) return false;
  while (e->compiling)
    pthread_cond_wait(&g_compiled, &g_lock);
  if (!e->rules_tried) {
    e->compiling = true;
    g_compiling++;
    pthread_mutex_unlock(&g_lock);
    const perf__module_t *m = &mods->map->modules[i]; /* the snapshot is held by the caller */
    perf__unwind_table_t *table = NULL;
    int err = perf__unwind_table_build(m, &table);
    if (err)
      perf__log(PERF__LOG_DEBUG, "%s: no unwind rules (%s), using frame pointers", m->path,
                perf_strerror(err));
    pthread_mutex_lock(&g_lock);
    e->table = table;
    e->rules_tried = true;
    e->compiling = false;
    g_compiling--;
    pthread_cond_broadcast(&g_compiled);
  }
  __atomic_store_n(&mods->unwind->tables[i], e->table, __ATOMIC_RELEASE);
  return true;
}

bool perf__modules_compile_rules(perf__modules_t *mods, uintptr_t pc) {
  if (!mods) return false;
  bool changed = false, found = false;
  pthread_mutex_lock(&g_lock);
  for (int back = 0; back <= 1 && !changed; back++) {
    const perf__module_t *m = perf__module_map_find(mods->map, pc - (uintptr_t)back);
    found = found || m;
    if (m) changed = compile_rules_locked(mods, (size_t)(m - mods->map->modules));
  }
  pthread_mutex_unlock(&g_lock);
  /* Neither is pending any more, while the walk found one pending: another
     capture of this snapshot compiled it meanwhile (the monitors and the
     app's own captures compile side by side). Walk again all the same. */
  return changed || found;
}

void perf__modules_compile_all_rules(perf__modules_t *mods) {
  if (!mods) return;
  pthread_mutex_lock(&g_lock);
  for (size_t i = 0; i < mods->map->count; i++)
    compile_rules_locked(mods, i);
  pthread_mutex_unlock(&g_lock);
}

/* The symbolizer module of e's file, opened on first use; an open that
   failed is tried again after the symbolizer's next idle drop (symbols.h). */
static perf__sym_module_t *entry_symbols(perf__module_entry_t *e, const perf__module_t *m) {
  pthread_mutex_lock(&g_lock);
  size_t drops = e->symbols ? 0 : perf__symbols_drops();
  if (!e->symbols && (!e->symbols_tried || e->symbols_tried_at != drops)) {
    e->symbols_tried = true;
    e->symbols_tried_at = drops;
    if (perf__sym_module_open(m->path, m->image, m->image_size, m->build_id, m->build_id_len, NULL,
                              &e->symbols) != 0)
      perf__log(PERF__LOG_DEBUG, "no symbols for %s", m->path);
  }
  perf__sym_module_t *sm = e->symbols;
  pthread_mutex_unlock(&g_lock);
  return sm;
}

static void free_snapshot(perf__modules_t *mods) {
  if (!mods) return;
  perf__dwfl_unwinder_free(mods->dwfl_unwinder);
  free(mods->unwind);
  free(mods->entries);
  perf__module_map_free(mods->map);
  free(mods);
}
