/*
 * module_map.h - the loaded ELF modules of this process (executable, shared
 * libraries, vDSO) as reported by dl_iterate_phdr: path, load bias, the
 * address range of their executable segments and their GNU build-id.
 *
 * Built and refreshed by whichever thread requests a capture (never in the
 * signal handler, which only looks modules up). A map is immutable once
 * built; a refresh builds a new one.
 */
#ifndef PERF_MODULE_MAP_H
#define PERF_MODULE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PERF__BUILD_ID_MAX 64

typedef struct perf__module_s {
  char *path;           /* absolute path; "[vdso]" for the vDSO */
  const char *basename; /* points into path */
  uintptr_t bias;       /* runtime address = ELF vaddr + bias */
  uintptr_t start, end; /* runtime [start, end) covering the executable PT_LOADs */
  const void *image;    /* in-memory ELF image when there is no file (vDSO), else NULL */
  size_t image_size;
  uint8_t build_id[PERF__BUILD_ID_MAX];
  size_t build_id_len; /* 0 when the module has no GNU build-id note */
  bool executable;     /* the process's executable (its program headers at AT_PHDR) */
  /* The file at path when the map was built (all 0 when stat failed, and
     for the vDSO): what tells a library without a build-id rewritten at
     the same path from the one loaded before (modules.c's cache key). */
  uint64_t file_dev, file_ino, file_size;
  int64_t file_mtime_ns;
} perf__module_t;

typedef struct perf__module_map_s {
  perf__module_t *modules; /* sorted by start, non-overlapping */
  size_t count;
  unsigned long long adds, subs; /* dl_iterate_phdr counters when built */
} perf__module_map_t;

/* Build a fresh map of the loaded modules. *out is freed with
   perf__module_map_free(). Returns 0 or a negative perf_error_t. */
int perf__module_map_build(perf__module_map_t **out);

/* True when modules were loaded or unloaded since `map` was built. Cheap: it
   reads the dynamic loader's counters, it does not walk the module list. */
bool perf__module_map_is_stale(const perf__module_map_t *map);

/* The module whose executable range holds `pc`, or NULL. A pure binary
   search over the immutable map: async-signal-safe (the sampler's handler
   uses it). */
const perf__module_t *perf__module_map_find(const perf__module_map_t *map, uintptr_t pc);

void perf__module_map_free(perf__module_map_t *map);

#endif
