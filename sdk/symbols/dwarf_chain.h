/*
 * dwarf_chain.h - the DWARF of one module file, read with elfutils libdw:
 * for an address, the chain of functions inlined there, innermost first,
 * each with its source line, as gdb and `addr2line -i` show it. Also what
 * that DWARF costs in memory, for the cap of symbols.c.
 *
 * Not thread-safe: symbols.c uses a handle under its module's lock. Any
 * thread but the signal handler.
 */
#ifndef PERF_SYMBOLS_DWARF_CHAIN_H
#define PERF_SYMBOLS_DWARF_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libelf.h>

typedef struct perf__sym_dwarf_s perf__sym_dwarf_t;

/* One function of a chain as DWARF tells it. Strings point into the DWARF
   or into the caller's scratch: valid until the next call on the handle. */
typedef struct perf__sym_dwarf_level_s {
  const char *linkage; /* DW_AT_linkage_name (raw), NULL when DWARF has none */
  const char *name;    /* DW_AT_name qualified with its namespaces and classes */
  const char *file;    /* NULL when unknown */
  uint32_t line, column;
} perf__sym_dwarf_level_t;

/* Bytes the DWARF of `path` would take once opened (its .debug_*
   sections, uncompressed), 0 when the file has no .debug_info. */
size_t perf__sym_dwarf_size(const char *path);

/* Whether an open ELF file has DWARF: a .debug_info (or the old
   compressed .zdebug_info) section with bytes in the file. */
bool perf__sym_elf_has_dwarf(Elf *elf);

/* Open the DWARF of the ELF file at `path`. NULL when it has none or it
   cannot be read. *bytes gets what the open handle takes (the sections,
   and a supplementary dwz file's). */
perf__sym_dwarf_t *perf__sym_dwarf_open(const char *path, size_t *bytes);
void perf__sym_dwarf_close(perf__sym_dwarf_t *d);

/* The chain at ELF virtual address vaddr into levels[0..max): levels[0]
   the innermost function, the last one the function the code belongs to
   (a chain deeper than max keeps its max - 1 innermost functions and that
   last one). Names that need building go into scratch[0..scratch_len).
   Returns the number of levels, 0 when DWARF does not cover vaddr.
   *low_pc gets the start of the last function. *grown gets the bytes the
   handle took for this call (a compilation unit's line table read for the
   first time). */
size_t perf__sym_dwarf_chain(perf__sym_dwarf_t *d, uint64_t vaddr, perf__sym_dwarf_level_t *levels,
                             size_t max, char *scratch, size_t scratch_len, uint64_t *low_pc,
                             size_t *grown);

#endif
