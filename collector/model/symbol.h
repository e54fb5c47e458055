/*
 * symbol.h - what a lookup names at one address: the inline chain,
 * innermost first, each function with its demangled and linkage names and
 * its file:line (collector/symbols/symbolize.h fills it from debug files;
 * frame_json.h writes it into a stored frame).
 */
#ifndef PERF_COLLECTOR_SYMBOL_H
#define PERF_COLLECTOR_SYMBOL_H

#include <stddef.h>
#include <stdint.h>

#include "sdk/symbols/symbols.h" /* PERF__SYM_MAX_LINES */

/* The names and files of one lookup's chain share this many bytes; a
   deeper chain keeps its innermost lines and the physical function. */
#define SYMBOL_TEXT_MAX 4096

typedef struct symbol_line_s {
  const char *function;    /* demangled; never NULL */
  const char *system_name; /* the raw linkage name when it differs, else NULL */
  const char *file;        /* NULL when unknown */
  uint32_t line;           /* 0 when unknown */
} symbol_line_t;

/* lines[0] the innermost function (inlined when count > 1), lines[count -
   1] the physical one. The strings point into text. */
typedef struct symbol_s {
  symbol_line_t lines[PERF__SYM_MAX_LINES];
  size_t count;
  uint64_t offset; /* address - the physical function's start */
  char text[SYMBOL_TEXT_MAX];
} symbol_t;

#endif
