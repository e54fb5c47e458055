/*
 * symbols_lookup.c - GET /v1/symbols/<build-id> (see symbols_lookup.h).
 */
#include "collector/symbols/symbols_lookup.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "collector/symbols/symbol_files.h"

unsigned symbols_lookup(const char *dir, const char *id_text, char *text, size_t size) {
  char id[SYMBOL_ID_MAX_HEX + 1], path[PATH_MAX];
  struct stat st;
  if (!symbol_id_parse(id_text, strlen(id_text), id)) {
    snprintf(text, size, "%s", SYMBOL_ID_BAD_TEXT);
    return 400;
  }
  if (!symbol_file_path(dir, id, path, sizeof path) || stat(path, &st) != 0 ||
      !S_ISREG(st.st_mode)) {
    snprintf(text, size, "no debug file for %s", id);
    return 404;
  }
  snprintf(text, size, "stored %s (%lld bytes)", id, (long long)st.st_size);
  return 200;
}
