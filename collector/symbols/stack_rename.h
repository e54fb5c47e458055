/*
 * stack_rename.h - the store's re-symbolization callbacks (store_renamer_t)
 * over stored frames JSON: name again every frame a local debug file names
 * now (its inline chain, names and lines replace what the frame had, named
 * by the device or not), and recompute signatures and hang groups exactly as ingest.c makes them
 * (signature.h), so a stack symbolized late groups with the same stack that
 * arrived named. Stateless apart from the symbolizer; any thread.
 */
#ifndef PERF_COLLECTOR_STACK_RENAME_H
#define PERF_COLLECTOR_STACK_RENAME_H

#include "collector/store/store.h"
#include "collector/symbols/symbolize.h"

store_renamer_t stack_renamer(symbolizer_t *symbols);

#endif
