/*
 * resymbolize.h - symbols that arrive after the events: renaming stored
 * stacks, and the background thread that looks for the debug files ingest
 * could not find.
 *
 * Ingest names frames from local debug files only and hands the build-ids
 * it found no file for to resymbolizer_want (a bounded pending list; the
 * least recently wanted id is dropped when it is full). The resymbolizer's
 * thread checks the symbols directory for them every couple of seconds (a
 * file copied there by hand, or uploaded), and when DEBUGINFOD_URLS is set
 * fetches them with libdebuginfod into the symbols directory (a failed
 * fetch is retried later with a growing delay: 30 s doubling up to 1 h, so
 * debuginfod is not asked once per batch). Once a file is there,
 * resymbolizer_apply renames every stored stack with frames of that
 * build-id (store_ops_t.resymbolize, one transaction).
 *
 * Threads: want and apply from any thread (MHD's workers); the
 * resymbolizer's own thread does the fetching.
 */
#ifndef PERF_COLLECTOR_RESYMBOLIZE_H
#define PERF_COLLECTOR_RESYMBOLIZE_H

#include <stdint.h>

#include "collector/store/store.h"
#include "collector/symbols/symbolize.h"

typedef struct resymbolizer_s resymbolizer_t;

/* Start the thread; everything passed must outlive the resymbolizer. NULL
   on failure. */
resymbolizer_t *resymbolizer_start(symbolizer_t *symbols, const store_ops_t *ops, store_t *store);

/* Stop (an ongoing fetch is cancelled) and join the thread. NULL: no-op. */
void resymbolizer_stop(resymbolizer_t *r);

/* A build-id (lowercase hex) ingest stored frames of without a debug file. */
void resymbolizer_want(resymbolizer_t *r, const char *id);

/* A debug file for id is now in the symbols directory: rename the stored
   stacks it names (*renamed: how many, may be NULL). STORE_OK or
   STORE_ERROR. */
int resymbolizer_apply(resymbolizer_t *r, const char *id, uint64_t *renamed);

#endif
