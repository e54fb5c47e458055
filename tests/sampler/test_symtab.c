/*
 * test_symtab.c - unit test of sdk/symbols/symtab.c: names functions of this test
 * binary (.symtab, static and global), of libc (.dynsym only on Debian) and
 * of the vDSO (an in-memory image); checks the error codes; and checks the
 * lookup rules (aliases, nested, zero-sized and out-of-range addresses,
 * .dynsym fallback, the debug file's .symtab) on small ELF images built
 * here. Against gdb (`info symbol`, raw names), address for address: every
 * PLT stub of this binary, of libc, of names_app (C++) and of plt_ibt (the
 * IBT layout: .plt.sec), and every function of libelf and libz (stripped,
 * no debug file: .dynsym only) at its start, middle and end. aarch64's PLT
 * stubs (plain and with BTI) on an image built here.
 */
#ifndef _GNU_SOURCE
#endif

#include "sdk/symbols/symtab.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "tempdir.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct {
  const char *want; /* NULL: the main program (first entry) */
  char path[4096];
  uintptr_t bias;
  int found;
} module_query_t;

static int find_module_cb(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  module_query_t *q = data;
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  if (q->want && !strstr(name, q->want)) return 0;
  snprintf(q->path, sizeof q->path, "%s", name);
  q->bias = (uintptr_t)info->dlpi_addr;
  q->found = 1;
  return 1;
}

static module_query_t find_module(const char *want) {
  module_query_t q;
  memset(&q, 0, sizeof q);
  q.want = want;
  dl_iterate_phdr(find_module_cb, &q);
  return q;
}

static void check_lookup(const perf__symtab_t *tab, uint64_t vaddr, const char *want_name,
                         uint64_t want_offset) {
  const char *name = NULL;
  uint64_t offset = 0;
  CHECKF(perf__symtab_lookup(tab, vaddr, &name, &offset), "no symbol at 0x%llx (want %s)",
         (unsigned long long)vaddr, want_name);
  CHECKF(strcmp(name, want_name) == 0, "0x%llx: got %s, want %s", (unsigned long long)vaddr, name,
         want_name);
  CHECKF(offset == want_offset, "0x%llx: %s + 0x%llx, want + 0x%llx", (unsigned long long)vaddr,
         name, (unsigned long long)offset, (unsigned long long)want_offset);
}

static void check_no_symbol(const perf__symtab_t *tab, uint64_t vaddr) {
  const char *name = NULL;
  uint64_t offset = 0;
  bool found = perf__symtab_lookup(tab, vaddr, &name, &offset);
  CHECKF(!found, "0x%llx: unexpected %s + 0x%llx", (unsigned long long)vaddr, name,
         (unsigned long long)offset);
}

/* ------------------------------------------------------------------------ */
/* This binary, libc, the vDSO                                               */
/* ------------------------------------------------------------------------ */

static volatile int g_sink;

/* Keep the test functions whole and under their own names. */
#if defined(__clang__)
#define TEST_FN __attribute__((noinline))
#else
#define TEST_FN __attribute__((noinline, noclone))
#endif

static TEST_FN int symtab_test_static_fn(int n) {
  int acc = 0;
  for (int i = 0; i < n; i++)
    acc += i * g_sink + 3;
  g_sink = acc;
  return acc;
}

TEST_FN int symtab_test_global_fn(int n) {
  int acc = 1;
  for (int i = 0; i < n; i++)
    acc ^= i * g_sink + 7;
  g_sink = acc;
  return acc;
}

static void case_self(void) {
  module_query_t self = find_module(NULL);
  CHECK(self.found);
  perf__symtab_t *tab = NULL;
  CHECK_EQ_INT(perf__symtab_load("/proc/self/exe", NULL, 0, NULL, &tab), PERF_OK);
  CHECK(tab != NULL);
  CHECK(perf__symtab_count(tab) > 0);

  int (*volatile fns[2])(int) = {symtab_test_static_fn, symtab_test_global_fn};
  const char *names[2] = {"symtab_test_static_fn", "symtab_test_global_fn"};
  for (int i = 0; i < 2; i++) {
    int r = fns[i](3);
    CHECK(r == g_sink);
    uint64_t vaddr = (uint64_t)(uintptr_t)fns[i] - self.bias;
    check_lookup(tab, vaddr, names[i], 0);
    check_lookup(tab, vaddr + 5, names[i], 5);
  }
  check_no_symbol(tab, 0);
  check_no_symbol(tab, UINT64_MAX / 2);
  perf__symtab_free(tab);
}

