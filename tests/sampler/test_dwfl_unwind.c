/*
 * test_dwfl_unwind.c - unit test of the PERF_UNWIND_STACK_COPY back end (dwfl_unwind.c).
 *
 * Without the sampler's signal machinery: the test captures its own registers with getcontext()
 * and copies the top of its own stack at the bottom of a chain of functions (chain_a -> chain_b
 * (static) -> chain_c -> capture_and_unwind), builds the module map itself with
 * dl_iterate_phdr, unwinds the copy and names the frames with a separate libdwfl session over
 * /proc/self/maps (which names static functions, unlike dladdr). Also covers a copy cut short,
 * truncation, an exact fit, a frame in the vDSO (with and without its section headers), several
 * threads sharing one unwinder, modules that cannot be used, bad arguments, fd leaks and the time
 * per call. Links with sdk/log.c; build at -O0 and -O2, with and without ASan+UBSan.
 */
#include <dirent.h>
#include <elf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "sdk/base/proc_files.h"
#include "sdk/sampler/arch.h"
#include "sdk/sampler/dwfl_unwind.h"

#if defined(__clang__)
#define TEST_NOIPA __attribute__((noinline, optnone))
#else
#define TEST_NOIPA __attribute__((noipa))
#endif

#define STACK_COPY_BYTES 32768u
#define MAX_FRAMES 64u

typedef struct snapshot_s {
  uint64_t regs[PERF__ARCH_MAX_DWARF_REGS];
  uintptr_t base;
  size_t len;
  unsigned char bytes[STACK_COPY_BYTES];
} snapshot_t;

static perf__dwfl_unwinder_t *g_unwinder;
static uintptr_t g_stack_top;
static snapshot_t g_snap;
static uintptr_t g_pcs[MAX_FRAMES];
static size_t g_count;
static int g_rc = 1;

static void build_map(perf__module_map_t *map);
static size_t vdso_image_size(const void *image);
static void free_map(perf__module_map_t *map);
static Dwfl *namer_begin(void);
static const char *frame_name(Dwfl *namer, uintptr_t pc, size_t index);
static void check_chain(Dwfl *namer);
static void check_short_and_truncated(void);
static void check_bad_arguments(void);
static void check_vdso_frame(perf__dwfl_unwinder_t *u, const perf__module_map_t *map);
static void check_vdso_without_section_headers(const perf__module_map_t *map);
static void check_threads(void);
static void check_unusable_modules(const perf__module_map_t *map);
static void check_empty_map(void);
static void time_unwinds(void);
static int count_fds(void);
int chain_a(int x);
int chain_c(int x);

TEST_NOIPA static void case_unwind(void) {
  pthread_attr_t attr;
  void *stack_addr;
  size_t stack_size;
  CHECK(pthread_getattr_np(pthread_self(), &attr) == 0);
  CHECK(pthread_attr_getstack(&attr, &stack_addr, &stack_size) == 0);
  pthread_attr_destroy(&attr);
  g_stack_top = (uintptr_t)stack_addr + stack_size;

  perf__proc_open(); /* kept open for the process's life (sdk/base/proc_files.h) */

  int fds_before = count_fds();
  perf__module_map_t map;
  build_map(&map);
  CHECK_EQ_INT(perf__dwfl_unwinder_create(&map, &g_unwinder), PERF_OK);
  CHECK(g_unwinder != NULL);

  volatile int sink = chain_a(1);
  (void)sink;
  CHECK_EQ_INT(g_rc, PERF_OK);

  Dwfl *namer = namer_begin();
  check_chain(namer);
  check_short_and_truncated();
  check_bad_arguments();
  check_vdso_frame(g_unwinder, &map);
  check_vdso_without_section_headers(&map);
  check_threads();
  time_unwinds();
  dwfl_end(namer);

  perf__dwfl_unwinder_free(g_unwinder);
  perf__dwfl_unwinder_free(NULL);
  check_empty_map();
  check_unusable_modules(&map);
  free_map(&map);
  CHECK_EQ_INT(count_fds(), fds_before);
}

