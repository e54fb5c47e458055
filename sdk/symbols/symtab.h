/*
 * symtab.h - function symbols of one ELF module, for naming frames (the
 * physical function of a frame; symbols.c adds the inline chain).
 *
 * Reads every table the module has, as gdb's minimal symbols: .symtab (so
 * static functions are named), or when the file has none the .symtab of
 * its separate debug file (found by debug_file.c: build-id, debuglink;
 * e.g. libc6-dbg); .dynsym; and its PLT stubs (plt.h: clock_gettime@plt).
 * The table is sorted once and looked up by binary search. Built and used
 * off the signal handler only.
 */
#ifndef PERF_SYMBOLS_SYMTAB_H
#define PERF_SYMBOLS_SYMTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct perf__symtab_s perf__symtab_t;

/* Load the function symbols of the ELF file at `path`, or of the in-memory
   image [image, image + image_size) when image is non-NULL (the vDSO).
   debug_path (may be NULL) is the module's separate debug file, read when
   the module itself has no .symtab (its .dynsym and PLT are read from the
   module). *out is freed with perf__symtab_free().
   Returns 0 or a negative perf_error_t (a file without symbols is not an
   error: it yields an empty table). */
int perf__symtab_load(const char *path, const void *image, size_t image_size,
                      const char *debug_path, perf__symtab_t **out);

/* Find the function containing ELF virtual address `vaddr` (runtime address
   minus load bias). On success sets *name (owned by the table, valid until
   perf__symtab_free) and *offset (vaddr - symbol start) and returns true. */
bool perf__symtab_lookup(const perf__symtab_t *tab, uint64_t vaddr, const char **name,
                         uint64_t *offset);

/* Number of function symbols held (for tests). */
size_t perf__symtab_count(const perf__symtab_t *tab);

/* Heap bytes the table holds (for the symbolizer's figures). */
size_t perf__symtab_bytes(const perf__symtab_t *tab);

void perf__symtab_free(perf__symtab_t *tab);

#endif
