/*
 * build_id.h - the GNU build-id of an ELF file (libdwelf), as the collector
 * names uploaded debug files. For the programs that link libelf and libdw
 * (tests/collector/symbols/test_collector_symbols.c, test_perf_symbols.c).
 */
#ifndef PERF_TEST_BUILD_ID_H
#define PERF_TEST_BUILD_ID_H

#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdio.h>
#include <unistd.h>

#include "check.h"

/* The GNU build-id of the ELF file at path, as lowercase hex. */
static inline void build_id_of(const char *path, char hex[81]) {
  elf_version(EV_CURRENT);
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
  CHECK(elf != NULL);
  const void *id;
  ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
  CHECKF(n > 0 && n <= 40, "%s: no build-id", path);
  for (ssize_t i = 0; i < n; i++)
    sprintf(hex + 2 * i, "%02x", ((const unsigned char *)id)[i]);
  elf_end(elf);
  close(fd);
}

#endif
