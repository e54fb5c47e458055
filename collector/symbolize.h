/*
 * symbolize.h - names for module-relative addresses from debug files found
 * by GNU build-id under the symbols directory (symbol_files.h), read with
 * elfutils libdwfl: the function (the ELF symbol table, as the SDK names
 * frames on the device) and, where the file has DWARF line info, file:line.
 *
 * Local files only: a lookup never touches the network (ingest calls it on
 * MHD's workers); resymbolize.c fetches what is missing in the background.
 * A bounded cache keeps one libdwfl handle per build-id (least recently
 * used evicted) and remembers missing files for a few seconds. Thread-safe:
 * one mutex around the cache and libdwfl.
 */
#ifndef PERF_COLLECTOR_SYMBOLIZE_H
#define PERF_COLLECTOR_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct symbolizer_s symbolizer_t;

typedef struct symbol_s {
  char function[256];
  uint64_t offset; /* address - the function's start */
  char file[512];  /* "" when the debug file has no line info there */
  int line;        /* 0: unknown */
} symbol_t;

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

/* True when a usable debug file for id is in the symbols directory (it is
   opened and cached, as by a lookup). */
bool symbolizer_available(symbolizer_t *s, const char *id);

#endif