static void case_libc(void) {
  module_query_t libc = find_module("libc.so");
  CHECK(libc.found);
  /* Resolve in libc itself: under ASan, plain `read` is the interceptor. */
  void *handle = dlopen(libc.path, RTLD_NOLOAD | RTLD_LAZY);
  CHECKF(handle != NULL, "dlopen %s: %s", libc.path, dlerror());
  void *fn = dlsym(handle, "read");
  CHECK(fn != NULL);

  perf__symtab_t *tab = NULL;
  CHECK_EQ_INT(perf__symtab_load(libc.path, NULL, 0, NULL, &tab), PERF_OK);
  CHECK(perf__symtab_count(tab) > 0);
  const char *name = NULL;
  uint64_t offset = 1;
  uint64_t vaddr = (uint64_t)(uintptr_t)fn - libc.bias;
  CHECKF(perf__symtab_lookup(tab, vaddr, &name, &offset), "read not found at 0x%llx",
         (unsigned long long)vaddr);
  CHECKF(strcmp(name, "read") == 0 || strcmp(name, "__read") == 0, "got %s", name);
  CHECK_EQ_INT(offset, 0);
  perf__symtab_free(tab);
  dlclose(handle);
}

typedef ElfW(Ehdr) ehdr_t;

/* The vDSO image's size: whatever of headers and segments lies farthest. */
static size_t vdso_size(const ehdr_t *eh) {
  size_t size = (size_t)eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
  const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
  size_t ph_end = (size_t)eh->e_phoff + (size_t)eh->e_phnum * eh->e_phentsize;
  if (ph_end > size) size = ph_end;
  for (int i = 0; i < eh->e_phnum; i++) {
    size_t end = (size_t)(ph[i].p_offset + ph[i].p_filesz);
    if (ph[i].p_type == PT_LOAD && end > size) size = end;
  }
  return size;
}

static void case_vdso(void) {
  const ehdr_t *eh = (const ehdr_t *)getauxval(AT_SYSINFO_EHDR);
  if (!eh) {
    fprintf(stderr, "test_symtab: no vDSO, vDSO check skipped\n");
    return;
  }
  module_query_t vdso = find_module("linux-vdso.so.1");
  CHECK(vdso.found);
  void *handle = dlopen("linux-vdso.so.1", RTLD_NOLOAD | RTLD_LAZY);
  CHECKF(handle != NULL, "dlopen vdso: %s", dlerror());
  void *fn = dlsym(handle, "__vdso_clock_gettime");
  if (!fn) fn = dlsym(handle, "clock_gettime");
  CHECK(fn != NULL);

  perf__symtab_t *tab = NULL;
  CHECK_EQ_INT(perf__symtab_load(NULL, eh, vdso_size(eh), NULL, &tab), PERF_OK);
  CHECK(perf__symtab_count(tab) > 0);
  const char *name = NULL;
  uint64_t offset = 1;
  uint64_t vaddr = (uint64_t)(uintptr_t)fn - vdso.bias;
  CHECKF(perf__symtab_lookup(tab, vaddr, &name, &offset), "no vDSO symbol at 0x%llx",
         (unsigned long long)vaddr);
  CHECKF(strcmp(name, "__vdso_clock_gettime") == 0 || strcmp(name, "clock_gettime") == 0, "got %s",
         name);
  CHECK_EQ_INT(offset, 0);
  perf__symtab_free(tab);
  dlclose(handle);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

static char *write_temp_file(const void *bytes, size_t size) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/test_symtab_XXXXXX");
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  CHECK(write(fd, bytes, size) == (ssize_t)size);
  close(fd);
  return path;
}

