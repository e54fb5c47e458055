/*
 * run_target.c - perf-run's checks of the program to start (see
 * run_target.h): where it is, and whether the loader will honour
 * LD_PRELOAD for it. Reads the file's ELF header and program headers
 * (32- and 64-bit, either byte order of this machine's).
 */
#include "run_target.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAX_PHDRS 4096

static int elf_has_interp(int fd, char *why, size_t why_size);
static int read_at(int fd, void *buf, size_t n, off_t off);

int perf__run_find(const char *program, char *out, size_t out_size, char *why, size_t why_size) {
  if (strchr(program, '/')) {
    if ((size_t)snprintf(out, out_size, "%s", program) >= out_size) {
      snprintf(why, why_size, "path too long");
      return -1;
    }
    return 0;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *p = path;; p++) {
    size_t len = strcspn(p, ":");
    /* An empty entry is the current directory, as execvp reads it. */
    int n = len ? snprintf(out, out_size, "%.*s/%s", (int)len, p, program)
                : snprintf(out, out_size, "./%s", program);
    struct stat st;
    if (n > 0 && (size_t)n < out_size && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
        access(out, X_OK) == 0)
      return 0;
    p += len;
    if (!*p) break;
  }
  snprintf(why, why_size, "not found in PATH");
  return -1;
}

int perf__run_check(const char *path, char *why, size_t why_size) {
  struct stat st;
  if (stat(path, &st) != 0) {
    snprintf(why, why_size, "%s", strerror(errno));
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    snprintf(why, why_size, "not a regular file");
    return -1;
  }
  if (st.st_mode & (S_ISUID | S_ISGID)) {
    snprintf(why, why_size,
             "is %s: the dynamic loader ignores LD_PRELOAD for it, so the SDK cannot be loaded",
             (st.st_mode & S_ISUID) ? "setuid" : "setgid");
    return -1;
  }
  if (getxattr(path, "security.capability", NULL, 0) > 0) {
    snprintf(why, why_size,
             "has file capabilities: the dynamic loader ignores LD_PRELOAD for it, so the SDK "
             "cannot be loaded");
    return -1;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, why_size, "%s", strerror(errno));
    return -1;
  }
  unsigned char head[2] = {0};
  int err = 0;
  if (read_at(fd, head, sizeof head, 0) == 0 && head[0] == '#' && head[1] == '!')
    err = 0; /* a script: its interpreter is what the loader runs */
  else
    err = elf_has_interp(fd, why, why_size);
  close(fd);
  return err;
}

/* The file is an ELF program the dynamic loader starts (a PT_INTERP
   program header). A static program, static-pie included, has none: no
   loader reads LD_PRELOAD for it. */
static int elf_has_interp(int fd, char *why, size_t why_size) {
  Elf64_Ehdr eh;
  if (read_at(fd, &eh, sizeof eh, 0) != 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    snprintf(why, why_size, "not an ELF program or a script");
    return -1;
  }
  bool is64 = eh.e_ident[EI_CLASS] == ELFCLASS64;
  uint64_t phoff;
  unsigned phnum, phentsize;
  if (is64) {
    phoff = eh.e_phoff;
    phnum = eh.e_phnum;
    phentsize = eh.e_phentsize;
  } else {
    Elf32_Ehdr e32;
    memcpy(&e32, &eh, sizeof e32);
    phoff = e32.e_phoff;
    phnum = e32.e_phnum;
    phentsize = e32.e_phentsize;
  }
  size_t want = is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
  if (phnum == 0 || phnum > MAX_PHDRS || phentsize < want) {
    snprintf(why, why_size, "an ELF file without program headers (not a program)");
    return -1;
  }
  for (unsigned i = 0; i < phnum; i++) {
    Elf64_Phdr ph64;
    if (read_at(fd, &ph64, want, (off_t)(phoff + (uint64_t)i * phentsize)) != 0) {
      snprintf(why, why_size, "truncated ELF program headers");
      return -1;
    }
    if (ph64.p_type == PT_INTERP) return 0; /* p_type comes first in both classes */
  }
  snprintf(why, why_size,
           "is statically linked (no program interpreter): LD_PRELOAD is never read for it, so "
           "the SDK cannot be loaded; link the SDK into it instead (README.md, Quick start)");
  return -1;
}

static int read_at(int fd, void *buf, size_t n, off_t off) {
  ssize_t got = pread(fd, buf, n, off);
  return got == (ssize_t)n ? 0 : -1;
}
