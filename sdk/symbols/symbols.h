/*
 * symbols.h - names for the code addresses of ELF modules, as a person
 * reads them and as gdb shows them: the function (ELF symbol tables of the
 * file or of its separate debug file found by GNU build-id or debuglink,
 * its dynamic symbols, its PLT stubs as `clock_gettime@plt`),
 * the chain of functions inlined at the address with their source lines
 * (DWARF, elfutils libdw), C++ and Rust names demangled (libiberty), a
 * compiler clone shown as "f(int) [clone .isra.0]".
 *
 * Shared by the SDK (naming frames on the device, off the signal handler)
 * and the collector (naming frames from debug files by build-id). Depends
 * on sdk/base only.
 *
 * A module's symbol table is read when the module is opened; its DWARF is
 * read lazily, at the first lookup that needs it, and the DWARF of all open
 * modules together stays under the cap given to perf__symbols_set_cap
 * (least recently used modules drop theirs first). Lookups are cached per
 * (module, address). A read that failed (the DWARF, a debug file that was
 * there but could not be read) is tried again after the next idle drop
 * (perf__symbols_drop_dwarf).
 *
 * Names: the function the machine code belongs to (the last line of a
 * frame) is named by the symbol table, demangled, as perf and pprof name
 * it ("f(int) [clone .isra.0]"): the same name whether or not DWARF is at
 * hand. Inlined functions are named by DWARF: the demangled linkage name,
 * else DW_AT_name with its namespaces and classes ("std::mutex::lock()",
 * "shop::wait_for_go"), as gdb shows them.
 *
 * Memory: the DWARF cap (counted as described in dwarf_chain.c); per
 * module, its symbol table, interned names (at most PERF__SYM_NAMES_MAX
 * bytes; past it new names are not demangled or read from DWARF) and the
 * lookup cache (at most PERF__SYM_CACHE_MAX addresses; emptied when full).
 *
 * Thread safety: a perf__sym_module_t may be used by several threads; its
 * lookups are serialized inside. Never in a signal handler.
 */
#ifndef PERF_SYMBOLS_SYMBOLS_H
#define PERF_SYMBOLS_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PERF__SYM_DEFAULT_CAP (32u << 20) /* DWARF of all modules together */
#define PERF__SYM_NAMES_MAX (8u << 20)    /* interned names per module */
#define PERF__SYM_CACHE_MAX 65536         /* cached addresses per module */

/* Functions kept per address, the physical one included: a deeper inline
   chain keeps its innermost PERF__SYM_MAX_LINES - 1 and the physical one
   (gdb showed up to 14 on the C++ programs we tried, std::sort's chains). */
#define PERF__SYM_MAX_LINES 32

/* One function of an address's inline chain, and the source line in it. */
typedef struct perf__sym_line_s {
  const char *function; /* display name (demangled); never NULL */
  const char *linkage;  /* raw linkage name when it differs from function, else NULL */
  const char *file;     /* source file path, NULL when unknown */
  uint32_t line;        /* 0 when unknown */
  uint32_t column;      /* 0 when unknown */
} perf__sym_line_t;

/* What an address is: lines[0] is the innermost function (inlined where
   count > 1), lines[count - 1] the function the machine code belongs to.
   Strings are owned by the module and stay valid until it is freed. */
typedef struct perf__sym_frame_s {
  perf__sym_line_t lines[PERF__SYM_MAX_LINES];
  size_t count;    /* 0: no symbol for the address */
  uint64_t offset; /* address - start of the physical function (lines[count - 1]) */
  bool from_dwarf; /* the chain and lines come from DWARF (else: symbol table only) */
} perf__sym_frame_t;

typedef struct perf__sym_module_s perf__sym_module_t;

