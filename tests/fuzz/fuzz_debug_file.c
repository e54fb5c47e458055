/*
 * fuzz_debug_file.c - libFuzzer target for a debug file as the collector
 * reads one: each input is the bytes of an uploaded file (an ELF file
 * with its symbol tables and DWARF, or anything), written to a temporary
 * file and opened with the SDK's symbolizer (perf__sym_module_open, as
 * collector/symbols/symbolize.c opens a build-id's file); every function
 * symbol of its .symtab (at most 64) is looked up at its start and one
 * byte in, and at a few fixed addresses, and each answer goes through what
 * the collector stores: frame_json_set_symbol, the stored text, the
 * labels.
 *
 * Invariants checked per input (a violation aborts, which libFuzzer
 * reports): an answer whose lines all have a function is set on the frame
 * (0), a refused one leaves the frame as it was; the frame serializes to
 * JSON and its labels are made, each UTF-8 text, whatever bytes the file's
 * names and paths hold. The sanitizers (address, undefined) check the
 * reading itself: a hostile file's bounds, null pointers, overflows.
 */
#include <fcntl.h>
#include <gelf.h>
#include <jansson.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/model/frame_json.h"
#include "perf_sdk.h"
#include "sdk/base/utf8.h"
#include "sdk/symbols/symbols.h"

#define MAX_FUNCTIONS 64

static char g_path[64];

#define REQUIRE(cond)                                                                              \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_debug_file: invariant failed: %s (line %d)\n", #cond, __LINE__);       \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static void remove_file(void) {
  unlink(g_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  snprintf(g_path, sizeof g_path, "/tmp/perf-fuzz-debug.%d", (int)getpid());
  atexit(remove_file);
  elf_version(EV_CURRENT);
  return 0;
}

static bool write_input(const uint8_t *data, size_t size) {
  int fd = open(g_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = true;
  for (size_t done = 0; ok && done < size;) {
    ssize_t n = write(fd, data + done, size - done);
    ok = n > 0;
    done += ok ? (size_t)n : 0;
  }
  close(fd);
  return ok;
}

/* The function symbols' addresses of the file's .symtab (libelf, which
   the symbolizer uses too), at most max; the count. */
static size_t function_addresses(uint64_t *out, size_t max) {
  int fd = open(g_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
  size_t n = 0;
  for (Elf_Scn *scn = NULL; elf && (scn = elf_nextscn(elf, scn)) != NULL && n < max;) {
    GElf_Shdr sh;
    Elf_Data *d;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize ||
        !(d = elf_getdata(scn, NULL)))
      continue;
    size_t count = d->d_size / sh.sh_entsize;
    for (size_t i = 0; i < count && n < max; i++) {
      GElf_Sym sym;
      if (gelf_getsym(d, (int)i, &sym) && GELF_ST_TYPE(sym.st_info) == STT_FUNC && sym.st_value)
        out[n++] = sym.st_value;
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return n;
}

/* The answer as the collector keeps it (symbolize.c: the physical
   function last); false when a line has no function. */
static bool to_symbol(const perf__sym_frame_t *f, symbol_t *out) {
  memset(out, 0, sizeof *out);
  size_t n = f->count < PERF__SYM_MAX_LINES ? f->count : PERF__SYM_MAX_LINES;
  bool whole = n > 0;
  for (size_t k = 0; k < n; k++) {
    const perf__sym_line_t *l = &f->lines[k];
    out->lines[k] = (symbol_line_t){l->function, l->linkage, l->file, l->file ? l->line : 0};
    whole &= l->function != NULL;
  }
  out->count = n;
  out->offset = f->offset;
  return whole;
}

static void check_stored(const perf__sym_frame_t *f) {
  symbol_t *sym = malloc(sizeof *sym);
  json_t *frame = json_pack("{s:s,s:s}", "module", "/fuzz/app", "address", "0x1000");
  REQUIRE(sym && frame);
  bool whole = to_symbol(f, sym);
  json_t *before = json_deep_copy(frame);
  int rc = frame_json_set_symbol(frame, sym, 1);
  REQUIRE(rc == 0 || !whole);
  REQUIRE(rc == 0 || json_equal(frame, before));
  char *text = json_dumps(frame, JSON_COMPACT);
  REQUIRE(text && perf__utf8_valid(text));
  json_t *frames = json_pack("[O]", frame);
  json_t *labels = frame_json_labels(frames);
  REQUIRE(labels);
  size_t i;
  json_t *l;
  json_array_foreach(labels, i, l) REQUIRE(perf__utf8_valid(json_string_value(l)));
  json_decref(labels);
  json_decref(frames);
  free(text);
  json_decref(before);
  json_decref(frame);
  free(sym);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!write_input(data, size)) return 0;
  perf__sym_module_t *m = NULL;
  if (perf__sym_module_open(g_path, NULL, 0, NULL, 0, NULL, &m) != PERF_OK || !m) return 0;
  uint64_t addrs[2 * MAX_FUNCTIONS + 4] = {0x1000, 0x1139, 0x401000, 0x10};
  size_t n = 4, k = function_addresses(addrs + n, MAX_FUNCTIONS);
  for (size_t i = 0; i < k; i++)
    addrs[n + k + i] = addrs[n + i] + 1;
  n += 2 * k;
  perf__sym_frame_t f;
  for (size_t i = 0; i < n; i++)
    if (perf__sym_lookup(m, addrs[i], &f)) check_stored(&f);
  perf__sym_module_free(m);
  return 0;
}
