/*
 * symtab.c - owns the function-symbol table of one ELF module (see symtab.h):
 * reading .symtab, else the .symtab of its separate debug file, else
 * .dynsym, with libelf; copying the names into one buffer owned by the
 * table; sorting and deduplicating by address; and the binary-search lookup.
 *
 * Threads: any thread but the signal handler may load or free a table (it
 * allocates, opens files and calls libelf). A loaded table is immutable, so
 * any number of threads may look it up at once. Nothing here prints, exits
 * or aborts.
 *
 * Errors (a negative perf_error_t, *out left NULL, nothing leaked):
 *  - PERF_E_INVALID_ARGUMENT: NULL out, neither path nor image, or a zero
 *    image_size.
 *  - PERF_E_SYSTEM: the path cannot be opened, is not a regular file, or is
 *    not a readable ELF file; likewise an image that is not ELF.
 *  - PERF_E_NO_MEMORY: an allocation failed.
 *  - PERF_E_UNSUPPORTED: the installed libelf rejects EV_CURRENT.
 * A valid ELF without function symbols is NOT an error: it yields an empty
 * table (count 0, every lookup false). A debug file that is missing or
 * unreadable is not an error either: the table simply stays empty.
 *
 * Lookup rules: a sized symbol covers [st_value, st_value + st_size). A
 * symbol with st_size == 0 reaches to the next symbol's start (bounded by
 * the end of its section and by the end of a sized symbol it starts inside;
 * exact address only when it is the last symbol and its section is
 * unknown), and is used only when no sized symbol covers the address.
 * Addresses covered by nothing (padding, garbage) are not named. st_value
 * is taken as a virtual address, as in executables and shared objects
 * (ET_EXEC / ET_DYN); relocatable objects are not supported.
 */
#include "sdk/symbols/symtab.h"

#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf_sdk.h"

#define NO_COVER SIZE_MAX
#define END_UNKNOWN UINT64_MAX

/* Preference among symbols at the same address (higher wins). */
enum { RANK_LOCAL = 0, RANK_WEAK = 1, RANK_GLOBAL = 2 };

typedef struct {
  uint64_t addr;    /* st_value */
  uint64_t end;     /* exclusive; for zero-sized symbols, how far they reach */
  const char *name; /* points into the table's names buffer */
  size_t order;     /* index in the symbol section: stable tie-break */
  size_t cover;     /* sized symbol with the farthest end among [0, self] */
  uint8_t rank;     /* RANK_* */
  uint8_t sized;    /* st_size != 0 */
} sym_t;

struct perf__symtab_s {
  sym_t *syms; /* sorted by addr, one per address */
  size_t count;
  char *names; /* every name, NUL-terminated, back to back */
  size_t names_bytes;
};

/* One symbol section of an open Elf. */
typedef struct {
  Elf *elf;
  Elf_Data *data;
  size_t strndx; /* section index of its string table */
  size_t nsyms;
} symsec_t;

static pthread_once_t g_libelf_once = PTHREAD_ONCE_INIT;
static int g_libelf_ok;

static bool libelf_ready(void);
static int load_path(perf__symtab_t *tab, const char *path, GElf_Word type);
static int load_image(perf__symtab_t *tab, const void *image, size_t size, GElf_Word type);
static int load_debug_file(perf__symtab_t *tab, const char *debug_path);
static const sym_t *find_sym(const perf__symtab_t *tab, uint64_t vaddr);

