/*
 * idle_memory.h - what the writer gives back when it goes idle: the DWARF
 * read to name frames, then the free pages glibc's malloc keeps resident.
 * Writer thread only.
 */
#ifndef PERF_PIPELINE_IDLE_MEMORY_H
#define PERF_PIPELINE_IDLE_MEMORY_H

#include <stdbool.h>

/* Close every module's DWARF (perf__symbols_drop_dwarf), give back the
   calling thread's stack pages below the frames in use, then, when the
   process is small enough for it to be cheap and the last one was cheap,
   malloc_trim(0). true when the trim ran. */
bool perf__release_idle_memory(void);

#endif