/* ---- capturing our own state ------------------------------------------------------------- */

/* Reads our live stack, ASan redzones included, so it must not be instrumented; volatile loads
   keep the compiler from turning the loop into an (intercepted) memcpy call. */
__attribute__((no_sanitize_address)) TEST_NOIPA static void copy_stack(unsigned char *dst,
                                                                       uintptr_t src, size_t len) {
  const volatile unsigned char *s = (const volatile unsigned char *)src;
  for (size_t i = 0; i < len; i++)
    dst[i] = s[i];
}

/* The innermost frame: capture registers and the top of the stack the way the signal handler
   would, then unwind the copy right here. */
TEST_NOIPA static int capture_and_unwind(int x) {
  ucontext_t uc;
  if (getcontext(&uc) != 0) return -1000;
  perf__arch_context_dwarf_regs(&uc, g_snap.regs);
  uintptr_t sp = (uintptr_t)g_snap.regs[perf__arch.dwarf_sp];
  size_t len = g_stack_top - sp;
  if (len > sizeof g_snap.bytes) len = sizeof g_snap.bytes;
  copy_stack(g_snap.bytes, sp, len);
  g_snap.base = sp;
  g_snap.len = len;
  g_rc = perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, g_snap.bytes, g_snap.len, g_pcs,
                           MAX_FRAMES, &g_count, NULL);
  return g_rc + x;
}

/* Each link uses its callee's result, so none of the calls is a tail call. */
TEST_NOIPA int chain_c(int x) {
  int r = capture_and_unwind(x + 1);
  return r - 3;
}

TEST_NOIPA static int chain_b(int x) {
  int r = chain_c(x + 1);
  return r * 2;
}

TEST_NOIPA int chain_a(int x) {
  int r = chain_b(x + 1);
  return r + 5;
}

/* ---- the checks -------------------------------------------------------------------------- */

static void check_chain(Dwfl *namer) {
  CHECK(g_count >= 5);
  CHECK(g_pcs[0] == (uintptr_t)g_snap.regs[perf__arch.dwarf_pc]);
  fprintf(stderr, "unwound %zu frames:\n", g_count);
  for (size_t i = 0; i < g_count; i++) {
    const char *n = frame_name(namer, g_pcs[i], i);
    fprintf(stderr, "  #%zu %#lx %s\n", i, (unsigned long)g_pcs[i], n ? n : "?");
  }
  static const char *const k_expected[] = {"capture_and_unwind", "chain_c", "chain_b", "chain_a",
                                           "case_unwind"};
  for (size_t i = 0; i < sizeof k_expected / sizeof k_expected[0]; i++) {
    const char *n = frame_name(namer, g_pcs[i], i);
    CHECKF(n && strcmp(n, k_expected[i]) == 0, "frame %zu is %s, expected %s", i, n ? n : "?",
           k_expected[i]);
  }

  /* The session is reused: unwinding the same copy again gives the same frames. */
  uintptr_t again[MAX_FRAMES];
  size_t n = 0;
  CHECK_EQ_INT(perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, g_snap.bytes, g_snap.len,
                                 again, MAX_FRAMES, &n, NULL),
               PERF_OK);
  CHECK_EQ_INT(n, g_count);
  CHECK(memcmp(again, g_pcs, n * sizeof again[0]) == 0);
}

