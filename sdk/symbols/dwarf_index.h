/*
 * dwarf_index.h - what one walk over a compilation unit's DIEs tells, kept
 * so that no lookup walks the unit again: the address ranges of its
 * functions (DW_TAG_subprogram with code), and the namespaces and classes
 * around each function DIE (to name a function DWARF gives no linkage name
 * for, as gdb does). libdw itself finds a DIE's scopes only by walking the
 * unit from its start (dwarf_getscopes, dwarf_getscopes_die): milliseconds
 * per address in a C++ unit of the standard library's templates.
 *
 * Not thread-safe: used under the lock of the module that owns the DWARF
 * handle (dwarf_chain.c). Any thread but the signal handler.
 */
#ifndef PERF_SYMBOLS_DWARF_INDEX_H
#define PERF_SYMBOLS_DWARF_INDEX_H

#include <elfutils/libdw.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct perf__sym_unit_s perf__sym_unit_t;

/* The units indexed so far, for one DWARF handle (and its dwz file). */
typedef struct perf__sym_index_s {
  perf__sym_unit_t **units; /* sorted by the unit DIE's address in memory */
  size_t n, cap;
} perf__sym_index_t;

/* The index of the unit holding `die` (any DIE of it), built at first use;
   *grown gets what building it took (0 when it was there). NULL when the
   DIE has no unit or memory ran out. */
const perf__sym_unit_t *perf__sym_index_unit(perf__sym_index_t *ix, Dwarf_Die *die, size_t *grown);

/* The DIE offset of the innermost function of unit u with code at vaddr;
   false when there is none. */
bool perf__sym_unit_function(const perf__sym_unit_t *u, uint64_t vaddr, uint64_t *die_offset);

/* The namespaces and classes around the function DIE at die_offset, as
   "shop::pricing::" ("" at the unit's top level, inside a function, or
   when the DIE is no function of u). Valid while the index lives. */
const char *perf__sym_unit_prefix(const perf__sym_unit_t *u, uint64_t die_offset);

void perf__sym_index_free(perf__sym_index_t *ix);

#endif