int perf__symtab_load(const char *path, const void *image, size_t image_size,
                      const char *debug_path, perf__symtab_t **out) {
  if (!out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  if ((!path && !image) || (image && image_size == 0)) return PERF_E_INVALID_ARGUMENT;
  if (!libelf_ready()) return PERF_E_UNSUPPORTED;
  perf__symtab_t *tab = calloc(1, sizeof *tab);
  if (!tab) return PERF_E_NO_MEMORY;
  /* .symtab names static functions; distributions strip it from
     libraries but ship it in a debug file (libc6-dbg puts start_thread
     there). .dynsym is the last resort. */
  int rc =
      image ? load_image(tab, image, image_size, SHT_SYMTAB) : load_path(tab, path, SHT_SYMTAB);
  if (rc == PERF_OK && tab->count == 0 && debug_path) rc = load_debug_file(tab, debug_path);
  if (rc == PERF_OK && tab->count == 0) {
    rc = image ? load_image(tab, image, image_size, SHT_DYNSYM) : load_path(tab, path, SHT_DYNSYM);
  }
  if (rc != PERF_OK) {
    perf__symtab_free(tab);
    return rc;
  }
  *out = tab;
  return PERF_OK;
}

bool perf__symtab_lookup(const perf__symtab_t *tab, uint64_t vaddr, const char **name,
                         uint64_t *offset) {
  const sym_t *hit = find_sym(tab, vaddr);
  if (!hit) return false;
  if (name) *name = hit->name;
  if (offset) *offset = vaddr - hit->addr;
  return true;
}

size_t perf__symtab_count(const perf__symtab_t *tab) {
  return tab ? tab->count : 0;
}

size_t perf__symtab_bytes(const perf__symtab_t *tab) {
  return tab ? sizeof *tab + tab->count * sizeof *tab->syms + tab->names_bytes : 0;
}

void perf__symtab_free(perf__symtab_t *tab) {
  if (!tab) return;
  free(tab->syms);
  free(tab->names);
  free(tab);
}

/* ------------------------------------------------------------------------ */
/* Lookup                                                                    */
/* ------------------------------------------------------------------------ */

static const sym_t *find_sym(const perf__symtab_t *tab, uint64_t vaddr) {
  if (!tab || tab->count == 0) return NULL;
  size_t lo = 0, hi = tab->count; /* first symbol starting above vaddr */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (tab->syms[mid].addr <= vaddr) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) return NULL;
  const sym_t *s = &tab->syms[lo - 1];
  if (s->sized && vaddr < s->end) return s;
  /* An earlier sized symbol may still cover vaddr (nested symbols). */
  if (s->cover != NO_COVER && vaddr < tab->syms[s->cover].end) return &tab->syms[s->cover];
  if (!s->sized && vaddr < s->end) return s;
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Opening the ELF                                                           */
/* ------------------------------------------------------------------------ */

static void init_libelf(void) {
  g_libelf_ok = elf_version(EV_CURRENT) != EV_NONE;
}

static bool libelf_ready(void) {
  return pthread_once(&g_libelf_once, init_libelf) == 0 && g_libelf_ok;
}

static int load_elf(perf__symtab_t *tab, Elf *elf, GElf_Word type);

static int load_path(perf__symtab_t *tab, const char *path, GElf_Word type) {
  /* O_NONBLOCK: never hang on a FIFO; it does not affect regular files. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return PERF_E_SYSTEM;
  struct stat st;
  int rc = PERF_E_SYSTEM;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (elf) {
      rc = load_elf(tab, elf, type);
      elf_end(elf);
    }
  }
  close(fd);
  return rc;
}

/* elf_memory() takes a writable char * and may convert data in place, while
   the vDSO is mapped read-only: hand it a private heap copy instead. */
static int load_image(perf__symtab_t *tab, const void *image, size_t size, GElf_Word type) {
  char *copy = malloc(size);
  if (!copy) return PERF_E_NO_MEMORY;
  memcpy(copy, image, size);
  int rc = PERF_E_SYSTEM;
  Elf *elf = elf_memory(copy, size);
  if (elf) {
    rc = load_elf(tab, elf, type);
    elf_end(elf);
  }
  free(copy);
  return rc;
}

/* Only called while the table is still empty (nothing allocated in it). */
static int load_debug_file(perf__symtab_t *tab, const char *debug_path) {
  int rc = load_path(tab, debug_path, SHT_SYMTAB);
  /* An unusable debug file: the module just has no .symtab. */
  return rc == PERF_E_SYSTEM ? PERF_OK : rc;
}

/* ------------------------------------------------------------------------ */
/* Reading the symbols                                                       */
/* ------------------------------------------------------------------------ */

static bool find_symsec(Elf *elf, GElf_Word type, symsec_t *out);
static bool count_funcs(const symsec_t *sec, size_t *n, size_t *bytes);
static int build_table(perf__symtab_t *tab, const symsec_t *sec, size_t n, size_t bytes);

/* The functions of the symbol section of `type` (SHT_SYMTAB or SHT_DYNSYM);
   an empty table without. */
static int load_elf(perf__symtab_t *tab, Elf *elf, GElf_Word type) {
  GElf_Ehdr eh;
  if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) return PERF_E_SYSTEM;
  symsec_t sec;
  size_t n = 0, bytes = 0;
  if (find_symsec(elf, type, &sec) && !count_funcs(&sec, &n, &bytes)) return PERF_E_NO_MEMORY;
  if (n == 0) return PERF_OK;
  return build_table(tab, &sec, n, bytes);
}

/* The first section of `type` that has symbol data. */
static bool find_symsec(Elf *elf, GElf_Word type, symsec_t *out) {
  size_t entsize = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
  if (entsize == 0) return false;
  for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != type) continue;
    Elf_Data *data = elf_getdata(scn, NULL);
    if (!data || data->d_size < entsize) continue;
    out->elf = elf;
    out->data = data;
    out->strndx = sh.sh_link;
    out->nsyms = data->d_size / entsize;
    return true;
  }
  return false;
}

/* Symbol `i` when it is a defined function with a name, else false. */
static bool read_func(const symsec_t *sec, size_t i, GElf_Sym *sym, const char **name) {
  if (i > INT32_MAX || !gelf_getsym(sec->data, (int)i, sym)) return false;
  int type = GELF_ST_TYPE(sym->st_info);
  if (type != STT_FUNC && type != STT_GNU_IFUNC) return false;
  if (sym->st_value == 0 || sym->st_shndx == SHN_UNDEF) return false;
  *name = elf_strptr(sec->elf, sec->strndx, sym->st_name);
  return *name && **name;
}