static void check_short_and_truncated(void) {
  uintptr_t pcs[MAX_FRAMES];
  size_t n = 99;

  /* Only 64 bytes: the frame of capture_and_unwind (with its ucontext_t) is larger, so the walk
     stops early without reading past the copy. */
  CHECK_EQ_INT(perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, g_snap.bytes, 64, pcs,
                                 MAX_FRAMES, &n, NULL),
               PERF_OK);
  CHECK(n >= 1 && n < g_count);
  CHECK(memcmp(pcs, g_pcs, n * sizeof pcs[0]) == 0);

  /* No stack at all: just the interrupted pc. */
  n = 99;
  CHECK_EQ_INT(
      perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, NULL, 0, pcs, MAX_FRAMES, &n, NULL),
      PERF_OK);
  CHECK_EQ_INT(n, 1);
  CHECK(pcs[0] == g_pcs[0]);

  /* The copy taken from a heap buffer elsewhere: addresses are the copy's, not the buffer's. */
  unsigned char *moved = malloc(g_snap.len);
  CHECK(moved != NULL);
  memcpy(moved, g_snap.bytes, g_snap.len);
  CHECK_EQ_INT(perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, moved, g_snap.len, pcs,
                                 MAX_FRAMES, &n, NULL),
               PERF_OK);
  CHECK_EQ_INT(n, g_count);
  free(moved);

  /* max = 2: the innermost two frames and PERF_E_TRUNCATED. */
  n = 99;
  CHECK_EQ_INT(perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, g_snap.bytes, g_snap.len,
                                 pcs, 2, &n, NULL),
               PERF_E_TRUNCATED);
  CHECK_EQ_INT(n, 2);
  CHECK(pcs[0] == g_pcs[0] && pcs[1] == g_pcs[1]);

  /* max = 1 */
  CHECK_EQ_INT(perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, g_snap.bytes, g_snap.len,
                                 pcs, 1, &n, NULL),
               PERF_E_TRUNCATED);
  CHECK_EQ_INT(n, 1);

  /* Exactly as many slots as frames is not truncation. */
  CHECK_EQ_INT(perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, g_snap.bytes, g_snap.len,
                                 pcs, g_count, &n, NULL),
               PERF_OK);
  CHECK_EQ_INT(n, g_count);
  CHECK(memcmp(pcs, g_pcs, n * sizeof pcs[0]) == 0);
}

static void check_bad_arguments(void) {
  uintptr_t pcs[4];
  size_t n = 7;
  CHECK_EQ_INT(
      perf__dwfl_unwind(NULL, g_snap.regs, g_snap.base, g_snap.bytes, g_snap.len, pcs, 4, &n, NULL),
      PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(n, 0);
  CHECK_EQ_INT(
      perf__dwfl_unwind(g_unwinder, NULL, g_snap.base, g_snap.bytes, g_snap.len, pcs, 4, &n, NULL),
      PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, g_snap.bytes, g_snap.len,
                                 NULL, 4, &n, NULL),
               PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, g_snap.bytes, g_snap.len,
                                 pcs, 0, &n, NULL),
               PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, NULL, 16, pcs, 4, &n, NULL),
               PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, g_snap.bytes, g_snap.len,
                                 pcs, 4, NULL, NULL),
               PERF_E_INVALID_ARGUMENT);
  perf__dwfl_unwinder_t *u = (perf__dwfl_unwinder_t *)&n;
  CHECK_EQ_INT(perf__dwfl_unwinder_create(NULL, &u), PERF_E_INVALID_ARGUMENT);
  CHECK(u == NULL);
  CHECK_EQ_INT(perf__dwfl_unwinder_create(NULL, NULL), PERF_E_INVALID_ARGUMENT);
}

/* Address of a dynamic symbol of the vDSO, read from the in-memory image with libelf. */
static uintptr_t vdso_symbol(const perf__module_t *vdso, const char *want) {
  size_t size = vdso_image_size(vdso->image); /* with the section headers, whatever the map says */
  char *copy = malloc(size);
  CHECK(copy != NULL);
  memcpy(copy, vdso->image, size);
  Elf *elf = elf_memory(copy, size);
  CHECK(elf != NULL);
  uintptr_t found = 0;
  for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn && !found; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM) continue;
    Elf_Data *data = elf_getdata(scn, NULL);
    for (size_t i = 0; data && sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++) {
      GElf_Sym sym;
      const char *name;
      if (gelf_getsym(data, (int)i, &sym) && sym.st_value &&
          (name = elf_strptr(elf, sh.sh_link, sym.st_name)) && strcmp(name, want) == 0) {
        found = vdso->bias + sym.st_value;
        break;
      }
    }
  }
  elf_end(elf);
  free(copy);
  return found;
}

