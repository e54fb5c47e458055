/*
 * sym_store.h - what one module keeps of its lookups: interned names
 * (function names raw and demangled, file paths), each stored once and kept
 * until the module is freed, so a lookup's strings stay valid after the
 * DWARF they came from is dropped; and the answers per address.
 *
 * Both are bounded (symbols.h: PERF__SYM_NAMES_MAX, PERF__SYM_CACHE_MAX).
 * Not thread-safe: used under the module's lock (symbols.c).
 */
#ifndef PERF_SYMBOLS_SYM_STORE_H
#define PERF_SYMBOLS_SYM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "sdk/symbols/symbols.h"

typedef struct perf__sym_block_s perf__sym_block_t;
typedef struct perf__sym_name_s perf__sym_name_t;
typedef struct perf__sym_slot_s perf__sym_slot_t;

typedef struct perf__sym_store_s {
  perf__sym_block_t *blocks; /* the names' bytes; never moved */
  perf__sym_name_t *names;
  size_t n_names, names_cap;
  uint32_t *name_ix; /* open addressing: name + 1, 0 empty */
  size_t name_ix_cap;
  size_t name_bytes;       /* counted against PERF__SYM_NAMES_MAX */
  perf__sym_slot_t *slots; /* open addressing by address */
  size_t n_slots, slots_cap;
  perf__sym_line_t *lines; /* the cached answers' lines */
  size_t n_lines, lines_cap;
} perf__sym_store_t;

void perf__sym_store_init(perf__sym_store_t *s);
void perf__sym_store_free(perf__sym_store_t *s);

/* The stored copy of text[0..len) (NUL-terminated), NULL when the names
   are full or memory ran out. */
const char *perf__sym_store_name(perf__sym_store_t *s, const char *text, size_t len);

/* The display name of linkage name `raw`: demangled once and stored, or
   raw itself when it is not mangled. *stored_raw gets raw's stored copy.
   NULL when the names are full. */
const char *perf__sym_store_display(perf__sym_store_t *s, const char *raw, const char **stored_raw);

/* The cached answer for vaddr into *out; false when there is none. */
bool perf__sym_store_get(const perf__sym_store_t *s, uint64_t vaddr, perf__sym_frame_t *out);

/* Cache the answer for vaddr (its strings must be stored names). A full
   cache is emptied first; out of memory: not cached. */
void perf__sym_store_put(perf__sym_store_t *s, uint64_t vaddr, const perf__sym_frame_t *f);

/* Heap bytes held. */
size_t perf__sym_store_bytes(const perf__sym_store_t *s);

#endif
