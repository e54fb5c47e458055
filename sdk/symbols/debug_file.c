/*
 * debug_file.c - finding a module's separate debug file (see debug_file.h).
 * The order is gdb's: build-id first (it names the exact build), then the
 * debuglink name, which only says what the file was called, so the file it
 * finds must prove it belongs to the module (same build-id, or the link's
 * CRC-32). Runs on whichever thread opens a module (the SDK's writer, a
 * text API caller, the collector's ingest); nothing here keeps state.
 */
#include "sdk/symbols/debug_file.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define BUILD_ID_MAX 64        /* longer ids are never looked up */
#define CRC_CHUNK (256u << 10) /* read size while checking a debuglink CRC */

/* What a candidate file must match. */
typedef struct want_s {
  const uint8_t *build_id;
  size_t build_id_len;
  bool check_crc; /* a debuglink candidate: the CRC proves it when ids cannot */
  uint32_t crc;
  dev_t module_dev; /* the module itself is never its own debug file */
  ino_t module_ino;
} want_t;

/* One search: the name to find under each root, and where the answer goes. */
typedef struct search_s {
  want_t *want;
  const char *hex_id; /* build-id search: "xx/rest" */
  const char *dir;    /* debuglink search: the module's folder */
  const char *link;   /* debuglink search: the link's file name */
  char *out;
  size_t cap;
  bool unsure; /* a candidate was there but could not be read */
} search_t;

typedef bool (*root_fn)(const char *root, search_t *s);

static bool each_root(const char *debug_dirs, root_fn fn, search_t *s);
static bool by_build_id(const char *root, search_t *s);
static bool by_debuglink(const char *root, search_t *s);
static bool next_to_module(search_t *s);
static bool candidate_ok(search_t *s);
static bool search(const char *path, Elf *elf, const char *debug_dirs, search_t *s);

bool perf__sym_find_debug_file(const char *path, Elf *elf, const uint8_t *build_id,
                               size_t build_id_len, const char *debug_dirs, char *out, size_t cap,
                               bool *unsure) {
  want_t want = {build_id, build_id_len, false, 0, 0, 0};
  search_t s = {&want, NULL, NULL, NULL, out, cap, false};
  bool found = search(path, elf, debug_dirs, &s);
  if (unsure) *unsure = !found && s.unsure;
  return found;
}

/* By build-id, then by debuglink (what to find is s->want). */
static bool search(const char *path, Elf *elf, const char *debug_dirs, search_t *s) {
  want_t *w = s->want;
  const uint8_t *build_id = w->build_id;
  size_t build_id_len = w->build_id_len;
  struct stat st;
  if (path && stat(path, &st) == 0) {
    w->module_dev = st.st_dev;
    w->module_ino = st.st_ino;
  }
  char hex[2 * BUILD_ID_MAX + 2];
  if (build_id && build_id_len >= 2 && build_id_len <= BUILD_ID_MAX) {
    static const char digits[] = "0123456789abcdef";
    char *p = hex;
    for (size_t i = 0; i < build_id_len; i++) {
      *p++ = digits[build_id[i] >> 4];
      *p++ = digits[build_id[i] & 0xf];
      if (i == 0) *p++ = '/';
    }
    *p = '\0';
    s->hex_id = hex;
    if (each_root(debug_dirs, by_build_id, s)) return true;
  }
  GElf_Word crc = 0;
  const char *link = elf && path ? dwelf_elf_gnu_debuglink(elf, &crc) : NULL;
  const char *slash = path ? strrchr(path, '/') : NULL;
  if (!link || !*link || strchr(link, '/') || !slash) return false;
  char dir[PATH_MAX];
  size_t dir_len = (size_t)(slash - path);
  if (dir_len >= sizeof dir) return false;
  memcpy(dir, path, dir_len);
  dir[dir_len] = '\0';
  w->check_crc = true;
  w->crc = crc;
  s->dir = dir;
  s->link = link;
  return next_to_module(s) || each_root(debug_dirs, by_debuglink, s);
}

/* fn for each directory of debug_dirs, then for /usr/lib/debug; true at
   the first fn that finds the file. */
static bool each_root(const char *debug_dirs, root_fn fn, search_t *s) {
  for (const char *p = debug_dirs; p && *p;) {
    size_t n = strcspn(p, ":");
    if (n > 0 && n < PATH_MAX) {
      char root[PATH_MAX];
      memcpy(root, p, n);
      root[n] = '\0';
      if (fn(root, s)) return true;
    }
    p += n;
    if (*p == ':') p++;
  }
  return fn(PERF__SYM_SYSTEM_DEBUG_DIR, s);
}

/* Write the formatted path into s->out and check it. */
static bool try_path(search_t *s, const char *fmt, const char *a, const char *b, const char *c) {
  int n = snprintf(s->out, s->cap, fmt, a, b, c);
  return n > 0 && (size_t)n < s->cap && candidate_ok(s);
}

static bool by_build_id(const char *root, search_t *s) {
  return try_path(s, "%s/.build-id/%s%s.debug", root, s->hex_id, "");
}

/* <root>/<the module's folder>/<link>, as /usr/lib/debug/usr/lib/x/libfoo.so.debug. */
static bool by_debuglink(const char *root, search_t *s) {
  return try_path(s, "%s%s/%s", root, s->dir, s->link);
}

static bool next_to_module(search_t *s) {
  return try_path(s, "%s/%s%s", s->dir, s->link, "") ||
         try_path(s, "%s/.debug/%s%s", s->dir, s->link, "");
}

static bool crc_matches(int fd, uint32_t want) {
  unsigned char *buf = malloc(CRC_CHUNK);
  if (!buf) return false;
  uLong crc = crc32(0L, Z_NULL, 0);
  off_t off = 0;
  ssize_t n;
  while ((n = pread(fd, buf, CRC_CHUNK, off)) > 0) {
    crc = crc32(crc, buf, (uInt)n);
    off += n;
  }
  free(buf);
  return n == 0 && (uint32_t)crc == want;
}

/* A regular ELF file, not the module itself, whose build-id is the
   module's; or, when the ids cannot tell (one of them has none), a
   debuglink candidate whose CRC-32 is the link's (s->out). */
static bool candidate_ok(search_t *s) {
  const want_t *w = s->want;
  int fd = open(s->out, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    s->unsure |= errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG;
    return false;
  }
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            !(st.st_dev == w->module_dev && st.st_ino == w->module_ino);
  Elf *elf = ok ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
  s->unsure |= ok && !elf;
  ok = elf && elf_kind(elf) == ELF_K_ELF;
  if (ok) {
    const void *id = NULL;
    ssize_t len = dwelf_elf_gnu_build_id(elf, &id);
    if (len > 0 && w->build_id_len > 0)
      ok = (size_t)len == w->build_id_len && memcmp(id, w->build_id, w->build_id_len) == 0;
    else
      ok = w->check_crc && crc_matches(fd, w->crc);
  }
  if (elf) elf_end(elf);
  close(fd);
  return ok;
}
