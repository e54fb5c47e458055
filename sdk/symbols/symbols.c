/*
 * symbols.c - modules of the symbolizer (see symbols.h): opening one (its
 * symbol table, where its DWARF is), naming an address (symbol table,
 * inline chain from DWARF, demangled names, cached), and the process-wide
 * cap on DWARF memory with its least-recently-used order.
 *
 * Threads: any but the signal handler. Each module has a mutex held for
 * a whole lookup; one global mutex guards the cap's accounting and order.
 * A lookup holds its module's mutex while it takes the global one, never
 * the reverse: the cap is enforced after the lookup has let its module
 * go, and only drops the DWARF of modules whose mutex it can try-lock, so
 * two threads never wait on each other in opposite orders.
 *
 * fork: every entry point runs inside the fork gate (a read lock); a fork
 * takes it for writing (perf__symbols_fork_prepare, called by the module
 * cache's pthread_atfork handlers after their own lock), so it waits for
 * lookups in flight and the child finds no module half-updated and no lock
 * held by a thread it does not have.
 */
#include "sdk/symbols/symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/proc_files.h"
#include "sdk/symbols/debug_file.h"
#include "sdk/symbols/dwarf_chain.h"
#include "sdk/symbols/sym_store.h"
#include "sdk/symbols/symtab.h"

#define PATH_CAP 4096
#define SCRATCH_BYTES (16u << 10) /* qualified names of one lookup */
#define BUILD_ID_CAP 64           /* longer ids are never looked up (debug_file.c) */

struct perf__sym_module_s {
  pthread_mutex_t lock;
  perf__symtab_t *symtab;           /* NULL after an idle drop: read again when needed */
  char *symtab_path, *symtab_debug; /* where it is read again from; NULL path: kept for good */
  bool symtab_pinned;               /* an answer points into it (names full): kept for good */
  char *dwarf_path;                 /* the file with the module's .debug_info; NULL: none */
  size_t dwarf_size;                /* its sections, known before opening */
  perf__sym_dwarf_t *dwarf;         /* open while in the LRU list */
  size_t dwarf_bytes;               /* counted for the open handle */
  bool dwarf_broken;                /* opening failed: not tried again before the next drop */
  size_t dwarf_broken_at;           /* g_drops when it failed */
  /* The debug file search, done again after a drop when it could not read
     a candidate (debug_file.h's unsure). */
  bool debug_unsure;
  size_t debug_searched_at; /* g_drops then */
  uint8_t build_id[BUILD_ID_CAP];
  size_t build_id_len;
  char *debug_dirs;
  perf__sym_module_t *older, *newer; /* the LRU list (global lock) */
  perf__sym_store_t store;
  char scratch[SCRATCH_BYTES];
};

static pthread_once_t g_libelf_once = PTHREAD_ONCE_INIT;
static bool g_libelf_ok;
static pthread_rwlock_t g_fork_gate = PTHREAD_RWLOCK_INITIALIZER;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t g_cap = PERF__SYM_DEFAULT_CAP;
static size_t g_bytes, g_modules, g_opens, g_table_loads;
static size_t g_drops; /* idle drops so far */
static perf__sym_module_t *g_oldest, *g_newest;

static void init_libelf(void);
static bool find_debug_file(const char *path, const void *image, const uint8_t *build_id,
                            size_t build_id_len, const char *debug_dirs, char *out, size_t cap,
                            bool *unsure);
static size_t drops_now(void);
static int remember_search(perf__sym_module_t *m, const uint8_t *build_id, size_t build_id_len,
                           const char *debug_dirs, bool unsure);
static void search_again(perf__sym_module_t *m);
static void reload_symtab(perf__sym_module_t *m);
static void resolve(perf__sym_module_t *m, uint64_t vaddr, perf__sym_frame_t *out);
static perf__sym_dwarf_t *use_dwarf(perf__sym_module_t *m);
static void account(perf__sym_module_t *m, size_t grown);
static void lru_unlink(perf__sym_module_t *m);
static void enforce_cap(void);
static void drop_dwarf_over(size_t limit, bool tables);
static void module_free(perf__sym_module_t *m);
static int module_open(const char *path, const void *image, size_t image_size,
                       const uint8_t *build_id, size_t build_id_len, const char *debug_dirs,
                       perf__sym_module_t **out);