/* Open the module at `path` (or the in-memory image [image, image + size)
   when image is not NULL, e.g. the vDSO). Its DWARF is the module's own
   .debug_info, else that of its separate debug file, found as gdb finds
   it (debug_file.h): by build_id (may be NULL) under
   <dir>/.build-id/xx/rest.debug, then by .gnu_debuglink next to the file,
   in its .debug/ folder and under <dir>/<its folder>/, <dir> being each of
   debug_dirs (a colon-separated list, may be NULL: the collector's symbol
   store) and /usr/lib/debug. The collector may open a debug file itself
   as `path` (objcopy --only-keep-debug keeps .symtab and DWARF). Returns
   0 or a negative perf_error_t (PERF_E_INVALID_ARGUMENT, PERF_E_NO_MEMORY,
   PERF_E_SYSTEM: not a readable ELF file); a module without symbols is not
   an error (lookups find nothing). Free with perf__sym_module_free, when
   no other thread uses it. */
int perf__sym_module_open(const char *path, const void *image, size_t image_size,
                          const uint8_t *build_id, size_t build_id_len, const char *debug_dirs,
                          perf__sym_module_t **out);
void perf__sym_module_free(perf__sym_module_t *m);

/* Name ELF virtual address `vaddr` of the module (a return address is
   looked up by the caller at address - 1). Returns true when a function
   was found. */
bool perf__sym_lookup(perf__sym_module_t *m, uint64_t vaddr, perf__sym_frame_t *out);

/* The most bytes the DWARF data of all open modules may take together
   (default 32 MiB); past it the least recently used modules drop theirs and
   read it again when needed. A module whose DWARF alone is larger is named
   from its symbol table only. */
void perf__symbols_set_cap(size_t bytes);

/* Close every module's DWARF now, and free the symbol table of each module
   whose DWARF was open (both read again by the next new address of the
   module; cached answers stay). The SDK's writer calls it when it goes
   idle: events are rare, and an app should not carry the decompressed debug
   info of libc (~14 MiB) between them, nor its full symbol table from the
   debug file (~0.45 MiB). */
void perf__symbols_drop_dwarf(void);

/* How many times perf__symbols_drop_dwarf ran. What failed to open (a
   module's DWARF here, a module in the sampler's cache) is tried again
   after the next drop, not before: the failure may have been for a while
   only (no file descriptor left, no memory, libdw not loadable). */
size_t perf__symbols_drops(void);

/* What the symbolizer holds now, for tests and benchmarks. */
typedef struct perf__symbols_stats_s {
  size_t dwarf_bytes;   /* counted DWARF of all modules (<= the cap after each lookup) */
  size_t dwarf_modules; /* modules holding their DWARF */
  size_t dwarf_opens;   /* DWARF handles opened so far (again after a drop counts) */
  size_t table_loads;   /* symbol tables read again after a drop */
} perf__symbols_stats_t;
void perf__symbols_stats(perf__symbols_stats_t *out);

/* Heap bytes module m holds besides its DWARF: symbol table, names, cache. */
size_t perf__sym_module_bytes(perf__sym_module_t *m);

/* fork: prepare waits for every call in flight and holds the rest off
   until parent (in the parent) or child (in the child) lets them go. For
   pthread_atfork handlers; a caller holding its own lock around symbol
   calls takes that lock first (sdk/sampler/modules.c does). */
void perf__symbols_fork_prepare(void);
void perf__symbols_fork_parent(void);
void perf__symbols_fork_child(void);

/* Demangle a C++ (Itanium) or Rust symbol for people; NULL when `linkage`
   is not a mangled name (then show it as it is). The result is malloc'd;
   the caller frees it. Clone suffixes come out as " [clone .isra.0]", a
   PLT stub's name as gdb shows it ("_ZSt9terminatev@plt" reads
   "std::terminate()@plt"). */
char *perf__sym_demangle(const char *linkage);

/* The function's name without its clone suffixes (" [clone .isra.0]",
   ".constprop.0", ".part.1", ".cold"...): what groups a function's clones
   together. Writes into out (size bytes, truncated); returns out. */
char *perf__sym_base_name(const char *name, char *out, size_t size);

#endif
