/*
 * symbol_files.c - debug files by build-id on disk (see symbol_files.h).
 * libelf reads the file, libdwelf (elfutils) finds its GNU build-id note.
 */
#include "collector/symbols/symbol_files.h"

#include <dirent.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool hex_digit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool symbol_id_parse(const char *text, size_t len, char out[SYMBOL_ID_MAX_HEX + 1]) {
  if (len < SYMBOL_ID_MIN_HEX || len > SYMBOL_ID_MAX_HEX || len % 2) return false;
  for (size_t i = 0; i < len; i++) {
    if (!hex_digit(text[i])) return false;
    out[i] = (char)(text[i] >= 'A' && text[i] <= 'F' ? text[i] - 'A' + 'a' : text[i]);
  }
  out[len] = '\0';
  return true;
}

bool symbol_file_path(const char *dir, const char *id, char *out, size_t size) {
  int n = snprintf(out, size, "%s/.build-id/%.2s/%s.debug", dir, id, id + 2);
  return n > 0 && (size_t)n < size;
}

/* mkdir -p of path's parent directories up to (not including) its last part. */
static int make_parents(const char *path) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return 0;
}

int symbol_file_temp(const char *dir, char *path, size_t size) {
  int n = snprintf(path, size, "%s/.build-id/.incoming-XXXXXX", dir);
  if (n < 0 || (size_t)n >= size) return errno = ENAMETOOLONG, -1;
  if (make_parents(path) != 0) return -1;
  int fd = mkstemp(path);
  if (fd >= 0) fchmod(fd, 0644);
  return fd;
}

static void hex_of(const unsigned char *bytes, size_t n, char *out) {
  static const char DIGITS[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = DIGITS[bytes[i] >> 4];
    out[2 * i + 1] = DIGITS[bytes[i] & 15];
  }
  out[2 * n] = '\0';
}

/* 0 when fd is an ELF file whose GNU build-id is id; else the reason. */
static int check_elf(int fd, const char *id, char *reason, size_t size) {
  elf_version(EV_CURRENT);
  Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
  int rc = -1;
  const void *note = NULL;
  ssize_t n;
  if (!elf || elf_kind(elf) != ELF_K_ELF)
    snprintf(reason, size, "not an ELF file");
  else if ((n = dwelf_elf_gnu_build_id(elf, &note)) <= 0)
    snprintf(reason, size, "the ELF file has no GNU build-id note");
  else if ((size_t)n * 2 > SYMBOL_ID_MAX_HEX)
    snprintf(reason, size, "the ELF file's build-id is longer than %d hex digits",
             SYMBOL_ID_MAX_HEX);
  else {
    char found[SYMBOL_ID_MAX_HEX + 1];
    hex_of(note, (size_t)n, found);
    if (strcmp(found, id) == 0)
      rc = 0;
    else
      snprintf(reason, size, "build-id mismatch: the ELF file's is %s, the URL's %s", found, id);
  }
  if (elf) elf_end(elf);
  return rc;
}

/* True when the files at a and b (open as fd_a) hold the same bytes. */
static bool same_bytes(int fd_a, const char *b) {
  int fd_b = open(b, O_RDONLY | O_CLOEXEC);
  struct stat sa, sb;
  bool same = fd_b >= 0 && fstat(fd_a, &sa) == 0 && fstat(fd_b, &sb) == 0 &&
              sa.st_size == sb.st_size && lseek(fd_a, 0, SEEK_SET) == 0;
  enum { CHUNK = 65536 };
  char *buf_a = same ? malloc(2 * CHUNK) : NULL, *buf_b = buf_a ? buf_a + CHUNK : NULL;
  same = same && buf_a;
  while (same) {
    ssize_t na = read(fd_a, buf_a, CHUNK);
    if (na <= 0) {
      same = na == 0;
      break;
    }
    ssize_t nb = read(fd_b, buf_b, (size_t)na);
    same = nb == na && memcmp(buf_a, buf_b, (size_t)na) == 0;
  }
  free(buf_a);
  if (fd_b >= 0) close(fd_b);
  return same;
}

static int fsync_dir_of(const char *path) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash) return 0;
  *slash = '\0';
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  close(fd);
  return rc;
}

/* id's stored file replaced by tmp_path's (fd): renamed over it. */
static unsigned replace_file(int fd, const char *tmp_path, const char *path, char *reason,
                             size_t reason_size) {
  if (fsync(fd) != 0 || rename(tmp_path, path) != 0) {
    snprintf(reason, reason_size, "cannot replace the stored file: %s", strerror(errno));
    return 500;
  }
  fsync_dir_of(path);
  return 200;
}

unsigned symbol_file_install(const char *dir, const char *id, int fd, const char *tmp_path,
                             symbol_install_mode_t mode, bool *replaced, char *reason,
                             size_t reason_size) {
  char path[4096];
  unsigned status = 500;
  struct stat st;
  *replaced = false;
  if (!symbol_file_path(dir, id, path, sizeof path))
    snprintf(reason, reason_size, "symbols path too long");
  else if (check_elf(fd, id, reason, reason_size) != 0)
    status = 400;
  else if (same_bytes(fd, path))
    status = 200;
  else if (mode == SYMBOL_REPLACE && lstat(path, &st) == 0 && S_ISREG(st.st_mode))
    *replaced = (status = replace_file(fd, tmp_path, path, reason, reason_size)) == 200;
  else if (lstat(path, &st) == 0 || errno != ENOENT)
    status = 409, snprintf(reason, reason_size,
                           "a different debug file is stored for build-id %s already; a build-id's "
                           "debug file never changes unless replaced on purpose: POST "
                           "/v1/symbols/%s?replace=1",
                           id, id);
  /* link(), not rename(): an upload of the same id that got here first is
     never replaced (EEXIST), so the check above cannot race. */
  else if (fsync(fd) != 0 || make_parents(path) != 0 || link(tmp_path, path) != 0)
    status = errno == EEXIST ? 409 : 500,
    snprintf(reason, reason_size,
             errno == EEXIST ? "a debug file for this build-id was stored meanwhile"
                             : "cannot store the file: %s",
             strerror(errno));
  else
    status = 201, fsync_dir_of(path);
  unlink(tmp_path); /* renamed away already after a replacement: ENOENT */
  return status;
}

/* Bytes of the regular files in dir (not descending). */
static uint64_t files_bytes(int dir_fd, DIR *d, int depth) {
  uint64_t total = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
    struct stat st;
    if (fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) total += (uint64_t)st.st_size;
    if (!S_ISDIR(st.st_mode) || depth == 0) continue;
    int sub = openat(dir_fd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *sd = sub >= 0 ? fdopendir(sub) : NULL;
    if (sd)
      total += files_bytes(sub, sd, depth - 1), closedir(sd);
    else if (sub >= 0)
      close(sub);
  }
  return total;
}

uint64_t symbol_files_bytes(const char *dir) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/.build-id", dir) >= (int)sizeof path) return 0;
  DIR *d = opendir(path);
  if (!d) return 0;
  uint64_t total = files_bytes(dirfd(d), d, 1); /* .build-id/xx/rest.debug: one level down */
  closedir(d);
  return total;
}
