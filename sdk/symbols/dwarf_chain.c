/*
 * dwarf_chain.c - inline chains and source lines from a module's DWARF
 * (see dwarf_chain.h), read with elfutils libdw: the compilation unit
 * holding the address (.debug_aranges), the function with code there (the
 * unit's index, dwarf_index.c: one walk per unit instead of one per
 * address), then down its children through the scopes holding the address
 * (dwarf_haspc): the inlined subroutines met on the way are the chain, as
 * eu-addr2line -i and gdb see it; the innermost line from the line table,
 * each outer one from the call site (DW_AT_call_file, DW_AT_call_line) of
 * the inlined subroutine inside it.
 *
 * What a handle costs is counted, not measured (libdw has no allocator
 * hook): every .debug_* section at its uncompressed size (libdw maps or
 * decompresses them at open), the unit structures libdw makes while it
 * reads .debug_aranges (ARANGE_BYTES each), then per compilation unit
 * whose lines are read, an allowance per line-table row and per file name
 * (LINE_BYTES, FILE_BYTES, CU_BYTES), and the units' indexes
 * (dwarf_index.c) at their allocated size. Measured with mallinfo2 on
 * libc's debug file and C++ modules, the count stays at or above what the
 * heap gained (bench/README.md, names_bench).
 *
 * Runs under the lock of the module that owns the handle (symbols.c).
 */
#include "sdk/symbols/dwarf_chain.h"

#include "sdk/symbols/dwarf_index.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE_BYTES 64     /* libdw's Dwarf_Line and its sorted array, per row */
#define FILE_BYTES 128    /* a file entry and its composed path */
#define CU_BYTES 1024     /* a unit's own structures, abbreviations */
#define ARANGE_BYTES 1100 /* per .debug_aranges entry: libdw makes its unit (measured ~1 KiB) */
#define CHAIN_MAX 256     /* inlined calls of one address (nesting beyond is cut) */
#define BLOCKS_MAX 1024   /* scopes walked down from a function */
#define ORIGIN_HOPS 8     /* abstract_origin / specification links followed */

struct perf__sym_dwarf_s {
  int fd;
  Elf *elf;
  Dwarf *dw;
  uint64_t *units; /* offsets of the units already counted, sorted */
  size_t n_units, units_cap;
  bool aranges_counted;
  perf__sym_index_t index;
  Dwarf_Die path[CHAIN_MAX], chain[CHAIN_MAX]; /* one lookup's scopes (not on the stack) */
};

static size_t sections_size(Elf *elf, bool *has_info);
static size_t count_unit(perf__sym_dwarf_t *d, Dwarf_Die *cu);
static size_t inline_chain(Dwarf_Die *fn, uint64_t vaddr, Dwarf_Die *path, Dwarf_Die *chain,
                           size_t max);
static void describe(perf__sym_dwarf_t *d, Dwarf_Die *die, perf__sym_dwarf_level_t *lv,
                     char *scratch, size_t len, size_t *used, size_t *grown);
static void call_site(Dwarf_Die *inlined, perf__sym_dwarf_level_t *outer);

size_t perf__sym_dwarf_size(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;
  Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  bool has_info = false;
  size_t size = elf ? sections_size(elf, &has_info) : 0;
  if (elf) elf_end(elf);
  close(fd);
  return has_info ? size : 0;
}

perf__sym_dwarf_t *perf__sym_dwarf_open(const char *path, size_t *bytes) {
  *bytes = 0;
  perf__sym_dwarf_t *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (d->fd >= 0) d->elf = elf_begin(d->fd, ELF_C_READ_MMAP, NULL);
  bool has_info = false;
  size_t size = d->elf ? sections_size(d->elf, &has_info) : 0;
  if (has_info) d->dw = dwarf_begin_elf(d->elf, DWARF_C_READ, NULL);
  if (!d->dw) {
    perf__sym_dwarf_close(d);
    return NULL;
  }
  /* A dwz-compressed debug file shares DIEs and strings with a
     supplementary file that libdw opens with it (Debian's -dbg packages). */
  Dwarf *alt = dwarf_getalt(d->dw);
  if (alt && dwarf_getelf(alt)) size += sections_size(dwarf_getelf(alt), &has_info);
  *bytes = size + sizeof *d;
  return d;
}

void perf__sym_dwarf_close(perf__sym_dwarf_t *d) {
  if (!d) return;
  if (d->dw) dwarf_end(d->dw);
  if (d->elf) elf_end(d->elf);
  if (d->fd >= 0) close(d->fd);
  perf__sym_index_free(&d->index);
  free(d->units);
  free(d);
}

