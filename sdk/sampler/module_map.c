/*
 * module_map.c - snapshot of the loaded ELF modules (see module_map.h).
 *
 * Runs on the thread that requests a capture or symbolization, never in the
 * signal handler (dl_iterate_phdr takes the loader lock).
 */
#include "sdk/sampler/module_map.h"

#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/proc_files.h"

typedef struct {
  perf__module_t *modules;
  size_t count, cap;
  unsigned long long adds, subs;
  int error;
} build_ctx_t;

static int add_module(struct dl_phdr_info *info, size_t size, void *arg);
static int read_counters(struct dl_phdr_info *info, size_t size, void *arg);
static void read_build_id(const struct dl_phdr_info *info, perf__module_t *m);
static void read_file_identity(perf__module_t *m);
static int compare_start(const void *a, const void *b);
static char *module_path(const struct dl_phdr_info *info);

int perf__module_map_build(perf__module_map_t **out) {
  if (!out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  perf__module_map_t *map = calloc(1, sizeof *map);
  if (!map) return PERF_E_NO_MEMORY;
  build_ctx_t ctx = {0};
  dl_iterate_phdr(add_module, &ctx);
  map->modules = ctx.modules;
  map->count = ctx.count;
  if (ctx.error) {
    perf__module_map_free(map);
    return ctx.error;
  }
  qsort(map->modules, map->count, sizeof *map->modules, compare_start);
  map->adds = ctx.adds;
  map->subs = ctx.subs;
  *out = map;
  return PERF_OK;
}

bool perf__module_map_is_stale(const perf__module_map_t *map) {
  build_ctx_t ctx = {0};
  dl_iterate_phdr(read_counters, &ctx);
  return ctx.adds != map->adds || ctx.subs != map->subs;
}

const perf__module_t *perf__module_map_find(const perf__module_map_t *map, uintptr_t pc) {
  size_t lo = 0, hi = map->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const perf__module_t *m = &map->modules[mid];
    if (pc < m->start)
      hi = mid;
    else if (pc >= m->end)
      lo = mid + 1;
    else
      return m;
  }
  return NULL;
}

void perf__module_map_free(perf__module_map_t *map) {
  if (!map) return;
  for (size_t i = 0; i < map->count; i++)
    free(map->modules[i].path);
  free(map->modules);
  free(map);
}

static int read_counters(struct dl_phdr_info *info, size_t size, void *arg) {
  build_ctx_t *ctx = arg;
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    ctx->adds = info->dlpi_adds;
    ctx->subs = info->dlpi_subs;
  }
  return 1; /* the counters are the same in every entry: stop after the first */
}

static int add_module(struct dl_phdr_info *info, size_t size, void *arg) {
  build_ctx_t *ctx = arg;
  read_counters(info, size, ctx);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t s = info->dlpi_addr + ph->p_vaddr;
    if (s < lo) lo = s;
    if (s + ph->p_memsz > hi) hi = s + ph->p_memsz;
  }
  if (lo >= hi) return 0; /* no code: nothing to unwind or name */
  if (ctx->count == ctx->cap) {
    size_t cap = ctx->cap ? ctx->cap * 2 : 32;
    perf__module_t *grown = realloc(ctx->modules, cap * sizeof *grown);
    if (!grown) {
      ctx->error = PERF_E_NO_MEMORY;
      return 1;
    }
    ctx->modules = grown;
    ctx->cap = cap;
  }
  perf__module_t *m = &ctx->modules[ctx->count];
  memset(m, 0, sizeof *m);
  m->path = module_path(info);
  if (!m->path) {
    ctx->error = PERF_E_NO_MEMORY;
    return 1;
  }
  ctx->count++;
  const char *slash = strrchr(m->path, '/');
  m->basename = slash ? slash + 1 : m->path;
  m->bias = info->dlpi_addr;
  /* The program's own headers are where the kernel said (AT_PHDR), also
     when it was started through an explicit ld.so. */
  m->executable = (uintptr_t)info->dlpi_phdr == (uintptr_t)getauxval(AT_PHDR);
  m->start = lo;
  m->end = hi;
  if (strcmp(m->path, "[vdso]") == 0) {
    /* The vDSO has no file: its ELF image is mapped at AT_SYSINFO_EHDR and
       its one PT_LOAD covers the whole image. */
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)getauxval(AT_SYSINFO_EHDR);
    m->image = eh;
    for (int i = 0; i < info->dlpi_phnum; i++)
      if (info->dlpi_phdr[i].p_type == PT_LOAD)
        m->image_size = info->dlpi_phdr[i].p_offset + info->dlpi_phdr[i].p_filesz;
    /* The section headers (needed for .symtab-style lookups) sit past the
       PT_LOAD's file size but inside the mapped image. */
    size_t sh_end = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
    if (sh_end > m->image_size && sh_end <= 65536) m->image_size = sh_end;
  }
  read_build_id(info, m);
  read_file_identity(m);
  return 0;
}

static void read_file_identity(perf__module_t *m) {
  struct stat st;
  if (m->image) return;
  if (stat(m->path, &st) != 0) { /* after a chroot: the mapped file itself */
    int fd = perf__mapped_file_open(m->path, O_RDONLY);
    bool known = fd >= 0 && fstat(fd, &st) == 0;
    if (fd >= 0) close(fd);
    if (!known) return;
  }
  m->file_dev = (uint64_t)st.st_dev;
  m->file_ino = (uint64_t)st.st_ino;
  m->file_size = (uint64_t)st.st_size;
  m->file_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* The address of the module's first PT_LOAD segment (its load bias when
   it has none). */
static uintptr_t first_load(const struct dl_phdr_info *info) {
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_LOAD) return info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
  return info->dlpi_addr;
}

static char *module_path(const struct dl_phdr_info *info) {
  /* The vDSO's program headers live inside its image at AT_SYSINFO_EHDR;
     its reported name ("linux-vdso.so.1", or empty) is not a file. */
  uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
  if (vdso && (uintptr_t)info->dlpi_phdr - vdso < 4096) return strdup("[vdso]");
  const char *name = info->dlpi_name;
  if (name && name[0]) {
    char resolved[PATH_MAX];
    /* After a chroot the name may not resolve from this root: the kernel's
       name of the file mapped at the module's first segment instead (not
       otherwise: a file renamed or deleted since it was loaded stays
       unreadable under its name). */
    if (realpath(name, resolved) ||
        (perf__root_changed() &&
         perf__mapped_file_path(first_load(info), resolved, sizeof resolved) == 0))
      return strdup(resolved);
    return strdup(name);
  }
  char exe[PATH_MAX];
  ssize_t n = perf__proc_readlink("self/exe", exe, sizeof exe - 1);
  if (n <= 0) return strdup("/proc/self/exe");
  exe[n] = '\0';
  return strdup(exe);
}

static void read_build_id(const struct dl_phdr_info *info, perf__module_t *m) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
    const char *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
      const char *name = p + sizeof *nh;
      const uint8_t *desc = (const uint8_t *)name + ((nh->n_namesz + 3) & ~3u);
      const char *next = (const char *)desc + ((nh->n_descsz + 3) & ~3u);
      if (next > end) break;
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
          nh->n_descsz <= PERF__BUILD_ID_MAX) {
        memcpy(m->build_id, desc, nh->n_descsz);
        m->build_id_len = nh->n_descsz;
        return;
      }
      p = next;
    }
  }
}

static int compare_start(const void *a, const void *b) {
  const perf__module_t *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}