static void case_errors(void) {
  perf__symtab_t *tab = (perf__symtab_t *)&tab; /* must be reset to NULL */
  CHECK_EQ_INT(perf__symtab_load("/nonexistent/libnothing.so", NULL, 0, NULL, &tab), PERF_E_SYSTEM);
  CHECK(tab == NULL);
  CHECK_EQ_INT(perf__symtab_load("/", NULL, 0, NULL, &tab), PERF_E_SYSTEM);
  CHECK_EQ_INT(perf__symtab_load(NULL, NULL, 0, NULL, &tab), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__symtab_load("/proc/self/exe", NULL, 0, NULL, NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__symtab_load(NULL, "x", 0, NULL, &tab), PERF_E_INVALID_ARGUMENT);

  static const char text[] = "this is not an ELF file\n";
  char *path = write_temp_file(text, sizeof text);
  CHECK_EQ_INT(perf__symtab_load(path, NULL, 0, NULL, &tab), PERF_E_SYSTEM);
  unlink(path);
  CHECK_EQ_INT(perf__symtab_load(NULL, text, sizeof text, NULL, &tab), PERF_E_SYSTEM);
  CHECK(tab == NULL);

  CHECK(!perf__symtab_lookup(NULL, 0x1000, NULL, NULL));
  CHECK_EQ_INT(perf__symtab_count(NULL), 0);
  perf__symtab_free(NULL);
}

/* ------------------------------------------------------------------------ */
/* Synthetic ELF images                                                      */
/* ------------------------------------------------------------------------ */

typedef struct {
  const char *name;
  uint64_t value, size;
  unsigned char bind, type;
  uint16_t shndx;
} tsym_t;

typedef struct {
  Elf64_Word type; /* SHT_SYMTAB or SHT_DYNSYM */
  const tsym_t *syms;
  size_t n;
} tsec_t;

typedef struct {
  unsigned char bytes[16384];
  size_t len;
} image_t;

#define TEXT_ADDR 0x1000u
#define TEXT_SIZE 0x1000u

static size_t put(image_t *img, const void *p, size_t n, size_t align) {
  img->len = (img->len + align - 1) / align * align;
  CHECK(img->len + n <= sizeof img->bytes);
  size_t at = img->len;
  memcpy(img->bytes + at, p, n);
  img->len += n;
  return at;
}

static Elf64_Shdr make_shdr(Elf64_Word name, Elf64_Word type, uint64_t offset, uint64_t size) {
  Elf64_Shdr sh;
  memset(&sh, 0, sizeof sh);
  sh.sh_name = name;
  sh.sh_type = type;
  sh.sh_offset = offset;
  sh.sh_size = size;
  sh.sh_addralign = type == SHT_STRTAB ? 1 : 8;
  if (type == SHT_SYMTAB || type == SHT_DYNSYM) {
    sh.sh_entsize = sizeof(Elf64_Sym);
    sh.sh_info = 1; /* first non-local symbol */
  }
  return sh;
}

/* Append a symbol section and its string table; fills their headers. */
static void put_symsec(image_t *img, const tsec_t *sec, Elf64_Word strndx, Elf64_Word name,
                       Elf64_Shdr *sh_sym, Elf64_Shdr *sh_str) {
  char strtab[1024] = {0};
  size_t slen = 1;
  Elf64_Sym syms[32];
  memset(syms, 0, sizeof syms);
  CHECK(sec->n + 1 <= 32);
  for (size_t i = 0; i < sec->n; i++) {
    const tsym_t *t = &sec->syms[i];
    size_t len = strlen(t->name) + 1;
    CHECK(slen + len <= sizeof strtab);
    memcpy(strtab + slen, t->name, len);
    syms[i + 1].st_name = (Elf64_Word)slen;
    syms[i + 1].st_info = ELF64_ST_INFO(t->bind, t->type);
    syms[i + 1].st_shndx = t->shndx;
    syms[i + 1].st_value = t->value;
    syms[i + 1].st_size = t->size;
    slen += len;
  }
  size_t symsz = (sec->n + 1) * sizeof(Elf64_Sym);
  *sh_sym = make_shdr(name, sec->type, put(img, syms, symsz, 8), symsz);
  sh_sym->sh_link = strndx;
  *sh_str = make_shdr(1, SHT_STRTAB, put(img, strtab, slen, 1), slen);
}

static void put_ehdr(image_t *img, size_t shoff, size_t shnum) {
  static const unsigned char ident[EI_NIDENT] = {ELFMAG0,    ELFMAG1,     ELFMAG2,   ELFMAG3,
                                                 ELFCLASS64, ELFDATA2LSB, EV_CURRENT};
  Elf64_Ehdr eh;
  memset(&eh, 0, sizeof eh);
  memcpy(eh.e_ident, ident, sizeof ident);
  eh.e_type = ET_DYN;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shoff = shoff;
  eh.e_shnum = (Elf64_Half)shnum;
  eh.e_shstrndx = (Elf64_Half)(shnum - 1);
  memcpy(img->bytes, &eh, sizeof eh);
}

/* An x86_64 ET_DYN image: [0] null, [1] .text (NOBITS at TEXT_ADDR), then a
   symbol section and its string table per secs[i], then .shstrtab. */
static void build_image(image_t *img, const tsec_t *secs, size_t nsecs) {
  static const char shstr[] = "\0.strtab\0.text\0.symtab\0.dynsym\0.shstrtab";
  enum { N_STRTAB = 1, N_TEXT = 9, N_SYMTAB = 15, N_DYNSYM = 23, N_SHSTRTAB = 31 };
  Elf64_Shdr sh[8];
  memset(sh, 0, sizeof sh);
  memset(img, 0, sizeof *img);
  img->len = sizeof(Elf64_Ehdr);
  sh[1] = make_shdr(N_TEXT, SHT_NOBITS, img->len, TEXT_SIZE);
  sh[1].sh_flags = SHF_ALLOC | SHF_EXECINSTR;
  sh[1].sh_addr = TEXT_ADDR;
  size_t shnum = 2;
  for (size_t i = 0; i < nsecs; i++, shnum += 2) {
    CHECK(shnum + 2 < 8);
    Elf64_Word name = secs[i].type == SHT_SYMTAB ? N_SYMTAB : N_DYNSYM;
    put_symsec(img, &secs[i], (Elf64_Word)shnum + 1, name, &sh[shnum], &sh[shnum + 1]);
  }
  sh[shnum] = make_shdr(N_SHSTRTAB, SHT_STRTAB, put(img, shstr, sizeof shstr, 1), sizeof shstr);
  shnum++;
  put_ehdr(img, put(img, sh, shnum * sizeof(Elf64_Shdr), 8), shnum);
}

/* A defined function in .text. */
#define FN(n, v, s, b)                                                                             \
  { (n), (v), (s), (b), STT_FUNC, 1 }

static const tsym_t k_rules_syms[] = {
    FN("big", 0x1000, 0x100, STB_GLOBAL),
    FN("inner", 0x1010, 0x10, STB_LOCAL),
    FN("inside_label", 0x1080, 0, STB_LOCAL),
    FN("local_alias", 0x1200, 0x20, STB_LOCAL),
    FN("weak_alias", 0x1200, 0x20, STB_WEAK),
    FN("global_alias", 0x1200, 0x20, STB_GLOBAL),
    FN("global_alias_2", 0x1200, 0, STB_GLOBAL),
    FN("label", 0x1300, 0, STB_LOCAL),
    {"ifunc", 0x1400, 0x10, STB_GLOBAL, STT_GNU_IFUNC, 1},
    {"object", 0x1500, 0x10, STB_GLOBAL, STT_OBJECT, 1},
    {"undefined", 0, 0, STB_GLOBAL, STT_FUNC, SHN_UNDEF},
    {"undefined_value", 0x1600, 0, STB_GLOBAL, STT_FUNC, SHN_UNDEF},
    FN("", 0x1700, 0x10, STB_GLOBAL),
    FN("tail", 0x1800, 0, STB_LOCAL),
    {"abs_fn", 0x3000, 0, STB_GLOBAL, STT_FUNC, SHN_ABS},
};

static void check_rules(const perf__symtab_t *tab) {
  /* big, inner, inside_label, one alias, label, ifunc, tail, abs_fn */
  CHECK_EQ_INT(perf__symtab_count(tab), 8);
  check_no_symbol(tab, 0xfff);
  check_lookup(tab, 0x1000, "big", 0);
  check_lookup(tab, 0x1015, "inner", 5);
  check_lookup(tab, 0x1050, "big", 0x50); /* past inner's end, still in big */
  check_lookup(tab, 0x1080, "big", 0x80); /* a sized symbol beats a label */
  check_lookup(tab, 0x10ff, "big", 0xff);
  check_no_symbol(tab, 0x1100); /* past big's end: padding */
  check_no_symbol(tab, 0x11ff);
  check_lookup(tab, 0x1200, "global_alias", 0);
  check_lookup(tab, 0x121f, "global_alias", 0x1f);
  check_no_symbol(tab, 0x1220);
  check_lookup(tab, 0x1300, "label", 0); /* zero-sized: up to the next symbol */
  check_lookup(tab, 0x13ff, "label", 0xff);
  check_lookup(tab, 0x1408, "ifunc", 8);
  check_no_symbol(tab, 0x1410); /* objects and undefined symbols are not kept */
  check_no_symbol(tab, 0x1508);
  check_no_symbol(tab, 0x1600);
  check_no_symbol(tab, 0x1700); /* nameless */
  check_lookup(tab, 0x1800, "tail", 0);
  check_lookup(tab, 0x1fff, "tail", 0x7ff); /* last: up to its section's end */
  check_no_symbol(tab, 0x2000);
  check_lookup(tab, 0x3000, "abs_fn", 0); /* last, no section: exact only */
  check_no_symbol(tab, 0x3001);
  check_no_symbol(tab, UINT64_MAX);
}

static void case_rules(void) {
  static image_t img;
  tsec_t sec = {SHT_SYMTAB, k_rules_syms, sizeof k_rules_syms / sizeof k_rules_syms[0]};
  build_image(&img, &sec, 1);
  perf__symtab_t *tab = NULL;
  CHECK_EQ_INT(perf__symtab_load(NULL, img.bytes, img.len, NULL, &tab), PERF_OK);
  check_rules(tab);
  perf__symtab_free(tab);

  char *path = write_temp_file(img.bytes, img.len); /* the same through a file */
  CHECK_EQ_INT(perf__symtab_load(path, NULL, 0, NULL, &tab), PERF_OK);
  unlink(path);
  check_rules(tab);
  perf__symtab_free(tab);
}

static void case_fallbacks(void) {
  static image_t img;
  static const tsym_t objects[] = {{"data", 0x1100, 8, STB_GLOBAL, STT_OBJECT, 1}};
  static const tsym_t dyn[] = {FN("exported", 0x1100, 0x40, STB_GLOBAL)};
  tsec_t secs[2] = {{SHT_SYMTAB, objects, 1}, {SHT_DYNSYM, dyn, 1}};
  build_image(&img, secs, 2); /* .symtab without functions: .dynsym is used */
  perf__symtab_t *tab = NULL;
  CHECK_EQ_INT(perf__symtab_load(NULL, img.bytes, img.len, NULL, &tab), PERF_OK);
  CHECK_EQ_INT(perf__symtab_count(tab), 1);
  check_lookup(tab, 0x1110, "exported", 0x10);
  perf__symtab_free(tab);

  build_image(&img, NULL, 0); /* stripped, no debug file: an empty table */
  CHECK_EQ_INT(perf__symtab_load(NULL, img.bytes, img.len, "/nonexistent/x.debug", &tab), PERF_OK);
  CHECK_EQ_INT(perf__symtab_count(tab), 0);
  check_no_symbol(tab, 0x1100);
  perf__symtab_free(tab);
}

/* ------------------------------------------------------------------------ */
/* aarch64 PLT stubs (an image built here)                                   */
/* ------------------------------------------------------------------------ */

#define A64_PLT_ADDR 0x1000u
#define A64_GOT_ADDR 0x21000u /* the stubs' slots, one page over */
#define A64_NOP 0xd503201fu
#define A64_BTI_C_INSN 0xd503245fu

/* The words of an aarch64 stub jumping through `slot` from pc (as the GNU
   linker writes them: adrp x16; ldr x17, [x16, #lo]; add x16, x16, #lo;
   br x17). */
static size_t a64_stub(uint32_t *w, uint64_t pc, uint64_t slot) {
  uint64_t pages = (slot >> 12) - (pc >> 12), lo = slot & 0xfff;
  w[0] = 0x90000010u | (uint32_t)(pages & 3) << 29 | (uint32_t)((pages >> 2) & 0x7ffff) << 5;
  w[1] = 0xf9400211u | (uint32_t)(lo / 8) << 10;
  w[2] = 0x91000210u | (uint32_t)lo << 10;
  w[3] = 0xd61f0220u;
  return 4;
}

typedef struct a64_reloc_s {
  const char *symbol; /* NULL: none (IRELATIVE) */
  uint64_t addend;
} a64_reloc_t;

/* An aarch64 ET_DYN image: .plt (PLT0 and one stub per reloc, each after
   `bti c` when bti), .rela.plt, .dynsym, .dynstr, .shstrtab. */
static void build_a64_image(image_t *img, const a64_reloc_t *relocs, size_t n, bool bti) {
  static const char shstr[] = "\0.plt\0.rela.plt\0.dynsym\0.dynstr\0.shstrtab";
  enum { N_PLT = 1, N_RELA = 6, N_DYNSYM = 16, N_DYNSTR = 24, N_SHSTRTAB = 32 };
  memset(img, 0, sizeof *img);
  img->len = sizeof(Elf64_Ehdr);
  uint32_t plt[256];
  size_t k = 0;
  plt[k++] = 0xa9bf7bf0u; /* stp x16, x30, [sp, #-16]! */
  k += a64_stub(plt + k, A64_PLT_ADDR + 4 * k, A64_GOT_ADDR - 8);
  plt[k - 1] = 0xd61f0220u;
  while (k < 8)
    plt[k++] = A64_NOP;
  Elf64_Sym syms[16];
  Elf64_Rela rela[16];
  char dynstr[256] = "";
  size_t slen = 1;
  memset(syms, 0, sizeof syms);
  CHECK(n < 16);
  for (size_t i = 0; i < n; i++) {
    if (bti) plt[k++] = A64_BTI_C_INSN;
    uint64_t slot = A64_GOT_ADDR + 8 * i;
    k += a64_stub(plt + k, A64_PLT_ADDR + 4 * k, slot);
    if (bti) plt[k++] = A64_NOP;
    uint32_t sym = 0;
    if (relocs[i].symbol) {
      sym = (uint32_t)i + 1;
      syms[sym].st_name = (Elf64_Word)slen;
      syms[sym].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
      slen += (size_t)snprintf(dynstr + slen, sizeof dynstr - slen, "%s", relocs[i].symbol) + 1;
    }
    rela[i].r_offset = slot;
    rela[i].r_info =
        ELF64_R_INFO(sym, relocs[i].symbol ? R_AARCH64_JUMP_SLOT : R_AARCH64_IRELATIVE);
    rela[i].r_addend = (Elf64_Sxword)relocs[i].addend;
  }
  Elf64_Shdr sh[6];
  memset(sh, 0, sizeof sh);
  sh[1] = make_shdr(N_PLT, SHT_PROGBITS, put(img, plt, 4 * k, 16), 4 * k);
  sh[1].sh_flags = SHF_ALLOC | SHF_EXECINSTR;
  sh[1].sh_addr = A64_PLT_ADDR;
  sh[2] = make_shdr(N_RELA, SHT_RELA, put(img, rela, n * sizeof rela[0], 8), n * sizeof rela[0]);
  sh[2].sh_entsize = sizeof rela[0];
  sh[2].sh_link = 3;
  sh[3] = make_shdr(N_DYNSYM, SHT_DYNSYM, put(img, syms, (n + 1) * sizeof syms[0], 8),
                    (n + 1) * sizeof syms[0]);
  sh[3].sh_link = 4;
  sh[4] = make_shdr(N_DYNSTR, SHT_STRTAB, put(img, dynstr, slen, 1), slen);
  sh[5] = make_shdr(N_SHSTRTAB, SHT_STRTAB, put(img, shstr, sizeof shstr, 1), sizeof shstr);
  put_ehdr(img, put(img, sh, sizeof sh, 8), 6);
  ((Elf64_Ehdr *)img->bytes)->e_machine = EM_AARCH64;
}

/* Each stub named "<function>@plt" from its first word to the next stub
   (objdump's and gdb's names; checked against them on the cross
   toolchain's binaries), PLT0 and what lies past the last stub unnamed. */
static void check_a64_plt(bool bti) {
  static const a64_reloc_t relocs[] = {
      {"pause", 0}, {"clock_gettime", 0}, {NULL, 0x9f550}, {"_ZSt9terminatev", 0}};
  static image_t img;
  build_a64_image(&img, relocs, ARRAY_LEN(relocs), bti);
  perf__symtab_t *tab = NULL;
  CHECK_EQ_INT(perf__symtab_load(NULL, img.bytes, img.len, NULL, &tab), PERF_OK);
  CHECK_EQ_INT(perf__symtab_count(tab), ARRAY_LEN(relocs));
  check_no_symbol(tab, A64_PLT_ADDR);
  check_no_symbol(tab, A64_PLT_ADDR + 28);
  const char *names[] = {"pause@plt", "clock_gettime@plt", "*ABS*+0x9f550@plt",
                         "_ZSt9terminatev@plt"};
  uint64_t stub = bti ? 24 : 16, first = A64_PLT_ADDR + 32;
  for (size_t i = 0; i < ARRAY_LEN(relocs); i++) {
    uint64_t at = first + i * stub;
    check_lookup(tab, at, names[i], 0);
    check_lookup(tab, at + 4, names[i], 4);
    check_lookup(tab, at + stub - 4, names[i], stub - 4);
  }
  check_no_symbol(tab, first + ARRAY_LEN(relocs) * stub);
  perf__symtab_free(tab);
}

static void case_plt_aarch64(void) {
  check_a64_plt(false);
  check_a64_plt(true); /* -mbranch-protection: bti c first, 24-byte stubs */
}

/* ------------------------------------------------------------------------ */
/* Separate debug file by build-id (when the system has any installed)       */
/* ------------------------------------------------------------------------ */

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* "<dir>" + "<name>.debug" -> id bytes; 0 when the name does not fit. */
static size_t parse_build_id(const char *dir, const char *name, uint8_t *id, size_t cap) {
  size_t len = strlen(name);
  if (strlen(dir) != 2 || len < 8 || strcmp(name + len - 6, ".debug") != 0) return 0;
  len -= 6;
  if (len % 2 != 0 || len / 2 + 1 > cap) return 0;
  for (size_t i = 0; i <= len / 2; i++) {
    const char *p = i == 0 ? dir : name + 2 * (i - 1);
    int hi = hex_digit(p[0]), lo = hex_digit(p[1]);
    if (hi < 0 || lo < 0) return 0;
    id[i] = (uint8_t)(hi << 4 | lo);
  }
  return len / 2 + 1;
}

/* Loads a stripped image with the id of an installed debug file that has
   functions; returns whether one was found. */
static bool try_debug_dir(const char *dir, const image_t *img) {
  char path[512];
  snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%s", dir);
  DIR *d = opendir(path);
  if (!d) return false;
  bool done = false;
  for (struct dirent *e = readdir(d); e && !done; e = readdir(d)) {
    uint8_t id[64];
    size_t id_len = parse_build_id(dir, e->d_name, id, sizeof id);
    if (id_len == 0) continue;
    char file[800];
    snprintf(file, sizeof file, "%s/%s", path, e->d_name);
    perf__symtab_t *direct = NULL, *via_id = NULL;
    if (perf__symtab_load(file, NULL, 0, NULL, &direct) != PERF_OK) continue;
    if (perf__symtab_count(direct) > 0) {
      CHECK_EQ_INT(perf__symtab_load(NULL, img->bytes, img->len, file, &via_id), PERF_OK);
      CHECK_EQ_INT(perf__symtab_count(via_id), perf__symtab_count(direct));
      perf__symtab_free(via_id);
      done = true;
    }
    perf__symtab_free(direct);
  }
  closedir(d);
  return done;
}

static void case_debug_file(void) {
  static image_t img;
  build_image(&img, NULL, 0);
  DIR *root = opendir("/usr/lib/debug/.build-id");
  bool done = false;
  for (struct dirent *e = root ? readdir(root) : NULL; e && !done; e = readdir(root)) {
    if (e->d_name[0] != '.') done = try_debug_dir(e->d_name, &img);
  }
  if (root) closedir(root);
  if (!done) fprintf(stderr, "test_symtab: no debug files installed, debug file check skipped\n");
}

/* ------------------------------------------------------------------------ */
/* Against gdb                                                               */
/* ------------------------------------------------------------------------ */

#define GDB_NAME_MAX 1024

/* One address of a module: what gdb and the table call it. */
typedef struct named_s {
  uint64_t addr;
  char gdb[GDB_NAME_MAX]; /* "<name> + <offset>", or "??" */
  char sdk[GDB_NAME_MAX];
} named_t;

typedef struct addrs_s {
  named_t *v;
  size_t n, cap;
} addrs_t;

static void addrs_add(addrs_t *a, uint64_t addr) {
  if (a->n == a->cap) {
    a->cap = a->cap ? 2 * a->cap : 1024;
    a->v = realloc(a->v, a->cap * sizeof *a->v);
    CHECK(a->v != NULL);
  }
  memset(&a->v[a->n], 0, sizeof a->v[0]);
  a->v[a->n++].addr = addr;
}

/* The module's Elf (libelf, as the table reads it), for the test's own
   choice of addresses. */
static Elf *open_elf(const char *path, int *fd) {
  CHECK(elf_version(EV_CURRENT) != EV_NONE);
  *fd = open(path, O_RDONLY | O_CLOEXEC);
  CHECKF(*fd >= 0, "cannot open %s", path);
  Elf *elf = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
  CHECKF(elf != NULL, "%s: %s", path, elf_errmsg(-1));
  return elf;
}

/* Every stub of .plt, .plt.sec and .plt.got (x86_64: one per entry), at
   its start and 4 bytes in; the number of PLT sections found. */
static size_t plt_addresses(const char *path, addrs_t *a) {
  int fd;
  Elf *elf = open_elf(path, &fd);
  size_t shstrndx, sections = 0;
  CHECK(elf_getshdrstrndx(elf, &shstrndx) == 0);
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
    GElf_Shdr sh;
    CHECK(gelf_getshdr(scn, &sh) != NULL);
    const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (!name || (strcmp(name, ".plt") && strcmp(name, ".plt.sec") && strcmp(name, ".plt.got")))
      continue;
    sections++;
    uint64_t step = sh.sh_entsize ? sh.sh_entsize : 16;
    for (uint64_t at = sh.sh_addr; at < sh.sh_addr + sh.sh_size; at += step) {
      addrs_add(a, at);
      addrs_add(a, at + 4);
    }
  }
  elf_end(elf);
  close(fd);
  return sections;
}

