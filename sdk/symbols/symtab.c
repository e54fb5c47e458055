/*
 * symtab.c - owns the function-symbol table of one ELF module (see symtab.h):
 * reading its symbol tables with libelf (.symtab, else the .symtab of its
 * separate debug file; then .dynsym; then the PLT stubs, plt.c), copying
 * the names into one buffer owned by the table, sorting and deduplicating
 * by address, and the binary-search lookup.
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
 * unreadable is not an error either: the module's own tables are used.
 *
 * Which tables: gdb reads every symbol table a module has (its minimal
 * symbols) and names an address from any of them; so does this table, so
 * that a frame gdb names is never unnamed here. .symtab names static
 * functions (distributions strip it from libraries but ship it in a debug
 * file: libc6-dbg puts start_thread there); .dynsym names the exported
 * functions of a module with neither (libglib without its -dbgsym
 * package); the PLT stubs are named `<function>@plt` as gdb and objdump
 * name them. At one address the preferred symbol wins: global over weak
 * over local, then the earlier table (.symtab before .dynsym).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/proc_files.h"
#include "sdk/symbols/plt.h"

#define NO_COVER SIZE_MAX
#define END_UNKNOWN UINT64_MAX

/* Preference among symbols at the same address (higher wins). */
enum { RANK_LOCAL = 0, RANK_WEAK = 1, RANK_GLOBAL = 2 };

typedef struct {
  uint64_t addr;  /* st_value */
  uint64_t end;   /* exclusive; for zero-sized symbols, how far they reach */
  size_t name_at; /* offset of its name in the table's names buffer */
  size_t order;   /* the order it was read in: stable tie-break */
  size_t cover;   /* sized symbol with the farthest end among [0, self] */
  uint8_t rank;   /* RANK_* */
  uint8_t sized;  /* st_size != 0 */
} sym_t;

struct perf__symtab_s {
  sym_t *syms; /* sorted by addr, one per address */
  size_t count, cap;
  char *names; /* every name, NUL-terminated, back to back */
  size_t names_bytes, names_cap;
};

/* An ELF file or image open for reading. */
typedef struct {
  int fd;     /* -1 for an image */
  char *copy; /* an image's private copy, else NULL */
  Elf *elf;
} elf_src_t;

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
static int src_open_path(elf_src_t *src, const char *path);
static int src_open_image(elf_src_t *src, const void *image, size_t size);
static void src_close(elf_src_t *src);
static int load_symsec(perf__symtab_t *tab, Elf *elf, GElf_Word type);
static int load_debug_file(perf__symtab_t *tab, const char *debug_path);
static int add_plt_stub(void *ctx, uint64_t addr, uint64_t size, const char *symbol,
                        uint64_t addend);
static void finish_table(perf__symtab_t *tab);
static const sym_t *find_sym(const perf__symtab_t *tab, uint64_t vaddr);