/* A frame at the first instruction of a vDSO function, "called" from chain_c: only the vDSO's
   own CFI (CFA = rsp + 8) can give the return address, since rbp is 0 and the frame-pointer
   fallback has nothing to follow. The stack copy is the return address alone. */
static void check_vdso_frame(perf__dwfl_unwinder_t *u, const perf__module_map_t *map) {
  const perf__module_t *vdso = NULL;
  for (size_t i = 0; i < map->count; i++) {
    if (map->modules[i].image) vdso = &map->modules[i];
  }
  if (!vdso) {
    fprintf(stderr, "no vDSO in this process, skipping the vDSO frame check\n");
    return;
  }
  uintptr_t entry = vdso_symbol(vdso, "__vdso_clock_gettime");
  if (!entry) entry = vdso_symbol(vdso, "clock_gettime");
  CHECK(entry != 0);
  CHECK(entry >= vdso->start && entry < vdso->end);

  uint64_t regs[PERF__ARCH_MAX_DWARF_REGS] = {0};
  uint64_t fake_stack[1] = {g_pcs[1]};
  uintptr_t sp = g_snap.base - 4096; /* any address: only the copy is read */
  regs[7] = sp;
  regs[perf__arch.dwarf_pc] = entry;
  uintptr_t pcs[8];
  size_t n = 0;
  CHECK_EQ_INT(perf__dwfl_unwind(u, regs, sp, fake_stack, sizeof fake_stack, pcs, 8, &n, NULL),
               PERF_OK);
  CHECKF(n == 2, "n = %zu", n);
  CHECK(pcs[0] == entry);
  CHECK(pcs[1] == g_pcs[1]);
}

/* The vDSO's PT_LOAD ends before its section header table: a map that sizes the image by the
   PT_LOAD (as module_map.c may) leaves libelf without sections, and the CFI must then come from
   PT_GNU_EH_FRAME. */
static void check_vdso_without_section_headers(const perf__module_map_t *map) {
  perf__module_map_t cut = *map;
  cut.modules = malloc(map->count * sizeof *map->modules);
  CHECK(cut.modules != NULL);
  memcpy(cut.modules, map->modules, map->count * sizeof *map->modules);
  bool have_vdso = false;
  for (size_t i = 0; i < cut.count; i++) {
    perf__module_t *m = &cut.modules[i];
    if (!m->image) continue;
    const Elf64_Ehdr *eh = m->image;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)m->image + eh->e_phoff);
    for (size_t k = 0; k < eh->e_phnum; k++) {
      if (ph[k].p_type == PT_LOAD) m->image_size = ph[k].p_offset + ph[k].p_filesz;
    }
    have_vdso = m->image_size < (size_t)eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
  }
  if (have_vdso) {
    perf__dwfl_unwinder_t *u = NULL;
    CHECK_EQ_INT(perf__dwfl_unwinder_create(&cut, &u), PERF_OK);
    check_vdso_frame(u, &cut);
    perf__dwfl_unwinder_free(u);
  }
  free(cut.modules);
}

/* Several requesting threads share one unwinder (its mutex serializes them). */
static void *unwind_thread(void *arg) {
  uintptr_t pcs[MAX_FRAMES];
  size_t n = 0;
  for (int i = 0; i < 200; i++) {
    int rc = perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, g_snap.bytes, g_snap.len, pcs,
                               MAX_FRAMES, &n, NULL);
    if (rc != PERF_OK || n != g_count || memcmp(pcs, g_pcs, n * sizeof pcs[0]) != 0) {
      *(int *)arg = 1;
      break;
    }
  }
  return NULL;
}