/* Every function of .dynsym at its start, middle and end. */
static void dynsym_addresses(const char *path, addrs_t *a) {
  int fd;
  Elf *elf = open_elf(path, &fd);
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
    GElf_Shdr sh;
    CHECK(gelf_getshdr(scn, &sh) != NULL);
    if (sh.sh_type == SHT_SYMTAB) CHECKF(false, "%s has a .symtab: not a stripped module", path);
    if (sh.sh_type != SHT_DYNSYM) continue;
    Elf_Data *data = elf_getdata(scn, NULL);
    for (int i = 1; data && (size_t)i < sh.sh_size / sizeof(Elf64_Sym); i++) {
      GElf_Sym sym;
      CHECK(gelf_getsym(data, i, &sym) != NULL);
      int type = GELF_ST_TYPE(sym.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF) continue;
      addrs_add(a, sym.st_value);
      addrs_add(a, sym.st_value + sym.st_size / 2);
      addrs_add(a, sym.st_value + sym.st_size);
    }
  }
  elf_end(elf);
  close(fd);
}

/* Whether `a` and `b` are both functions of the module's .dynsym starting at
   `start` (aliases: gdb shows either one). */
static bool dynsym_aliases(const char *path, uint64_t start, const char *a, const char *b) {
  int fd;
  Elf *elf = open_elf(path, &fd);
  int found = 0;
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
    GElf_Shdr sh;
    CHECK(gelf_getshdr(scn, &sh) != NULL);
    Elf_Data *data = sh.sh_type == SHT_DYNSYM ? elf_getdata(scn, NULL) : NULL;
    for (int i = 1; data && (size_t)i < sh.sh_size / sizeof(Elf64_Sym); i++) {
      GElf_Sym sym;
      CHECK(gelf_getsym(data, i, &sym) != NULL);
      const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (sym.st_value == start && name && (strcmp(name, a) == 0 || strcmp(name, b) == 0))
        found |= strcmp(name, a) == 0 ? 1 : 2;
    }
  }
  elf_end(elf);
  close(fd);
  return found == 3;
}

