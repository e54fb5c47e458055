/*
 * symbol_files.h - debug files on disk, found by GNU build-id in the layout
 * gdb, elfutils and debuginfod use: <dir>/.build-id/<xx>/<rest>.debug (xx:
 * the first byte of the id in hex, rest: the others). A file gets there
 * only through symbol_file_install: checked (an ELF file whose build-id
 * note is the id), then fsync'ed and renamed into place, so a reader never
 * sees half a file. Stateless; any thread.
 */
#ifndef PERF_COLLECTOR_SYMBOL_FILES_H
#define PERF_COLLECTOR_SYMBOL_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SYMBOL_ID_MIN_HEX 2
#define SYMBOL_ID_MAX_HEX 80 /* 40 bytes: more than any linker writes (sha1: 20) */

/* An even number of hex digits, SYMBOL_ID_MIN_HEX..SYMBOL_ID_MAX_HEX, into
   out (lowercase, NUL-terminated, SYMBOL_ID_MAX_HEX + 1 bytes); false
   otherwise. */
bool symbol_id_parse(const char *text, size_t len, char out[SYMBOL_ID_MAX_HEX + 1]);

/* The answer (400) to a URL's build-id symbol_id_parse refuses. */
#define SYMBOL_ID_BAD_TEXT "the build-id in the URL must be 2 to 80 hexadecimal digits (even)"

/* <dir>/.build-id/xx/rest.debug into out; false when it does not fit. */
bool symbol_file_path(const char *dir, const char *id, char *out, size_t size);

/* A new empty temporary file in <dir>/.build-id/ (made when missing), to
   fill and then hand to symbol_file_install; its path into path. -1 on
   failure (errno set). */
int symbol_file_temp(const char *dir, char *path, size_t size);

/* How an upload meets a file stored for its build-id already. */
typedef enum symbol_install_mode {
  SYMBOL_KEEP = 0, /* a build-id's file never changes: a different one is 409 */
  SYMBOL_REPLACE,  /* a different one replaces it (the stored file was wrong) */
} symbol_install_mode_t;

/* Check the file at tmp_path (open as fd) and move it into place for id.
   Returns 201 (installed where there was none), 200 (the same bytes were
   there already, or under SYMBOL_REPLACE a different file was replaced:
   *replaced says which), 400 (not an ELF file, no build-id note, or a
   different one: what is stored stays), 409 (SYMBOL_KEEP and a different
   file is stored for id) or 500 (I/O error); the reason in reason; tmp is
   removed in every case. A replacement is renamed over the stored file:
   a reader opens the old file or the new one, never a mix. */
unsigned symbol_file_install(const char *dir, const char *id, int fd, const char *tmp_path,
                             symbol_install_mode_t mode, bool *replaced, char *reason,
                             size_t reason_size);

/* Bytes of the files under <dir>/.build-id (the debug files and
   temporary uploads), for the quota; 0 when there is no such directory.
   The depth is the layout's (two levels), never the tree's. */
uint64_t symbol_files_bytes(const char *dir);

#endif
