/*
 * modules.h - the sampler's view of the loaded modules: a reference-counted
 * snapshot pairing the module map with each module's unwind rules (for the
 * signal handler) and symbol table (for naming frames).
 *
 * Rules and symbol tables are cached per module file (path + build-id) for
 * the life of the process and never freed, so a late signal handler can never
 * read freed rules and a library loaded again is not parsed again. The cache
 * holds at most PERF__MODULE_CACHE_MAX files; past that, new modules unwind
 * by frame pointers and are named through dladdr.
 *
 * Used by capture-requesting threads only, never in the signal handler
 * (which sees just the snapshot's `unwind` map).
 */
#ifndef PERF_MODULES_H
#define PERF_MODULES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sdk/sampler/module_map.h"
#include "sdk/sampler/unwind_rules.h"

#define PERF__MODULE_CACHE_MAX 4096

typedef struct perf__module_entry_s perf__module_entry_t;

typedef struct perf__modules_s {
  atomic_int refs;
  perf__module_map_t *map;
  perf__module_entry_t **entries; /* parallel to map->modules; NULL past the cache bound */
  perf__unwind_map_t *unwind;     /* what the signal handler reads */
  void *dwfl_unwinder;            /* lazily made for PERF_UNWIND_STACK_COPY */
} perf__modules_t;

/* A symbolized frame. Strings are owned by the module cache and live as long
   as the process. */
typedef struct perf__frame_info_s {
  const char *module;   /* basename, "??" when the pc is in no known module */
  const char *symbol;   /* NULL when unknown */
  uint64_t offset;      /* pc - symbol start */
  uintptr_t module_rel; /* pc - load bias (the ELF virtual address) */
} perf__frame_info_t;

/* The current snapshot, rebuilt first when modules were loaded or unloaded.
   Returns NULL only when memory ran out. Release with perf__modules_release. */
perf__modules_t *perf__modules_acquire(void);
void perf__modules_release(perf__modules_t *mods);

/* Name `pc`. `return_address` says pc follows a call (look up pc - 1) rather
   than being an interrupted pc (looked up as is). */
void perf__modules_symbolize(perf__modules_t *mods, uintptr_t pc, bool return_address,
                             perf__frame_info_t *out);

/* The libdwfl unwinder over this snapshot's modules, made on first use;
   NULL when it cannot be made. Owned by the snapshot. */
void *perf__modules_dwfl_unwinder(perf__modules_t *mods);

#endif