/* gdb's `info symbol` of each address, reading the module's file (and its
   debug file, as gdb finds it), names not demangled. */
static void gdb_names(const char *path, addrs_t *a) {
  char cmds[256];
  snprintf(cmds, sizeof cmds, "%s/info_symbol.gdb", tempdir_make("perf-symtab"));
  FILE *f = fopen(cmds, "w");
  CHECK(f != NULL);
  for (size_t i = 0; i < a->n; i++)
    fprintf(f, "info symbol 0x%" PRIx64 "\n", a->v[i].addr);
  CHECK(fclose(f) == 0);
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "timeout 120 " PERF_GDB " -q -batch -nx -iex 'set debuginfod enabled off' "
           "-ex 'set print demangle off' -ex 'set print asm-demangle off' '%s' -x '%s' 2>&1",
           path, cmds);
  FILE *p = popen(cmd, "r");
  CHECK(p != NULL);
  size_t k = 0;
  static char line[GDB_NAME_MAX + 512];
  while (fgets(line, sizeof line, p)) {
    char *in = strstr(line, " in section ");
    if (strncmp(line, "No symbol matches", 17) != 0 && !in) continue; /* a warning */
    CHECKF(k < a->n, "gdb answered more than %zu addresses", a->n);
    if (!in) {
      snprintf(a->v[k++].gdb, GDB_NAME_MAX, "??");
      continue;
    }
    *in = '\0';
    snprintf(a->v[k++].gdb, GDB_NAME_MAX, strstr(line, " + ") ? "%s" : "%s + 0", line);
  }
  CHECKF(pclose(p) == 0 && k == a->n, "gdb answered %zu of %zu addresses", k, a->n);
}