int perf__symtab_load(const char *path, const void *image, size_t image_size,
                      const char *debug_path, perf__symtab_t **out) {
  if (!out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  if ((!path && !image) || (image && image_size == 0)) return PERF_E_INVALID_ARGUMENT;
  if (!libelf_ready()) return PERF_E_UNSUPPORTED;
  elf_src_t src;
  int rc = image ? src_open_image(&src, image, image_size) : src_open_path(&src, path);
  if (rc != PERF_OK) return rc;
  perf__symtab_t *tab = calloc(1, sizeof *tab);
  if (!tab) rc = PERF_E_NO_MEMORY;
  if (rc == PERF_OK) rc = load_symsec(tab, src.elf, SHT_SYMTAB);
  if (rc == PERF_OK && tab->count == 0 && debug_path) rc = load_debug_file(tab, debug_path);
  if (rc == PERF_OK) rc = load_symsec(tab, src.elf, SHT_DYNSYM);
  if (rc == PERF_OK) rc = perf__plt_each(src.elf, add_plt_stub, tab);
  src_close(&src);
  if (rc != PERF_OK) {
    perf__symtab_free(tab);
    return rc;
  }
  finish_table(tab);
  *out = tab;
  return PERF_OK;
}

bool perf__symtab_lookup(const perf__symtab_t *tab, uint64_t vaddr, const char **name,
                         uint64_t *offset) {
  const sym_t *hit = find_sym(tab, vaddr);
  if (!hit) return false;
  if (name) *name = tab->names + hit->name_at;
  if (offset) *offset = vaddr - hit->addr;
  return true;
}

size_t perf__symtab_count(const perf__symtab_t *tab) {
  return tab ? tab->count : 0;
}

size_t perf__symtab_bytes(const perf__symtab_t *tab) {
  return tab ? sizeof *tab + tab->cap * sizeof *tab->syms + tab->names_cap : 0;
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

static bool src_is_elf(elf_src_t *src) {
  GElf_Ehdr eh;
  if (src->elf && elf_kind(src->elf) == ELF_K_ELF && gelf_getehdr(src->elf, &eh)) return true;
  src_close(src);
  return false;
}

static int src_open_path(elf_src_t *src, const char *path) {
  *src = (elf_src_t){-1, NULL, NULL};
  /* O_NONBLOCK: never hang on a FIFO; it does not affect regular files. */
  src->fd = perf__mapped_file_open(path, O_RDONLY | O_NONBLOCK);
  struct stat st;
  if (src->fd >= 0 && fstat(src->fd, &st) == 0 && S_ISREG(st.st_mode))
    src->elf = elf_begin(src->fd, ELF_C_READ_MMAP, NULL);
  return src_is_elf(src) ? PERF_OK : PERF_E_SYSTEM;
}

/* elf_memory() takes a writable char * and may convert data in place, while
   the vDSO is mapped read-only: hand it a private heap copy instead. */
static int src_open_image(elf_src_t *src, const void *image, size_t size) {
  *src = (elf_src_t){-1, malloc(size), NULL};
  if (!src->copy) return PERF_E_NO_MEMORY;
  memcpy(src->copy, image, size);
  src->elf = elf_memory(src->copy, size);
  return src_is_elf(src) ? PERF_OK : PERF_E_SYSTEM;
}

static void src_close(elf_src_t *src) {
  if (src->elf) elf_end(src->elf);
  if (src->fd >= 0) close(src->fd);
  free(src->copy);
  *src = (elf_src_t){-1, NULL, NULL};
}

/* Only called while the table is still empty: the debug file's .symtab
   stands for the module's own. */
static int load_debug_file(perf__symtab_t *tab, const char *debug_path) {
  elf_src_t src;
  if (src_open_path(&src, debug_path) != PERF_OK) return PERF_OK; /* unusable: none */
  int rc = load_symsec(tab, src.elf, SHT_SYMTAB);
  src_close(&src);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Reading the symbols                                                       */
/* ------------------------------------------------------------------------ */

/* Room for n more symbols and bytes more name bytes. */
static int reserve(perf__symtab_t *tab, size_t n, size_t bytes) {
  if (n > SIZE_MAX / sizeof *tab->syms - tab->count || bytes > SIZE_MAX - tab->names_bytes)
    return PERF_E_NO_MEMORY;
  if (tab->count + n > tab->cap) {
    sym_t *s = realloc(tab->syms, (tab->count + n) * sizeof *s);
    if (!s) return PERF_E_NO_MEMORY;
    tab->syms = s;
    tab->cap = tab->count + n;
  }
  if (tab->names_bytes + bytes > tab->names_cap) {
    char *p = realloc(tab->names, tab->names_bytes + bytes);
    if (!p) return PERF_E_NO_MEMORY;
    tab->names = p;
    tab->names_cap = tab->names_bytes + bytes;
  }
  return PERF_OK;
}

/* Add a symbol (room reserved) whose name of len bytes is already at the
   end of the names. */
static void push_sym(perf__symtab_t *tab, size_t len, uint64_t addr, uint64_t end, bool sized,
                     uint8_t rank) {
  sym_t *d = &tab->syms[tab->count];
  d->addr = addr;
  d->end = end;
  d->sized = sized;
  d->rank = rank;
  d->order = tab->count++;
  d->cover = NO_COVER;
  d->name_at = tab->names_bytes;
  tab->names[tab->names_bytes + len] = '\0';
  tab->names_bytes += len + 1;
}

/* Add a symbol (room reserved) named by name's first len bytes. */
static void add_sym(perf__symtab_t *tab, const char *name, size_t len, uint64_t addr, uint64_t end,
                    bool sized, uint8_t rank) {
  memcpy(tab->names + tab->names_bytes, name, len);
  push_sym(tab, len, addr, end, sized, rank);
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

/* Symbol `i` when it is a defined function with a name, else false; *len
   is its name's length without a symbol version ("memcpy@@GLIBC_2.14"). */
static bool read_func(const symsec_t *sec, size_t i, GElf_Sym *sym, const char **name,
                      size_t *len) {
  if (i > INT32_MAX || !gelf_getsym(sec->data, (int)i, sym)) return false;
  int type = GELF_ST_TYPE(sym->st_info);
  if (type != STT_FUNC && type != STT_GNU_IFUNC) return false;
  if (sym->st_value == 0 || sym->st_shndx == SHN_UNDEF) return false;
  *name = elf_strptr(sec->elf, sec->strndx, sym->st_name);
  if (!*name || !**name) return false;
  const char *at = strchr(*name + 1, '@');
  *len = at ? (size_t)(at - *name) : strlen(*name);
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

/* The functions of elf's symbol section of `type` (SHT_SYMTAB or
   SHT_DYNSYM), added to the table: counted first, then copied. */
static int load_symsec(perf__symtab_t *tab, Elf *elf, GElf_Word type) {
  symsec_t sec;
  if (!find_symsec(elf, type, &sec)) return PERF_OK;
  size_t n = 0, bytes = 0;
  for (size_t i = 1; i < sec.nsyms; i++) {
    GElf_Sym sym;
    const char *name;
    size_t len;
    if (!read_func(&sec, i, &sym, &name, &len)) continue;
    if (len + 1 > SIZE_MAX - bytes) return PERF_E_NO_MEMORY;
    bytes += len + 1;
    n++;
  }
  int rc = n ? reserve(tab, n, bytes) : PERF_OK;
  for (size_t i = 1; rc == PERF_OK && i < sec.nsyms && n > 0; i++) {
    GElf_Sym sym;
    const char *name;
    size_t len;
    if (!read_func(&sec, i, &sym, &name, &len)) continue;
    int bind = GELF_ST_BIND(sym.st_info);
    bool sized = sym.st_size != 0;
    add_sym(tab, name, len, sym.st_value,
            sized ? sat_add(sym.st_value, sym.st_size)
                  : section_end(elf, sym.st_shndx, sym.st_value),
            sized,
            bind == STB_GLOBAL ? RANK_GLOBAL
            : bind == STB_WEAK ? RANK_WEAK
                               : RANK_LOCAL);
    n--;
  }
  return rc;
}

/* A PLT stub as gdb names it: "<symbol>[+0x<addend>]@plt", "*ABS*" for a
   relocation without a symbol. */
static int add_plt_stub(void *ctx, uint64_t addr, uint64_t size, const char *symbol,
                        uint64_t addend) {
  perf__symtab_t *tab = ctx;
  char suffix[32];
  int n = addend ? snprintf(suffix, sizeof suffix, "+0x%llx@plt", (unsigned long long)addend)
                 : snprintf(suffix, sizeof suffix, "@plt");
  const char *base = symbol ? symbol : "*ABS*";
  const char *at = strchr(base + 1, '@');
  size_t len = at ? (size_t)(at - base) : strlen(base);
  if (n <= 0 || len > SIZE_MAX / 2) return PERF_E_NO_MEMORY;
  int rc = reserve(tab, 1, len + (size_t)n + 1);
  if (rc != PERF_OK) return rc;
  char *name = tab->names + tab->names_bytes;
  memcpy(name, base, len);
  memcpy(name + len, suffix, (size_t)n);
  push_sym(tab, len + (size_t)n, addr, sat_add(addr, size), true, RANK_LOCAL);
  return PERF_OK;
}

static int cmp_sym(const void *a, const void *b);
static size_t dedupe(sym_t *s, size_t n);
static void finish(sym_t *s, size_t n);

/* Sorted, one symbol per address, every zero-sized one's reach set; the
   array cut to what is kept (aliases go). */
static void finish_table(perf__symtab_t *tab) {
  if (tab->count == 0) return;
  qsort(tab->syms, tab->count, sizeof *tab->syms, cmp_sym);
  tab->count = dedupe(tab->syms, tab->count);
  finish(tab->syms, tab->count);
  sym_t *fit = realloc(tab->syms, tab->count * sizeof *fit);
  if (fit) {
    tab->syms = fit;
    tab->cap = tab->count;
  }
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