int perf__sym_module_open(const char *path, const void *image, size_t image_size,
                          const uint8_t *build_id, size_t build_id_len, const char *debug_dirs,
                          perf__sym_module_t **out) {
  pthread_rwlock_rdlock(&g_fork_gate);
  int err = module_open(path, image, image_size, build_id, build_id_len, debug_dirs, out);
  pthread_rwlock_unlock(&g_fork_gate);
  return err;
}

void perf__sym_module_free(perf__sym_module_t *m) {
  pthread_rwlock_rdlock(&g_fork_gate);
  module_free(m);
  pthread_rwlock_unlock(&g_fork_gate);
}

void perf__symbols_fork_prepare(void) {
  pthread_rwlock_wrlock(&g_fork_gate);
}

void perf__symbols_fork_parent(void) {
  pthread_rwlock_unlock(&g_fork_gate);
}

void perf__symbols_fork_child(void) {
  /* The child's thread has a new tid, which the lock's owner record does
     not know: a fresh lock, as no other thread exists to hold it. */
  g_fork_gate = (pthread_rwlock_t)PTHREAD_RWLOCK_INITIALIZER;
}

static int module_open(const char *path, const void *image, size_t image_size,
                       const uint8_t *build_id, size_t build_id_len, const char *debug_dirs,
                       perf__sym_module_t **out) {
  if (!out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  if ((!path && !image) || (image && !image_size) || (!build_id && build_id_len))
    return PERF_E_INVALID_ARGUMENT;
  /* libelf reads nothing before its version is set, once per process. */
  if (pthread_once(&g_libelf_once, init_libelf) != 0 || !g_libelf_ok) return PERF_E_UNSUPPORTED;
  perf__sym_module_t *m = calloc(1, sizeof *m);
  if (!m) return PERF_E_NO_MEMORY;
  pthread_mutex_init(&m->lock, NULL);
  perf__sym_store_init(&m->store);
  /* The module's own DWARF wins (an unstripped build, or the collector
     opening a debug file); else that of its separate debug file. */
  const char *dwarf_file = image ? NULL : path;
  size_t size = dwarf_file ? perf__sym_dwarf_size(dwarf_file) : 0;
  char debug[PATH_CAP];
  bool unsure = false;
  bool has_debug = !size && find_debug_file(path, image, build_id, build_id_len, debug_dirs, debug,
                                            sizeof debug, &unsure);
  if (has_debug) size = perf__sym_dwarf_size(dwarf_file = debug);
  int err = perf__symtab_load(path, image, image_size, has_debug ? debug : NULL, &m->symtab);
  if (!err && unsure && !image) err = remember_search(m, build_id, build_id_len, debug_dirs, true);
  /* A file's table can be dropped when idle and read again; an image's
     (the vdso) is small and kept. */
  if (!err && !image &&
      (!(m->symtab_path = strdup(path)) || (has_debug && !(m->symtab_debug = strdup(debug)))))
    err = PERF_E_NO_MEMORY;
  if (!err && size) {
    m->dwarf_size = size;
    if (!(m->dwarf_path = strdup(dwarf_file))) err = PERF_E_NO_MEMORY;
  }
  if (err) {
    module_free(m);
    return err;
  }
  *out = m;
  return PERF_OK;
}

static void module_free(perf__sym_module_t *m) {
  if (!m) return;
  pthread_mutex_lock(&g_lock);
  if (m->dwarf) lru_unlink(m);
  pthread_mutex_unlock(&g_lock);
  perf__sym_dwarf_close(m->dwarf);
  perf__symtab_free(m->symtab);
  perf__sym_store_free(&m->store);
  free(m->symtab_path);
  free(m->symtab_debug);
  free(m->dwarf_path);
  free(m->debug_dirs);
  pthread_mutex_destroy(&m->lock);
  free(m);
}

bool perf__sym_lookup(perf__sym_module_t *m, uint64_t vaddr, perf__sym_frame_t *out) {
  out->count = 0;
  out->offset = 0;
  out->from_dwarf = false;
  if (!m) return false;
  pthread_rwlock_rdlock(&g_fork_gate);
  pthread_mutex_lock(&m->lock);
  bool cached = perf__sym_store_get(&m->store, vaddr, out);
  if (!cached) {
    resolve(m, vaddr, out);
    perf__sym_store_put(&m->store, vaddr, out);
  }
  pthread_mutex_unlock(&m->lock);
  if (!cached) enforce_cap();
  pthread_rwlock_unlock(&g_fork_gate);
  return out->count > 0;
}

void perf__symbols_set_cap(size_t bytes) {
  pthread_rwlock_rdlock(&g_fork_gate);
  pthread_mutex_lock(&g_lock);
  g_cap = bytes;
  pthread_mutex_unlock(&g_lock);
  enforce_cap();
  pthread_rwlock_unlock(&g_fork_gate);
}

void perf__symbols_stats(perf__symbols_stats_t *out) {
  pthread_rwlock_rdlock(&g_fork_gate);
  pthread_mutex_lock(&g_lock);
  out->dwarf_bytes = g_bytes;
  out->dwarf_modules = g_modules;
  out->dwarf_opens = g_opens;
  out->table_loads = g_table_loads;
  pthread_mutex_unlock(&g_lock);
  pthread_rwlock_unlock(&g_fork_gate);
}

size_t perf__sym_module_bytes(perf__sym_module_t *m) {
  pthread_rwlock_rdlock(&g_fork_gate);
  pthread_mutex_lock(&m->lock);
  size_t n = sizeof *m + perf__sym_store_bytes(&m->store) + perf__symtab_bytes(m->symtab);
  pthread_mutex_unlock(&m->lock);
  pthread_rwlock_unlock(&g_fork_gate);
  return n;
}

/* ------------------------------------------------------------------------ */
/* Naming an address                                                         */
/* ------------------------------------------------------------------------ */

static void init_libelf(void) {
  g_libelf_ok = elf_version(EV_CURRENT) != EV_NONE;
}

static bool find_debug_file(const char *path, const void *image, const uint8_t *build_id,
                            size_t build_id_len, const char *debug_dirs, char *out, size_t cap,
                            bool *unsure) {
  int fd = image ? -1 : perf__mapped_file_open(path, O_RDONLY | O_NONBLOCK);
  Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
  bool found = perf__sym_find_debug_file(image ? NULL : path, elf, build_id, build_id_len,
                                         debug_dirs, out, cap, unsure);
  if (!found && !image && !elf) *unsure = true; /* its .gnu_debuglink could not be read */
  if (elf) elf_end(elf);
  if (fd >= 0) close(fd);
  return found;
}

/* One line of the answer: `raw` shown demangled, with its raw form kept
   when that differs. False when the names are full. */
static bool set_function(perf__sym_module_t *m, perf__sym_line_t *line, const char *raw) {
  const char *stored_raw = NULL;
  const char *shown = perf__sym_store_display(&m->store, raw, &stored_raw);
  if (!shown) return false;
  line->function = shown;
  line->linkage = shown != stored_raw ? stored_raw : NULL;
  return true;
}

/* A DWARF level into line: its linkage name, else its qualified name. */
static bool set_level(perf__sym_module_t *m, perf__sym_line_t *line,
                      const perf__sym_dwarf_level_t *lv) {
  if (lv->linkage) {
    if (!set_function(m, line, lv->linkage)) return false;
  } else {
    line->function = lv->name ? perf__sym_store_name(&m->store, lv->name, strlen(lv->name)) : NULL;
    line->linkage = NULL;
    if (!line->function) return false;
  }
  line->file = lv->file ? perf__sym_store_name(&m->store, lv->file, strlen(lv->file)) : NULL;
  line->line = lv->line;
  line->column = lv->column;
  return true;
}

/* The inline chain of DWARF (the physical function named by the symbol
   table when it has one, `sym`); 0 when DWARF has nothing for vaddr. */
static size_t from_dwarf(perf__sym_module_t *m, uint64_t vaddr, const char *sym, uint64_t sym_off,
                         perf__sym_frame_t *out) {
  perf__sym_dwarf_t *d = use_dwarf(m);
  if (!d) return 0;
  perf__sym_dwarf_level_t levels[PERF__SYM_MAX_LINES];
  uint64_t low_pc = vaddr;
  size_t grown = 0;
  size_t n = perf__sym_dwarf_chain(d, vaddr, levels, PERF__SYM_MAX_LINES, m->scratch,
                                   sizeof m->scratch, &low_pc, &grown);
  account(m, grown);
  for (size_t k = 0; k < n; k++) {
    perf__sym_line_t *line = &out->lines[k];
    memset(line, 0, sizeof *line);
    if (!set_level(m, line, &levels[k])) return 0;
  }
  if (n && sym && !set_function(m, &out->lines[n - 1], sym)) return 0;
  out->offset = sym ? sym_off : vaddr - low_pc;
  return n;
}

static size_t drops_now(void) {
  pthread_mutex_lock(&g_lock);
  size_t n = g_drops;
  pthread_mutex_unlock(&g_lock);
  return n;
}

/* Keep what the debug file search needs to run again. */
static int remember_search(perf__sym_module_t *m, const uint8_t *build_id, size_t build_id_len,
                           const char *debug_dirs, bool unsure) {
  m->debug_unsure = unsure;
  m->debug_searched_at = drops_now();
  m->build_id_len = build_id && build_id_len <= BUILD_ID_CAP ? build_id_len : 0;
  if (m->build_id_len) memcpy(m->build_id, build_id, m->build_id_len);
  if (debug_dirs && !(m->debug_dirs = strdup(debug_dirs))) return PERF_E_NO_MEMORY;
  return PERF_OK;
}

/* The debug file search again, once per drop, while it could not read a
   candidate: one found now brings its symbol table and DWARF (the
   module's own DWARF still wins). Module lock held. */
static void search_again(perf__sym_module_t *m) {
  size_t drops = m->debug_unsure ? drops_now() : m->debug_searched_at;
  if (drops == m->debug_searched_at) return;
  m->debug_searched_at = drops;
  char debug[PATH_CAP];
  bool unsure = false;
  if (!find_debug_file(m->symtab_path, NULL, m->build_id, m->build_id_len, m->debug_dirs, debug,
                       sizeof debug, &unsure)) {
    m->debug_unsure = unsure;
    return;
  }
  char *copy = strdup(debug);
  size_t size = m->dwarf_path ? 0 : perf__sym_dwarf_size(debug);
  char *dwarf = size ? strdup(debug) : NULL;
  if (!copy || (size && !dwarf)) {
    free(copy);
    free(dwarf);
    return; /* no memory: tried again after the next drop */
  }
  m->debug_unsure = false;
  free(m->symtab_debug);
  m->symtab_debug = copy;
  if (dwarf) {
    m->dwarf_path = dwarf;
    m->dwarf_size = size;
    m->dwarf_broken = false;
  }
  if (!m->symtab_pinned) { /* read again, with the debug file's .symtab */
    perf__symtab_free(m->symtab);
    m->symtab = NULL;
  }
}

/* Read the module's symbol table again when an idle drop took it (module
   lock held); it stays NULL when it cannot be read now. */
static void reload_symtab(perf__sym_module_t *m) {
  if (!m->symtab && m->symtab_path &&
      perf__symtab_load(m->symtab_path, NULL, 0, m->symtab_debug, &m->symtab) == PERF_OK) {
    pthread_mutex_lock(&g_lock);
    g_table_loads++;
    pthread_mutex_unlock(&g_lock);
  }
}

static void resolve(perf__sym_module_t *m, uint64_t vaddr, perf__sym_frame_t *out) {
  const char *sym = NULL;
  uint64_t sym_off = 0;
  search_again(m);
  reload_symtab(m);
  bool has_sym = perf__symtab_lookup(m->symtab, vaddr, &sym, &sym_off);
  out->count = from_dwarf(m, vaddr, has_sym ? sym : NULL, sym_off, out);
  out->from_dwarf = out->count > 0;
  if (out->count == 0 && has_sym) {
    memset(&out->lines[0], 0, sizeof out->lines[0]);
    if (!set_function(m, &out->lines[0], sym)) {
      out->lines[0].function = sym; /* the names are full: raw, from the table */
      out->lines[0].linkage = NULL;
      m->symtab_pinned = true; /* the cached answer points into the table */
    }
    out->count = 1;
    out->offset = sym_off;
  }
}

/* ------------------------------------------------------------------------ */
/* The cap                                                                   */
/* ------------------------------------------------------------------------ */

/* The module's open DWARF, opened when needed and the cap allows; made the
   most recently used. An open that failed is tried again after the next
   idle drop, not before: a file can be unreadable for a while (no file
   descriptor left, no memory, libdw not loadable) and every lookup until
   then is named from the symbol table alone. Module lock held. */
static perf__sym_dwarf_t *use_dwarf(perf__sym_module_t *m) {
  if (!m->dwarf && m->dwarf_path) {
    pthread_mutex_lock(&g_lock);
    size_t cap = g_cap, drops = g_drops;
    pthread_mutex_unlock(&g_lock);
    if (m->dwarf_size > cap) return NULL; /* never fits: symbol table only */
    if (m->dwarf_broken && m->dwarf_broken_at == drops) return NULL;
    size_t bytes = 0;
    m->dwarf = perf__sym_dwarf_open(m->dwarf_path, &bytes);
    m->dwarf_broken = !m->dwarf;
    m->dwarf_broken_at = drops;
    if (!m->dwarf) return NULL;
    pthread_mutex_lock(&g_lock);
    m->dwarf_bytes = bytes;
    g_bytes += bytes;
    g_modules++;
    g_opens++;
    pthread_mutex_unlock(&g_lock);
  }
  if (m->dwarf) account(m, 0);
  return m->dwarf;
}

/* Add what the handle grew by, and make m the most recently used. */
static void account(perf__sym_module_t *m, size_t grown) {
  pthread_mutex_lock(&g_lock);
  m->dwarf_bytes += grown;
  g_bytes += grown;
  if (g_newest != m) {
    if (m->older || m->newer || g_oldest == m) {
      if (m->older) m->older->newer = m->newer;
      if (m->newer) m->newer->older = m->older;
      if (g_oldest == m) g_oldest = m->newer;
    }
    m->older = g_newest;
    m->newer = NULL;
    if (g_newest) g_newest->newer = m;
    g_newest = m;
    if (!g_oldest) g_oldest = m;
  }
  pthread_mutex_unlock(&g_lock);
}

/* Take m out of the list and its bytes out of the count. Global lock held. */
static void lru_unlink(perf__sym_module_t *m) {
  if (m->older) m->older->newer = m->newer;
  if (m->newer) m->newer->older = m->older;
  if (g_oldest == m) g_oldest = m->newer;
  if (g_newest == m) g_newest = m->older;
  m->older = m->newer = NULL;
  g_bytes -= m->dwarf_bytes;
  g_modules--;
  m->dwarf_bytes = 0;
}

/* Drop the DWARF of the least recently used modules until the count is
   under the cap. A module in the middle of a lookup is skipped (its lock
   is busy); the lookup enforces the cap again when it ends. */
static void enforce_cap(void) {
  drop_dwarf_over(g_cap, false);
}

void perf__symbols_drop_dwarf(void) {
  pthread_rwlock_rdlock(&g_fork_gate);
  pthread_mutex_lock(&g_lock);
  g_drops++;
  pthread_mutex_unlock(&g_lock);
  drop_dwarf_over(0, true);
  pthread_rwlock_unlock(&g_fork_gate);
}

size_t perf__symbols_drops(void) {
  pthread_rwlock_rdlock(&g_fork_gate);
  pthread_mutex_lock(&g_lock);
  size_t n = g_drops;
  pthread_mutex_unlock(&g_lock);
  pthread_rwlock_unlock(&g_fork_gate);
  return n;
}

/* Drop the DWARF of the least recently used modules until at most `limit`
   bytes are counted (modules in a lookup are skipped); with `tables`, their
   symbol tables too, where they can be read again. */
static void drop_dwarf_over(size_t limit, bool tables) {
  pthread_mutex_lock(&g_lock);
  if (limit > g_cap) limit = g_cap;
  for (perf__sym_module_t *m = g_oldest, *next; m && g_bytes > limit; m = next) {
    next = m->newer;
    if (pthread_mutex_trylock(&m->lock) != 0) continue;
    lru_unlink(m);
    perf__sym_dwarf_close(m->dwarf);
    m->dwarf = NULL;
    if (tables && m->symtab_path && !m->symtab_pinned) {
      perf__symtab_free(m->symtab);
      m->symtab = NULL;
    }
    pthread_mutex_unlock(&m->lock);
  }
  pthread_mutex_unlock(&g_lock);
}
