/*
 * cross_batch_check.c - the host side of the cross-architecture batch
 * check (scripts/test_aarch64.sh): reads the batches another
 * architecture's build wrote (tests/cross/cross_batch_app.c, run under
 * qemu-user), decodes them with the wire library and names their frames
 * with the collector's symbolizer (collector/symbols/symbolize.c, what ingest
 * uses) from the target's own ELF file, installed under a symbols
 * directory by its build-id as a CI upload would. Checks: Resource.arch is
 * the expected one, and a frame of the program gets the name
 * cross_batch_marker. Usage:
 *   cross_batch_check ARCH SPOOL_DIR PROGRAM SYMBOLS_DIR
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/symbols/symbol_files.h"
#include "collector/symbols/symbolize.h"
#include "perf_sdk.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/spool.h"

#define MAX_BATCH (64u << 20)

static int g_failed;

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      g_failed = 1;                                                                                \
    }                                                                                              \
  } while (0)

static void hex(const uint8_t *b, size_t n, char *out) {
  for (size_t i = 0; i < n; i++)
    sprintf(out + 2 * i, "%02x", b[i]);
  out[2 * n] = '\0';
}

/* Install the program as the debug file of its build-id (a hard link or a
   copy at <dir>/.build-id/xx/rest.debug). */
static void install_debug_file(const char *dir, const char *id, const char *program) {
  char path[4096];
  if (!symbol_file_path(dir, id, path, sizeof path)) exit(2);
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\" && cp '%s' '%s'", path, program, path);
  if (system(cmd) != 0) {
    fprintf(stderr, "cannot install %s as %s\n", program, path);
    exit(2);
  }
}

/* One batch: its arch, and the names of the frames in the program. */
static void check_batch(const Perf__V1__Batch *bt, const char *arch, const char *program,
                        const char *symdir, symbolizer_t *sym, unsigned *named_marker,
                        unsigned *frames_named, unsigned *frames_in_program) {
  EXPECT(bt->resource && strcmp(bt->resource->arch, arch) == 0, "Resource.arch is %s, not %s",
         bt->resource ? bt->resource->arch : "(none)", arch);
  for (size_t s = 0; s < bt->n_stacks; s++) {
    const Perf__V1__Stack *st = bt->stacks[s];
    for (size_t k = 0; k < st->n_frames; k++) {
      uint32_t fi = st->frames[k];
      if (fi == 0 || fi > bt->n_frames) continue;
      const Perf__V1__Frame *f = bt->frames[fi - 1];
      if (f->module == 0 || f->module > bt->n_modules) continue;
      const Perf__V1__Module *m = bt->modules[f->module - 1];
      const char *base = strrchr(program, '/');
      base = base ? base + 1 : program;
      const char *mbase = strrchr(m->path, '/');
      mbase = mbase ? mbase + 1 : m->path;
      if (strcmp(mbase, base) != 0 || m->build_id.len == 0) continue;
      (*frames_in_program)++;
      char id[2 * 64 + 1];
      hex(m->build_id.data, m->build_id.len < 64 ? m->build_id.len : 64, id);
      install_debug_file(symdir, id, program);
      symbol_t out;
      uint64_t addr = k == 0 ? f->address : f->address - 1;
      if (symbolizer_lookup(sym, id, addr, &out) != SYMBOLIZE_FOUND) continue;
      (*frames_named)++;
      const char *fn = out.lines[out.count - 1].function;
      printf("  frame %zu: %s+%#llx %s\n", k, mbase, (unsigned long long)f->address, fn);
      if (strcmp(fn, "cross_batch_marker") == 0) (*named_marker)++;
    }
  }
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: cross_batch_check ARCH SPOOL_DIR PROGRAM SYMBOLS_DIR\n");
    return 2;
  }
  const char *arch = argv[1], *spool = argv[2], *program = argv[3], *symdir = argv[4];
  symbolizer_t *sym = symbolizer_new(symdir, 16);
  if (!sym) return 2;
  DIR *d = opendir(spool);
  if (!d) {
    perror(spool);
    return 2;
  }
  unsigned batches = 0, marker = 0, named = 0, in_program = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 6 || strcmp(e->d_name + n - 6, ".batch") != 0) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", spool, e->d_name);
    uint8_t *payload;
    size_t len;
    const char *reason = NULL;
    int err = perf__spool_read_file(path, NULL, NULL, &payload, &len, &reason);
    EXPECT(err == PERF_OK, "%s: %s (%s)", path, perf_strerror(err), reason ? reason : "");
    if (err != PERF_OK) continue;
    Perf__V1__Batch *bt = NULL;
    err = perf__batch_decode_stored(payload, len, MAX_BATCH, &bt);
    EXPECT(err == PERF_OK, "%s: not a batch: %s", path, perf_strerror(err));
    if (err == PERF_OK) {
      batches++;
      check_batch(bt, arch, program, symdir, sym, &marker, &named, &in_program);
      perf__v1__batch__free_unpacked(bt, NULL);
    }
    free(payload);
  }
  closedir(d);
  symbolizer_free(sym);
  printf("cross batch: %u batches (arch %s), %u frames in %s, %u named by the collector's "
         "symbolizer, cross_batch_marker named %u times\n",
         batches, arch, in_program, program, named, marker);
  EXPECT(batches >= 1, "no batch in %s", spool);
  EXPECT(marker >= 1, "no frame named cross_batch_marker");
  return g_failed;
}