size_t perf__sym_dwarf_chain(perf__sym_dwarf_t *d, uint64_t vaddr, perf__sym_dwarf_level_t *levels,
                             size_t max, char *scratch, size_t scratch_len, uint64_t *low_pc,
                             size_t *grown) {
  *grown = 0;
  Dwarf_Die cu, fn;
  if (max == 0 || !dwarf_addrdie(d->dw, vaddr, &cu)) return 0;
  size_t built = 0;
  *grown = count_unit(d, &cu);
  const perf__sym_unit_t *u = perf__sym_index_unit(&d->index, &cu, &built);
  *grown += built;
  uint64_t off;
  if (!u || !perf__sym_unit_function(u, vaddr, &off) || !dwarf_offdie(d->dw, off, &fn)) return 0;
  Dwarf_Die *chain = d->chain;
  size_t count = inline_chain(&fn, vaddr, d->path, chain, CHAIN_MAX);
  Dwarf_Addr lo = 0;
  *low_pc = dwarf_entrypc(&fn, &lo) == 0 ? lo : vaddr;
  /* Too deep: the innermost max - 1 functions and the physical one. */
  size_t keep = count <= max ? count : max, used = 0;
  for (size_t k = 0; k < keep; k++) {
    size_t src = k + 1 < keep ? k : count - 1;
    describe(d, &chain[src], &levels[k], scratch, scratch_len, &used, &built);
    *grown += built;
  }
  Dwarf_Line *line = dwarf_getsrc_die(&cu, vaddr);
  int lineno = 0, col = 0;
  levels[0].file = line ? dwarf_linesrc(line, NULL, NULL) : NULL;
  levels[0].line = line && dwarf_lineno(line, &lineno) == 0 && lineno > 0 ? (uint32_t)lineno : 0;
  levels[0].column = line && dwarf_linecol(line, &col) == 0 && col > 0 ? (uint32_t)col : 0;
  for (size_t k = 1; k < keep; k++) {
    size_t inner = k + 1 < keep ? k - 1 : count - 2; /* the inlined call inside level k */
    call_site(&chain[inner], &levels[k]);
  }
  return keep;
}

/* ------------------------------------------------------------------------ */
/* Scopes and names                                                          */
/* ------------------------------------------------------------------------ */

/* The inlined subroutines of fn holding vaddr, innermost first, then fn:
   down through the children (lexical blocks, inlined subroutines, try
   blocks) whose ranges hold vaddr. Returns how many (at least 1). */
static size_t inline_chain(Dwarf_Die *fn, uint64_t vaddr, Dwarf_Die *path, Dwarf_Die *chain,
                           size_t max) {
  size_t n = 0;
  path[n++] = *fn;
  Dwarf_Die cur = *fn, child;
  for (int steps = 0; steps < BLOCKS_MAX && dwarf_child(&cur, &child) == 0; steps++) {
    bool down = false;
    do {
      int tag = dwarf_tag(&child);
      if (tag != DW_TAG_subprogram && dwarf_haspc(&child, vaddr) == 1) {
        if (tag == DW_TAG_inlined_subroutine && n < CHAIN_MAX) path[n++] = child;
        cur = child;
        down = true;
      }
    } while (!down && dwarf_siblingof(&child, &child) == 0);
    if (!down) break;
  }
  size_t count = n < max ? n : max;
  for (size_t k = 0; k < count; k++) /* innermost first; fn last */
    chain[k] = path[k + 1 == count ? 0 : n - 1 - k];
  return count;
}

/* Append s[0..n) to scratch; false when it does not fit. */
static bool append(char *scratch, size_t len, size_t *used, const char *s, size_t n) {
  if (*used + n >= len) return false;
  memcpy(scratch + *used, s, n);
  *used += n;
  scratch[*used] = '\0';
  return true;
}

/* The DIE's name with the namespaces and classes around its declaration,
   as gdb spells it, into scratch; the bare name when that does not fit;
   NULL when it has no name. */
static const char *qualified_name(perf__sym_dwarf_t *d, Dwarf_Die *die, char *scratch, size_t len,
                                  size_t *used, size_t *grown) {
  Dwarf_Die decl = *die, next;
  Dwarf_Attribute a;
  for (int hop = 0; hop < ORIGIN_HOPS; hop++) {
    if (!dwarf_formref_die(dwarf_attr(&decl, DW_AT_abstract_origin, &a), &next) &&
        !dwarf_formref_die(dwarf_attr(&decl, DW_AT_specification, &a), &next))
      break;
    decl = next;
  }
  const char *name = dwarf_diename(&decl);
  if (!name) return NULL;
  const perf__sym_unit_t *u = perf__sym_index_unit(&d->index, &decl, grown);
  const char *prefix = u ? perf__sym_unit_prefix(u, dwarf_dieoffset(&decl)) : "";
  size_t start = *used;
  if (append(scratch, len, used, prefix, strlen(prefix)) &&
      append(scratch, len, used, name, strlen(name) + 1))
    return scratch + start;
  *used = start;
  return name;
}