/* How many functions, and how many name bytes (with NULs) they need. False
   on size overflow. */
static bool count_funcs(const symsec_t *sec, size_t *n, size_t *bytes) {
  size_t count = 0, total = 0;
  for (size_t i = 1; i < sec->nsyms; i++) {
    GElf_Sym sym;
    const char *name;
    if (!read_func(sec, i, &sym, &name)) continue;
    size_t len = strlen(name) + 1;
    if (len > SIZE_MAX - total) return false;
    total += len;
    count++;
  }
  *n = count;
  *bytes = total;
  return true;
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* End of the allocated section holding addr, or END_UNKNOWN. */
static uint64_t section_end(Elf *elf, GElf_Half shndx, uint64_t addr) {
  if (shndx >= SHN_LORESERVE) return END_UNKNOWN; /* SHN_ABS, SHN_XINDEX, ... */
  GElf_Shdr sh;
  Elf_Scn *scn = elf_getscn(elf, shndx);
  if (!scn || !gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC)) return END_UNKNOWN;
  if (addr < sh.sh_addr || addr - sh.sh_addr >= sh.sh_size) return END_UNKNOWN;
  return sh.sh_addr + sh.sh_size;
}

static void fill_sym(sym_t *d, const symsec_t *sec, const GElf_Sym *sym, size_t i) {
  int bind = GELF_ST_BIND(sym->st_info);
  d->addr = sym->st_value;
  d->sized = sym->st_size != 0;
  d->end = d->sized ? sat_add(sym->st_value, sym->st_size)
                    : section_end(sec->elf, sym->st_shndx, sym->st_value);
  d->order = i;
  d->cover = NO_COVER;
  d->rank = bind == STB_GLOBAL ? RANK_GLOBAL : bind == STB_WEAK ? RANK_WEAK : RANK_LOCAL;
}

static int cmp_sym(const void *a, const void *b);
static size_t dedupe(sym_t *s, size_t n);
static void finish(sym_t *s, size_t n);

/* Second pass: copy the n functions counted by count_funcs. On failure the
   caller frees the partial table. */
static int build_table(perf__symtab_t *tab, const symsec_t *sec, size_t n, size_t bytes) {
  if (n > SIZE_MAX / sizeof *tab->syms) return PERF_E_NO_MEMORY;
  tab->syms = malloc(n * sizeof *tab->syms);
  tab->names = malloc(bytes);
  if (!tab->syms || !tab->names) return PERF_E_NO_MEMORY;
  tab->names_bytes = bytes;
  size_t k = 0, pos = 0;
  for (size_t i = 1; i < sec->nsyms && k < n; i++) {
    GElf_Sym sym;
    const char *name;
    if (!read_func(sec, i, &sym, &name)) continue;
    size_t len = strlen(name) + 1;
    if (len > bytes - pos) break; /* cannot happen: same data as the count */
    memcpy(tab->names + pos, name, len);
    /* "memcpy@@GLIBC_2.14": the version is not part of the function's name. */
    char *at = strchr(tab->names + pos, '@');
    if (at && at != tab->names + pos) *at = '\0';
    tab->syms[k].name = tab->names + pos;
    fill_sym(&tab->syms[k], sec, &sym, i);
    pos += len;
    k++;
  }
  qsort(tab->syms, k, sizeof *tab->syms, cmp_sym);
  tab->count = dedupe(tab->syms, k);
  finish(tab->syms, tab->count);
  return PERF_OK;
}

/* By address; at equal addresses the preferred symbol first. */
static int cmp_sym(const void *a, const void *b) {
  const sym_t *x = a, *y = b;
  if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
  if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

/* Keep the first (preferred) symbol of each address; it takes the largest
   size of the aliases it replaces. Returns the new count. */
static size_t dedupe(sym_t *s, size_t n) {
  size_t out = 0;
  for (size_t i = 0; i < n; i++) {
    sym_t *keep = out > 0 ? &s[out - 1] : NULL;
    if (!keep || keep->addr != s[i].addr) {
      s[out++] = s[i];
    } else if (s[i].sized && (!keep->sized || s[i].end > keep->end)) {
      keep->sized = 1;
      keep->end = s[i].end;
    }
  }
  return out;
}

/* Set how far zero-sized symbols reach (never past the end of a sized
   symbol they start inside), and each entry's cover. */
static void finish(sym_t *s, size_t n) {
  size_t cover = NO_COVER;
  uint64_t reach = 0;
  for (size_t i = 0; i < n; i++) {
    if (!s[i].sized) {
      uint64_t lim = s[i].end; /* its section's end, or END_UNKNOWN */
      if (i + 1 < n && s[i + 1].addr < lim) lim = s[i + 1].addr;
      if (reach > s[i].addr && reach < lim) lim = reach;   /* a label inside a function */
      if (lim == END_UNKNOWN) lim = sat_add(s[i].addr, 1); /* last, no section */
      s[i].end = lim;
    } else if (s[i].end > reach) {
      reach = s[i].end;
      cover = i;
    }
    s[i].cover = cover;
  }
}