static void check_threads(void) {
  enum { T = 4 };
  pthread_t th[T];
  int bad[T] = {0};
  for (int i = 0; i < T; i++)
    CHECK(pthread_create(&th[i], NULL, unwind_thread, &bad[i]) == 0);
  for (int i = 0; i < T; i++) {
    CHECK(pthread_join(th[i], NULL) == 0);
    CHECK_EQ_INT(bad[i], 0);
  }
}

static char g_log[2048];

static void keep_log(perf_log_level_t level, const char *message, void *user) {
  (void)level;
  (void)user;
  size_t used = strlen(g_log);
  snprintf(g_log + used, sizeof g_log - used, "%s\n", message);
}

/* Modules whose file is missing, or is not the loaded one (another build-id), are skipped; a
   map with nothing usable is refused. */
static void check_unusable_modules(const perf__module_map_t *map) {
  const perf__module_t *exe = NULL;
  for (size_t i = 0; i < map->count && !exe; i++) {
    if (map->modules[i].build_id_len > 0 && strstr(map->modules[i].path, "test_dwfl") != NULL) {
      exe = &map->modules[i];
    }
  }
  for (size_t i = 0; i < map->count && !exe; i++) {
    if (map->modules[i].build_id_len > 0) exe = &map->modules[i];
  }
  CHECK(exe != NULL);
  perf__log_set(keep_log, NULL);

  perf__module_t m = *exe;
  m.build_id[0] ^= 0xff;
  perf__module_map_t one = {.modules = &m, .count = 1};
  perf__dwfl_unwinder_t *u = (perf__dwfl_unwinder_t *)&m;
  g_log[0] = '\0';
  CHECK_EQ_INT(perf__dwfl_unwinder_create(&one, &u), PERF_E_UNSUPPORTED);
  CHECK(u == NULL);
  CHECKF(strstr(g_log, "build-id") != NULL, "log: %s", g_log);

  m = *exe;
  char missing[] = "/nonexistent/dir/libmissing.so";
  m.path = missing;
  m.basename = missing + 16;
  m.build_id_len = 0;
  g_log[0] = '\0';
  CHECK_EQ_INT(perf__dwfl_unwinder_create(&one, &u), PERF_E_UNSUPPORTED);
  CHECK(u == NULL);
  CHECKF(strstr(g_log, "cannot open") != NULL && strstr(g_log, "none of 1 modules") != NULL,
         "log: %s", g_log);

  perf__log_set(NULL, NULL);
}

static void check_empty_map(void) {
  perf__module_map_t empty = {0};
  perf__dwfl_unwinder_t *u = NULL;
  int rc = perf__dwfl_unwinder_create(&empty, &u);
  CHECK(rc < 0);
  CHECK(u == NULL);
}

static void time_unwinds(void) {
  enum { N = 1000 };
  uintptr_t pcs[MAX_FRAMES];
  size_t n = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < N; i++) {
    CHECK_EQ_INT(perf__dwfl_unwind(g_unwinder, g_snap.regs, g_snap.base, g_snap.bytes, g_snap.len,
                                   pcs, MAX_FRAMES, &n, NULL),
                 PERF_OK);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3;
  CHECK_EQ_INT(n, g_count);
  fprintf(stderr, "perf__dwfl_unwind: %.2f us per call for %zu frames (%d calls)\n", us / N, n, N);
}

/* ---- helpers ----------------------------------------------------------------------------- */

typedef struct map_builder_s {
  perf__module_map_t *map;
  size_t cap;
  bool seen_first;
  uintptr_t vdso_ehdr;
} map_builder_t;

static size_t vdso_image_size(const void *image) {
  const Elf64_Ehdr *eh = image;
  size_t size = (size_t)eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
  const Elf64_Phdr *ph = (const Elf64_Phdr *)((const char *)image + eh->e_phoff);
  for (size_t i = 0; i < eh->e_phnum; i++) {
    if (ph[i].p_offset + ph[i].p_filesz > size) size = ph[i].p_offset + ph[i].p_filesz;
  }
  return size;
}

