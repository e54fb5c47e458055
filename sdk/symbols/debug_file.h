/*
 * debug_file.h - where a module's separate debug file is, found where gdb
 * finds it: by GNU build-id (<dir>/.build-id/xx/rest.debug), then by the
 * module's .gnu_debuglink (next to the module, in its .debug/ folder, and
 * under <dir>/<the module's folder>/), <dir> being each of the caller's
 * debug_dirs (the collector's symbol store) and then /usr/lib/debug.
 * Any thread but the signal handler (it opens and reads files).
 */
#ifndef PERF_SYMBOLS_DEBUG_FILE_H
#define PERF_SYMBOLS_DEBUG_FILE_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PERF__SYM_SYSTEM_DEBUG_DIR "/usr/lib/debug"

/* Write the path of the debug file of the module at `path` (NULL for an
   in-memory image, which is then looked up by build-id only) into
   out[0..cap) and return true, or return false when there is none. elf is
   the module (its .gnu_debuglink is read; may be NULL). debug_dirs: a
   colon-separated list of directories searched before /usr/lib/debug, or
   NULL. A candidate is used only when it is a regular ELF file whose
   build-id is the module's; a debuglink candidate of a module without
   build-id must match the link's CRC-32 instead. *unsure (may be NULL) is
   set when a candidate was there but could not be read (an open failing
   otherwise than for its absence: no descriptor left, no memory; libelf
   refusing it): the answer may be another one later. */
bool perf__sym_find_debug_file(const char *path, Elf *elf, const uint8_t *build_id,
                               size_t build_id_len, const char *debug_dirs, char *out, size_t cap,
                               bool *unsure);

#endif
