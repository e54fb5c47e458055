/*
 * symbolize.h - names for module-relative addresses from debug files found
 * by GNU build-id under the symbols directory (symbol_files.h), read with
 * the SDK's symbolizer (sdk/symbols/symbols.h, elfutils libdw and
 * libiberty's demangler): the inline chain at the address, innermost
 * first, each function with its demangled name, its linkage name and its
 * file:line, the last one the function the machine code belongs to (named
 * from the symbol table, as the SDK names frames on the device).
 *
 * Local files only: a lookup never touches the network (ingest calls it on
 * MHD's workers); resymbolize.c fetches what is missing in the background.
 * A bounded cache keeps one open module per build-id (least recently used
 * evicted; the DWARF of all of them under sdk/symbols' memory cap) and
 * remembers missing files for a few seconds. Thread-safe: one mutex
 * around the cache and the lookups.
 */
#ifndef PERF_COLLECTOR_SYMBOLIZE_H
#define PERF_COLLECTOR_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/model/symbol.h"
#include "sdk/symbols/symbols.h"

typedef struct symbolizer_s symbolizer_t;

enum symbolize_result {
  SYMBOLIZE_FOUND = 0,
  SYMBOLIZE_NO_SYMBOL = 1, /* the debug file has no function there */
  SYMBOLIZE_NO_FILE = 2,   /* no (usable) debug file for that build-id */
};

/* dir is kept (must outlive the symbolizer); max_files bounds the cache. */
symbolizer_t *symbolizer_new(const char *dir, size_t max_files);
void symbolizer_free(symbolizer_t *s);
const char *symbolizer_dir(const symbolizer_t *s);

/* Name the module-relative (ELF virtual) address of build-id id (lowercase
   hex). Return addresses are looked up by the caller at address - 1. */
int symbolizer_lookup(symbolizer_t *s, const char *id, uint64_t address, symbol_t *out);

/* Forget what the cache knows of id (a debug file arrived for it). */
void symbolizer_forget(symbolizer_t *s, const char *id);

/* How many times symbolizer_forget ran: what was named before another
   count may be named differently now (stack_cache.h). */
uint64_t symbolizer_generation(symbolizer_t *s);

/* A debug file found missing is looked for again after this long, on the
   clock symbolizer_now_s reads (CLOCK_MONOTONIC, seconds). */
#define SYMBOLIZER_MISSING_RECHECK_S 2.0
double symbolizer_now_s(void);

/* True when a usable debug file for id is in the symbols directory (it is
   opened and cached, as by a lookup). */
bool symbolizer_available(symbolizer_t *s, const char *id);

#endif
