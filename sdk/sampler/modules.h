/*
 * modules.h - the sampler's view of the loaded modules: a reference-counted
 * snapshot pairing the module map with each module's unwind rules (for the
 * signal handler) and symbolizer module (sdk/symbols: names, inline chains
 * and source lines, for naming frames).
 *
 * Rules are compiled lazily, per module, the first time a walk reaches one
 * of its pcs (perf__modules_compile_rules; an app samples a handful of its
 * modules, GTK maps 80). Rules and symbolizer modules are cached per module
 * file (path + build-id; for a module without a build-id, path + the
 * file's device, inode, size and mtime + its load address, so a library
 * rewritten at the same path and loaded again gets its own names and
 * rules) for the life of the process and never freed, so a late signal
 * handler can never read freed rules and a library loaded again is not
 * parsed again
 * (the DWARF behind the names stays under sdk/symbols' cap). A symbolizer
 * module that could not be opened (its file unreadable for a while) is
 * tried again after the symbolizer's next idle drop (symbols.h). The cache
 * holds at most PERF__MODULE_CACHE_MAX files; past that, new modules unwind
 * by frame pointers and are named through dladdr.
 *
 * Used by capture-requesting threads, the writer and text API callers,
 * never in the signal handler (which sees just the snapshot's `unwind`
 * map). Naming a frame (DWARF, demangling) never runs on the watched thread.
 */
#ifndef PERF_MODULES_H
#define PERF_MODULES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sdk/sampler/module_map.h"
#include "sdk/sampler/unwind_rules.h"
#include "sdk/symbols/symbols.h"

#define PERF__MODULE_CACHE_MAX 4096

typedef struct perf__module_entry_s perf__module_entry_t;

typedef struct perf__modules_s {
  atomic_int refs;
  perf__module_map_t *map;
  perf__module_entry_t **entries; /* parallel to map->modules; NULL past the cache bound */
  perf__unwind_map_t *unwind;     /* what the signal handler reads */
  void *dwfl_unwinder;            /* lazily made for PERF_UNWIND_STACK_COPY */
} perf__modules_t;

/* A symbolized frame: one pc, and the functions it is in, innermost first
   (sym.lines; the last is the physical function, sym.offset is pc minus its
   start). Strings are owned by the module cache and live as long as the
   process. */
typedef struct perf__frame_info_s {
  const char *module;    /* basename, "??" when the pc is in no known module */
  uintptr_t module_rel;  /* pc - load bias (the ELF virtual address) */
  perf__sym_frame_t sym; /* sym.count 0: no name known */
} perf__frame_info_t;

/* The physical function's name, NULL when unknown. */
static inline const char *perf__frame_symbol(const perf__frame_info_t *fi) {
  return fi->sym.count ? fi->sym.lines[fi->sym.count - 1].function : NULL;
}

/* The current snapshot, rebuilt first when modules were loaded or unloaded.
   Returns NULL only when memory ran out. Release with perf__modules_release. */
perf__modules_t *perf__modules_acquire(void);

/* Register the cache's fork handlers (once; also done when the library
   loads). The sampler calls it before registering its own, whose prepare
   must run first. */
void perf__modules_fork_register(void);
void perf__modules_release(perf__modules_t *mods);

/* Name `pc` with its inline chain. `return_address` says pc follows a call
   (look up pc - 1) rather than being an interrupted pc (looked up as is). */
void perf__modules_symbolize(perf__modules_t *mods, uintptr_t pc, bool return_address,
                             perf__frame_info_t *out);

/* Compile the rules of the module holding `pc` (or pc - 1: a return
   address at a module's end) if they are pending, and publish them in this
   snapshot. True when a walk that stopped there with
   PERF__WALK_RULES_PENDING can now go further (rules, or frame pointers for
   a module without usable CFI), whether this call compiled them or another
   thread did since that walk. Takes the cache's lock; never in a signal
   handler. */
bool perf__modules_compile_rules(perf__modules_t *mods, uintptr_t pc);

/* Compile every pending module's rules (tools and tests that walk stacks
   themselves, such as the unwind validator). */
void perf__modules_compile_all_rules(perf__modules_t *mods);

/* The libdwfl unwinder over this snapshot's modules, made on first use;
   NULL when it cannot be made. Owned by the snapshot. */
void *perf__modules_dwfl_unwinder(perf__modules_t *mods);

#endif