static void describe(perf__sym_dwarf_t *d, Dwarf_Die *die, perf__sym_dwarf_level_t *lv,
                     char *scratch, size_t len, size_t *used, size_t *grown) {
  Dwarf_Attribute a;
  memset(lv, 0, sizeof *lv);
  *grown = 0;
  lv->linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
  if (!lv->linkage)
    lv->linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
  if (!lv->linkage) lv->name = qualified_name(d, die, scratch, len, used, grown);
}

/* The file and line where `inlined` was called: the source position in the
   function around it. */
static void call_site(Dwarf_Die *inlined, perf__sym_dwarf_level_t *outer) {
  Dwarf_Attribute a;
  Dwarf_Word file = 0, line = 0, col = 0;
  Dwarf_Die cu;
  Dwarf_Files *files = NULL;
  size_t nfiles = 0;
  if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &a), &file) == 0 &&
      dwarf_diecu(inlined, &cu, NULL, NULL) && dwarf_getsrcfiles(&cu, &files, &nfiles) == 0 &&
      file < nfiles)
    outer->file = dwarf_filesrc(files, file, NULL, NULL);
  if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &a), &line) == 0 && line <= UINT32_MAX)
    outer->line = (uint32_t)line;
  if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_column, &a), &col) == 0 && col <= UINT32_MAX)
    outer->column = (uint32_t)col;
}

/* ------------------------------------------------------------------------ */
/* What it costs                                                             */
/* ------------------------------------------------------------------------ */

/* Uncompressed size of a section's data. */
static size_t section_bytes(Elf_Scn *scn, const GElf_Shdr *sh, const char *name) {
  if (sh->sh_flags & SHF_COMPRESSED) {
    GElf_Chdr ch;
    if (gelf_getchdr(scn, &ch)) return (size_t)ch.ch_size;
  }
  if (strncmp(name, ".zdebug_", 8) == 0) {
    Elf_Data *raw = elf_rawdata(scn, NULL);
    const unsigned char *p = raw ? raw->d_buf : NULL;
    if (p && raw->d_size >= 12 && memcmp(p, "ZLIB", 4) == 0) {
      uint64_t size = 0;
      for (int i = 4; i < 12; i++)
        size = size << 8 | p[i];
      return (size_t)size;
    }
  }
  return (size_t)sh->sh_size;
}

/* Sum of the .debug_* sections; *has_info when .debug_info has data. */
static size_t sections_size(Elf *elf, bool *has_info) {
  size_t shstrndx, total = 0;
  if (elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx) != 0) return 0;
  for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
    if (!name || sh.sh_type == SHT_NOBITS) continue;
    if (strncmp(name, ".debug_", 7) != 0 && strncmp(name, ".zdebug_", 8) != 0) continue;
    if ((strcmp(name, ".debug_info") == 0 || strcmp(name, ".zdebug_info") == 0) && sh.sh_size)
      *has_info = true;
    total += section_bytes(scn, &sh, name);
  }
  return total;
}

bool perf__sym_elf_has_dwarf(Elf *elf) {
  bool has_info = false;
  sections_size(elf, &has_info);
  return has_info;
}

/* What reading the unit's lines adds, the first time it is seen. */
static size_t count_unit(perf__sym_dwarf_t *d, Dwarf_Die *cu) {
  size_t add = 0;
  if (!d->aranges_counted) {
    Dwarf_Aranges *ar;
    size_t n = 0;
    d->aranges_counted = true;
    if (dwarf_getaranges(d->dw, &ar, &n) == 0) add += n * ARANGE_BYTES;
  }
  uint64_t off = dwarf_dieoffset(cu);
  size_t lo = 0, hi = d->n_units;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (d->units[mid] < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < d->n_units && d->units[lo] == off) return add;
  if (d->n_units == d->units_cap) {
    size_t cap = d->units_cap ? d->units_cap * 2 : 16;
    uint64_t *grown = realloc(d->units, cap * sizeof *grown);
    if (!grown) return add; /* counted again next time: never under */
    d->units = grown;
    d->units_cap = cap;
  }
  memmove(d->units + lo + 1, d->units + lo, (d->n_units - lo) * sizeof *d->units);
  d->units[lo] = off;
  d->n_units++;
  Dwarf_Lines *lines;
  Dwarf_Files *files;
  size_t nlines = 0, nfiles = 0;
  if (dwarf_getsrclines(cu, &lines, &nlines) != 0) nlines = 0;
  if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0) nfiles = 0;
  return add + CU_BYTES + nlines * LINE_BYTES + nfiles * FILE_BYTES + sizeof *d->units;
}