/* The table's name of each address, as gdb's are written. */
static void sdk_names(const char *path, const char *debug, addrs_t *a) {
  perf__symtab_t *tab = NULL;
  CHECK_EQ_INT(perf__symtab_load(path, NULL, 0, debug, &tab), PERF_OK);
  for (size_t i = 0; i < a->n; i++) {
    const char *name;
    uint64_t off;
    if (perf__symtab_lookup(tab, a->v[i].addr, &name, &off))
      snprintf(a->v[i].sdk, GDB_NAME_MAX, "%s + %" PRIu64, name, off);
    else
      snprintf(a->v[i].sdk, GDB_NAME_MAX, "??");
  }
  perf__symtab_free(tab);
}

/* Every address named the same by gdb and the table (aliases of one
   .dynsym address aside); prints the figures. */
static void check_against_gdb(const char *what, const char *path, addrs_t *a) {
  gdb_names(path, a);
  size_t differ = 0, named = 0;
  for (size_t i = 0; i < a->n; i++) {
    named_t *x = &a->v[i];
    named += strcmp(x->gdb, "??") != 0;
    if (strcmp(x->gdb, x->sdk) == 0) continue;
    const char *gp = strstr(x->gdb, " + "), *sp = strstr(x->sdk, " + ");
    if (gp && sp && strcmp(gp, sp) == 0) {
      char g[GDB_NAME_MAX], t[GDB_NAME_MAX];
      snprintf(g, sizeof g, "%.*s", (int)(gp - x->gdb), x->gdb);
      snprintf(t, sizeof t, "%.*s", (int)(sp - x->sdk), x->sdk);
      if (dynsym_aliases(path, x->addr - strtoull(gp + 3, NULL, 10), g, t)) continue;
    }
    if (differ++ < 20)
      fprintf(stderr, "%s 0x%" PRIx64 ": gdb %s, symtab %s\n", what, x->addr, x->gdb, x->sdk);
  }
  fprintf(stderr, "%s (%s): %zu addresses, %zu named by gdb, %zu differ\n", what, path, a->n, named,
          differ);
  CHECKF(differ == 0, "%s: %zu of %zu addresses named otherwise than by gdb", what, differ, a->n);
  CHECKF(named > 0, "%s: gdb named none of the %zu addresses", what, a->n);
}