static void read_build_id(const struct dl_phdr_info *info, perf__module_t *m) {
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
    const unsigned char *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
      const unsigned char *name = p + sizeof *nh;
      const unsigned char *desc = name + ((nh->n_namesz + 3u) & ~3u);
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
          nh->n_descsz <= PERF__BUILD_ID_MAX && desc + nh->n_descsz <= end) {
        memcpy(m->build_id, desc, nh->n_descsz);
        m->build_id_len = nh->n_descsz;
        return;
      }
      p = desc + ((nh->n_descsz + 3u) & ~3u);
    }
  }
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  map_builder_t *b = data;
  bool first = !b->seen_first;
  b->seen_first = true;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (size_t i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
    if (s < lo) lo = s;
    if (e > hi) hi = e;
  }
  if (lo >= hi) return 0;

  perf__module_t m = {.bias = info->dlpi_addr, .start = lo, .end = hi};
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  if (strcmp(name, "linux-vdso.so.1") == 0 || (b->vdso_ehdr && info->dlpi_addr == b->vdso_ehdr)) {
    m.path = strdup("[vdso]");
    m.image = (const void *)b->vdso_ehdr;
    m.image_size = vdso_image_size(m.image);
  } else if (name[0] == '\0') {
    if (!first) return 0;
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    CHECK(n > 0);
    buf[n] = '\0';
    m.path = strdup(buf);
  } else {
    m.path = strdup(name);
  }
  CHECK(m.path != NULL);
  const char *slash = strrchr(m.path, '/');
  m.basename = slash ? slash + 1 : m.path;
  if (!m.image) read_build_id(info, &m);

  perf__module_map_t *map = b->map;
  if (map->count == b->cap) {
    b->cap = b->cap ? b->cap * 2 : 16;
    map->modules = realloc(map->modules, b->cap * sizeof *map->modules);
    CHECK(map->modules != NULL);
  }
  map->modules[map->count++] = m;
  return 0;
}

static int by_start(const void *a, const void *b) {
  const perf__module_t *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

static void build_map(perf__module_map_t *map) {
  memset(map, 0, sizeof *map);
  map_builder_t b = {.map = map, .vdso_ehdr = (uintptr_t)getauxval(AT_SYSINFO_EHDR)};
  dl_iterate_phdr(phdr_cb, &b);
  qsort(map->modules, map->count, sizeof *map->modules, by_start);
  CHECK(map->count >= 2);
}

static void free_map(perf__module_map_t *map) {
  for (size_t i = 0; i < map->count; i++)
    free(map->modules[i].path);
  free(map->modules);
  memset(map, 0, sizeof *map);
}

/* An independent libdwfl session over /proc/self/maps, only for naming frames. */
static Dwfl *namer_begin(void) {
  static const Dwfl_Callbacks k_callbacks = {
      .find_elf = dwfl_linux_proc_find_elf,
      .find_debuginfo = dwfl_build_id_find_debuginfo,
  };
  Dwfl *d = dwfl_begin(&k_callbacks);
  CHECK(d != NULL);
  dwfl_report_begin(d);
  CHECK_EQ_INT(dwfl_linux_proc_report(d, getpid()), 0);
  CHECK_EQ_INT(dwfl_report_end(d, NULL, NULL), 0);
  return d;
}

/* Frames after the first hold return addresses: name the call instruction before them. */
static const char *frame_name(Dwfl *namer, uintptr_t pc, size_t index) {
  Dwarf_Addr a = index > 0 ? pc - 1 : pc;
  Dwfl_Module *m = dwfl_addrmodule(namer, a);
  return m ? dwfl_module_addrname(m, a) : NULL;
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  CHECK(d != NULL);
  int n = 0;
  while (readdir(d))
    n++;
  closedir(d);
  return n;
}

static const test_case_t g_cases[] = {TEST_CASE(unwind)};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