/* The PLT stubs of a module, named `<function>@plt` as gdb names them. */
static void check_plt(const char *what, const char *path, const char *debug) {
  addrs_t a = {NULL, 0, 0};
  CHECKF(plt_addresses(path, &a) > 0 && a.n > 0, "%s: no PLT", path);
  sdk_names(path, debug, &a);
  check_against_gdb(what, path, &a);
  free(a.v);
}

static void case_plt_against_gdb(void) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(n > 0);
  self[n] = '\0';
  check_plt("this binary", self, NULL);
  module_query_t libc = find_module("libc.so");
  CHECK(libc.found);
  check_plt("libc", libc.path, NULL);
  check_plt("names_app (C++)", NAMES_APP_PATH, NULL);
  check_plt("plt_ibt (.plt.sec)", PLT_IBT_PATH, NULL);
}

/* A stripped module without a debug file: named from .dynsym (and its PLT)
   wherever gdb names it. */
static void case_dynsym_against_gdb(void) {
  static const char *const libs[] = {"libelf.so", "libz.so"};
  for (size_t i = 0; i < ARRAY_LEN(libs); i++) {
    module_query_t m = find_module(libs[i]);
    CHECKF(m.found, "%s is not loaded", libs[i]);
    addrs_t a = {NULL, 0, 0};
    dynsym_addresses(m.path, &a);
    plt_addresses(m.path, &a);
    sdk_names(m.path, NULL, &a);
    check_against_gdb(libs[i], m.path, &a);
    free(a.v);
  }
}

static const test_case_t g_cases[] = {
    TEST_CASE(self),
    TEST_CASE(libc),
    TEST_CASE(vdso),
    TEST_CASE(errors),
    TEST_CASE(rules),
    TEST_CASE(fallbacks),
    TEST_CASE(debug_file),
    TEST_CASE(plt_against_gdb),
    TEST_CASE(dynsym_against_gdb),
    TEST_CASE(plt_aarch64),
};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
