/*
 * test_symbols.c - unit tests of sdk/symbols on real binaries: names_app
 * (C++, -O2 -g: namespaces, templates, lambdas, gcc clones, inline chains
 * of the standard library) read as a file.
 *
 *  - demangle, base_name: exact strings (C++ clones and lambdas, Rust legacy
 *    and v0, clone suffixes raw and demangled);
 *  - fixture_names: exact names of the clones nm lists, of lambdas in
 *    inline chains, and the chain deeper than PERF__SYM_MAX_LINES;
 *  - against_addr2line: every byte of names_app's functions against
 *    `addr2line -i -f -C` (binutils): the same number of functions per
 *    address, the same names (as frame_name_norm forgives; addr2line
 *    leaves a DW_AT_name unqualified), lines and files at each level;
 *    `eu-addr2line -i -f -C` (elfutils) decides where binutils is known
 *    wrong (disagreement says where);
 *  - debug_file_*: names_app stripped, its DWARF in a separate debug file
 *    (objcopy --only-keep-debug) found by debuglink next to it, in .debug/,
 *    by build-id in a collector-style store (debug_dirs), opened itself as
 *    the collector opens one, and refused when its build-id differs;
 *  - memory_cap: copies of names_app under a cap of a few modules' DWARF:
 *    the counted bytes stay under it and lookups still read DWARF;
 *  - libc: the system's libc, named through its build-id debug file when
 *    installed (libc6-dbg), as gdb names it;
 *  - errors.
 */
#include <dlfcn.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "frame_names.h"
#include "perf_sdk.h"
#include "sdk/symbols/symbols.h"
#include "tempdir.h"

#define MAX_SYMS 4096
#define MAX_ADDRS 32768

typedef struct sym_s {
  uint64_t addr, size;
  char name[512];
} sym_t;

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static void run(const char *cmd) {
  int rc = system(cmd);
  CHECKF(rc == 0, "`%s` failed (%d)", cmd, rc);
}

/* The defined function symbols of `path` (raw names), from `nm -S`. */
static size_t nm_functions(const char *path, sym_t *out, size_t max) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "nm -S --defined-only %s", path);
  FILE *p = popen(cmd, "r");
  CHECK(p != NULL);
  size_t n = 0;
  char line[1024];
  while (fgets(line, sizeof line, p) && n < max) {
    char type;
    sym_t s;
    if (sscanf(line, "%" SCNx64 " %" SCNx64 " %c %511s", &s.addr, &s.size, &type, s.name) == 4 &&
        strchr("tTwW", type) && s.size > 0)
      out[n++] = s;
  }
  CHECK(pclose(p) == 0);
  return n;
}

static const sym_t *find_sym(const sym_t *syms, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(syms[i].name, name) == 0) return &syms[i];
  return NULL;
}

static const sym_t *find_sym_containing(const sym_t *syms, size_t n, const char *part) {
  for (size_t i = 0; i < n; i++)
    if (strstr(syms[i].name, part)) return &syms[i];
  return NULL;
}

static perf__sym_module_t *open_module(const char *path, const uint8_t *id, size_t id_len,
                                       const char *dirs) {
  perf__sym_module_t *m = NULL;
  CHECK_EQ_INT(perf__sym_module_open(path, NULL, 0, id, id_len, dirs, &m), PERF_OK);
  CHECK(m != NULL);
  return m;
}

static size_t build_id_of(const char *path, uint8_t *id, size_t cap) {
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  CHECK(elf_version(EV_CURRENT) != EV_NONE);
  Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
  const void *p = NULL;
  ssize_t n = elf ? dwelf_elf_gnu_build_id(elf, &p) : -1;
  CHECK(n > 0 && (size_t)n <= cap);
  memcpy(id, p, (size_t)n);
  elf_end(elf);
  close(fd);
  return (size_t)n;
}

static void print_frame(const char *title, uint64_t addr, const perf__sym_frame_t *f) {
  fprintf(stderr, "%s 0x%" PRIx64 " (%zu lines, dwarf %d, offset %" PRIu64 "):\n", title, addr,
          f->count, f->from_dwarf, f->offset);
  for (size_t i = 0; i < f->count; i++)
    fprintf(stderr, "  %s [%s] %s:%u:%u\n", f->lines[i].function,
            f->lines[i].linkage ? f->lines[i].linkage : "-",
            f->lines[i].file ? f->lines[i].file : "?", f->lines[i].line, f->lines[i].column);
}

static bool same_str(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool same_frame(const perf__sym_frame_t *a, const perf__sym_frame_t *b) {
  if (a->count != b->count || a->offset != b->offset || a->from_dwarf != b->from_dwarf)
    return false;
  for (size_t i = 0; i < a->count; i++) {
    const perf__sym_line_t *x = &a->lines[i], *y = &b->lines[i];
    if (!same_str(x->function, y->function) || !same_str(x->linkage, y->linkage) ||
        !same_str(x->file, y->file) || x->line != y->line || x->column != y->column)
      return false;
  }
  return true;
}

/* ------------------------------------------------------------------------ */
/* Demangling                                                                */
/* ------------------------------------------------------------------------ */

static void check_demangle(const char *mangled, const char *want) {
  char *got = perf__sym_demangle(mangled);
  CHECKF(same_str(got, want), "%s: got %s, want %s", mangled, got ? got : "NULL",
         want ? want : "NULL");
  free(got);
}

static void case_demangle(void) {
  check_demangle("_ZNK4shop7pricing6EngineIlE5totalEv.isra.0",
                 "shop::pricing::Engine<long>::total() const [clone .isra.0]");
  check_demangle("_ZN4shop7pricingL11cart_weightERKNS0_4CartEl.isra.0",
                 "shop::pricing::cart_weight(shop::pricing::Cart const&, long) [clone .isra.0]");
  check_demangle("_ZZ4mainENKUlvE_clEv", "main::{lambda()#1}::operator()() const");
  check_demangle("_ZN3foo3barEv.constprop.0.isra.0",
                 "foo::bar() [clone .constprop.0] [clone .isra.0]");
  /* Rust: legacy (Itanium-shaped, its hash dropped) and v0. */
  check_demangle("_ZN4core3fmt9Formatter3pad17h0123456789abcdefE", "core::fmt::Formatter::pad");
  check_demangle("_RNvNtCs1234_7mycrate3foo3bar", "mycrate::foo::bar");
  /* PLT stubs (sdk/symbols/plt.h) as gdb shows them. */
  check_demangle("_ZSt9terminatev@plt", "std::terminate()@plt");
  check_demangle("_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE@plt",
                 "std::condition_variable::wait(std::unique_lock<std::mutex>&)@plt");
  check_demangle("clock_gettime@plt", NULL);
  check_demangle("_Zgarbage!@plt", NULL);
  /* C names and garbage: shown as they are. */
  check_demangle("main", NULL);
  check_demangle("__GI___libc_read", NULL);
  check_demangle("_Z", NULL);
  check_demangle("_Zgarbage!", NULL);
  check_demangle(NULL, NULL);
}

static void check_base(const char *name, const char *want) {
  char out[256];
  CHECKF(strcmp(perf__sym_base_name(name, out, sizeof out), want) == 0, "%s: got %s, want %s", name,
         out, want);
}

static void case_base_name(void) {
  check_base("shop::pricing::Engine<long>::total() const [clone .isra.0]",
             "shop::pricing::Engine<long>::total() const");
  check_base("foo::bar() [clone .constprop.0] [clone .isra.0]", "foo::bar()");
  check_base("f(int) [clone .cold]", "f(int)");
  check_base("_ZN3foo3barEv.constprop.0.isra.0", "_ZN3foo3barEv");
  check_base("checksum_forever.constprop.0", "checksum_forever");
  check_base("render.part.1.cold", "render");
  check_base("main.cold", "main");
  check_base("foo.lto_priv.0", "foo");
  check_base("foo.llvm.12345", "foo");
  check_base("read", "read");
  check_base(".cold", ".cold");     /* a name, not a suffix */
  check_base("x.1", "x.1");         /* a number alone is not a clone */
  check_base("foo.bar", "foo.bar"); /* nor an unknown word */
  check_base("f() [clone", "f() [clone");
  check_base("", "");
  char small[5];
  CHECK(strcmp(perf__sym_base_name("abcdefgh.isra.0", small, sizeof small), "abcd") == 0);
}

/* ------------------------------------------------------------------------ */
/* names_app                                                                 */
/* ------------------------------------------------------------------------ */

static void check_physical(perf__sym_module_t *m, const sym_t *s, const char *want) {
  perf__sym_frame_t f;
  CHECKF(perf__sym_lookup(m, s->addr, &f), "nothing at %s", s->name);
  const perf__sym_line_t *p = &f.lines[f.count - 1];
  if (strcmp(p->function, want) != 0 || !same_str(p->linkage, s->name) || f.offset != 0) {
    print_frame(s->name, s->addr, &f);
    CHECKF(0, "want %s, linkage %s, offset 0", want, s->name);
  }
  CHECK(f.from_dwarf && p->file && strstr(p->file, "names_app.cc") && p->line > 0);
}

/* The call of deep_leaf inside deep_entry: 41 functions deep (deep<40>..
   deep<0> inlined), more than a frame keeps. */
static void check_deep_chain(perf__sym_module_t *m, const sym_t *syms, size_t n) {
  const sym_t *entry = find_sym(syms, n, "_ZN4shop7pricing10deep_entryEl");
  CHECK(entry);
  perf__sym_frame_t f;
  size_t deepest = 0;
  for (uint64_t a = entry->addr; a < entry->addr + entry->size; a++) {
    CHECK(perf__sym_lookup(m, a, &f));
    if (f.count > deepest) deepest = f.count;
    if (f.count < PERF__SYM_MAX_LINES) continue;
    CHECK_EQ_INT(f.count, PERF__SYM_MAX_LINES);
    CHECK(strcmp(f.lines[f.count - 1].function, "shop::pricing::deep_entry(long)") == 0);
    CHECKF(strcmp(f.lines[f.count - 2].function, "long shop::pricing::deep<10>(long)") == 0 ||
               strstr(f.lines[f.count - 2].function, "shop::pricing::deep<"),
           "%s", f.lines[f.count - 2].function);
  }
  CHECKF(deepest == PERF__SYM_MAX_LINES, "deepest chain %zu", deepest);
}

static void case_fixture_names(void) {
  static sym_t syms[MAX_SYMS];
  size_t n = nm_functions(NAMES_APP_PATH, syms, MAX_SYMS);
  /* gcc made the clones the names are about. */
  const sym_t *total = find_sym(syms, n, "_ZNK4shop7pricing6EngineIlE5totalEv.isra.0");
  const sym_t *weight = find_sym(syms, n, "_ZN4shop7pricingL11cart_weightERKNS0_4CartEl.isra.0");
  const sym_t *fill = find_sym_containing(syms, n, "9fill_cart");
  CHECKF(total && weight && fill && strstr(fill->name, ".constprop."),
         "nm does not list the .isra / .constprop clones of names_app");
  perf__sym_module_t *m = open_module(NAMES_APP_PATH, NULL, 0, NULL);
  check_physical(m, total, "shop::pricing::Engine<long>::total() const [clone .isra.0]");
  check_physical(m, weight,
                 "shop::pricing::cart_weight(shop::pricing::Cart const&, long) [clone .isra.0]");
  /* Lambdas in inline chains: the condition variable's predicate (named
     by its linkage name, demangled) and std::sort's comparator called
     through its wrapper (named by DWARF, as gdb names it). */
  static const char pred[] = "shop::orders::Queue<long>::pop()::{lambda()#1}::operator()() const";
  static const char comp[] = "__gnu_cxx::__ops::_Iter_comp_iter<shop::catalog::sort_prices("
                             "std::vector<long int, std::allocator<long int> >&)::<lambda(long "
                             "int, long int)> >::operator()<";
  bool has_pred = false, has_comp = false;
  for (size_t i = 0; i < n; i++) {
    if (!strstr(syms[i].name, "4shop")) continue;
    for (uint64_t a = syms[i].addr; a < syms[i].addr + syms[i].size; a++) {
      perf__sym_frame_t f;
      CHECK(perf__sym_lookup(m, a, &f));
      for (size_t k = 0; k + 1 < f.count; k++) {
        has_pred = has_pred || strcmp(f.lines[k].function, pred) == 0;
        has_comp = has_comp || strncmp(f.lines[k].function, comp, sizeof comp - 1) == 0;
      }
    }
  }
  CHECKF(has_pred && has_comp, "lambdas in chains: predicate %d, comparator %d", has_pred,
         has_comp);
  check_deep_chain(m, syms, n);
  perf__sym_module_free(m);
}

/* ------------------------------------------------------------------------ */
/* Against addr2line                                                         */
/* ------------------------------------------------------------------------ */

typedef struct a2l_line_s {
  char *name, *file; /* malloc'd */
  unsigned line;
} a2l_line_t;

typedef struct a2l_s {
  uint64_t addr;
  size_t count;
  a2l_line_t lines[48];
} a2l_t;

/* `<tool> -a -i -f -C` of addrs[0..n), one a2l_t each. tool: binutils'
   addr2line, or elfutils' eu-addr2line (its innermost name line ends
   " inlined at <file:line:column> in <caller>", its positions with
   ":column"). */
static void addr2line(const char *tool, const uint64_t *addrs, size_t n, a2l_t *out) {
  char in_path[256], cmd[512];
  snprintf(in_path, sizeof in_path, "%s/addrs.txt", tempdir_make("perf-sym"));
  FILE *f = fopen(in_path, "w");
  CHECK(f);
  for (size_t i = 0; i < n; i++)
    fprintf(f, "0x%" PRIx64 "\n", addrs[i]);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s -a -i -f -C -e %s < %s", tool, NAMES_APP_PATH, in_path);
  bool eu = strstr(tool, "eu-") != NULL;
  FILE *p = popen(cmd, "r");
  CHECK(p);
  static char line[FRAME_NAME_MAX + 64];
  size_t k = (size_t)-1;
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = '\0';
    uint64_t a;
    if (strncmp(line, "0x", 2) == 0 && sscanf(line, "%" SCNx64, &a) == 1) {
      CHECK(++k < n && a == addrs[k]);
      out[k].addr = a;
      out[k].count = 0;
      continue;
    }
    CHECK(k < n && out[k].count < 48);
    a2l_line_t *l = &out[k].lines[out[k].count];
    char *inlined = eu ? strstr(line, " inlined at ") : NULL;
    if (inlined) *inlined = '\0';
    l->name = strdup(line);
    CHECK(fgets(line, sizeof line, p));
    line[strcspn(line, "\n (")] = '\0'; /* " (discriminator 1)" */
    char *colon = strrchr(line, ':');
    if (eu && colon) { /* the column */
      *colon = '\0';
      colon = strrchr(line, ':');
    }
    CHECK(colon);
    *colon = '\0';
    l->file = strdup(line);
    l->line = (unsigned)strtoul(colon + 1, NULL, 10);
    out[k].count++;
  }
  CHECK(pclose(p) == 0 && k + 1 == n);
}

static void free_a2l(a2l_t *t, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < t[i].count; k++) {
      free(t[i].lines[k].name);
      free(t[i].lines[k].file);
    }
  free(t);
}

/* Our name is the tool's, or the tool's qualified (addr2line prints
   DW_AT_name without its namespaces and classes: "__sort<>" for
   "std::__sort<>", which frame_name_norm reads "sort<>" and
   "std::__sort<>"). */
static bool names_agree(const char *ours, const char *theirs) {
  char a[FRAME_NAME_MAX], b[FRAME_NAME_MAX];
  frame_name_norm(ours, a, sizeof a);
  frame_name_norm(theirs, b, sizeof b);
  size_t la = strlen(a), lb = strlen(b);
  if (strcmp(a, b) == 0) return true;
  if (la <= lb || strcmp(a + la - lb, b) != 0) return false;
  size_t at = la - lb;
  while (at > 0 && a[at - 1] == '_')
    at--;
  return at >= 2 && strncmp(a + at - 2, "::", 2) == 0;
}

/* binutils' addr2line names the innermost function of a chain after the
   function holding the code when the innermost one has no linkage name (a
   C function such as __gthread_mutex_lock, a lambda's operator()); gdb and
   eu-addr2line name it. Such a name is checked against eu-addr2line's. */
static bool binutils_quirk(const a2l_t *t, size_t i) {
  if (i != 0 || t->count < 2) return false;
  char a[FRAME_NAME_MAX], b[FRAME_NAME_MAX];
  frame_name_norm(t->lines[0].name, a, sizeof a);
  frame_name_norm(t->lines[t->count - 1].name, b, sizeof b);
  return strcmp(a, b) == 0;
}

/* The file at level k as a tool says it, NULL when it has no such level. */
static const char *file_at(const a2l_t *t, size_t k) {
  return k < t->count ? frame_basename(t->lines[k].file) : NULL;
}

/* Why our answer is not binutils' addr2line's: the same functions (a
   chain deeper than PERF__SYM_MAX_LINES is kept as its innermost functions
   and the physical one), names and lines. Where binutils is known wrong,
   eu-addr2line (elfutils) decides: the innermost name (binutils_quirk),
   and files (binutils 2.40 puts some line rows of std::thread's
   destructors in names_app.cc, where gdb and eu-addr2line see
   std_thread.h). eu-addr2line is not the reference for the rest: it
   reports an inline level at a few addresses past an inlined range's end
   (0x7 into a deleting destructor) where gdb's blocks and binutils have
   none. */
static const char *disagreement(const perf__sym_frame_t *f, const a2l_t *bu, const a2l_t *eu) {
  size_t want = bu->count < PERF__SYM_MAX_LINES ? bu->count : PERF__SYM_MAX_LINES;
  if (f->count != want) return "a different number of functions";
  bool eu_same = eu->count == bu->count;
  for (size_t i = 0; i < f->count; i++) {
    const perf__sym_line_t *l = &f->lines[i];
    size_t k = i + 1 == f->count ? bu->count - 1 : i;
    if (!binutils_quirk(bu, k) ? !names_agree(l->function, bu->lines[k].name)
                               : eu_same && !names_agree(l->function, eu->lines[k].name))
      return "a different name";
    if (l->line != bu->lines[k].line) return "a different line";
    const char *ours = l->line ? frame_basename(l->file) : NULL, *b = file_at(bu, k),
               *e = k + 1 == bu->count && eu->count ? file_at(eu, eu->count - 1) : file_at(eu, k);
    if (ours && strcmp(ours, b) != 0 && !(e && strcmp(ours, e) == 0)) return "a different file";
  }
  return NULL;
}

static void print_a2l(const char *tool, const a2l_t *t) {
  fprintf(stderr, "%s:\n", tool);
  for (size_t k = 0; k < t->count; k++)
    fprintf(stderr, "  %s %s:%u\n", t->lines[k].name, t->lines[k].file, t->lines[k].line);
}

static void case_against_addr2line(void) {
  static sym_t syms[MAX_SYMS];
  uint64_t *addrs = calloc(MAX_ADDRS, sizeof *addrs);
  a2l_t *bu = calloc(MAX_ADDRS, sizeof *bu), *eu = calloc(MAX_ADDRS, sizeof *eu);
  CHECK(addrs && bu && eu);
  size_t ns = nm_functions(NAMES_APP_PATH, syms, MAX_SYMS), n = 0;
  /* The program's own functions and the library code instantiated in it. */
  for (size_t i = 0; i < ns; i++) {
    if (!strstr(syms[i].name, "4shop") && !strstr(syms[i].name, "St6thread") &&
        strcmp(syms[i].name, "main") != 0)
      continue;
    for (uint64_t a = syms[i].addr; a < syms[i].addr + syms[i].size && n < MAX_ADDRS; a++)
      addrs[n++] = a;
  }
  CHECKF(n > 1000 && n < MAX_ADDRS, "%zu addresses", n);
  addr2line("addr2line", addrs, n, bu);
  addr2line("eu-addr2line", addrs, n, eu);
  perf__sym_module_t *m = open_module(NAMES_APP_PATH, NULL, 0, NULL);
  size_t inlined = 0;
  for (size_t i = 0; i < n; i++) {
    perf__sym_frame_t f;
    CHECK(perf__sym_lookup(m, addrs[i], &f) && f.from_dwarf);
    const char *why = disagreement(&f, &bu[i], &eu[i]);
    if (why) {
      print_frame("ours", addrs[i], &f);
      print_a2l("addr2line", &bu[i]);
      print_a2l("eu-addr2line", &eu[i]);
      CHECKF(0, "0x%" PRIx64 ": %s", addrs[i], why);
    }
    inlined += f.count > 1;
  }
  CHECKF(inlined > n / 4, "only %zu of %zu addresses are in inlined code", inlined, n);
  fprintf(stderr, "%zu addresses agree with addr2line, %zu of them in inlined code\n", n, inlined);
  perf__sym_module_free(m);
  free_a2l(bu, n);
  free_a2l(eu, n);
  free(addrs);
}

/* ------------------------------------------------------------------------ */
/* Separate debug files                                                      */
/* ------------------------------------------------------------------------ */

/* Some addresses of names_app with inline chains, and their answers read
   from the unstripped file. */
typedef struct reference_s {
  uint64_t addrs[256];
  perf__sym_frame_t frames[256];
  size_t n;
} reference_t;

static void make_reference(reference_t *r) {
  static sym_t syms[MAX_SYMS];
  size_t ns = nm_functions(NAMES_APP_PATH, syms, MAX_SYMS);
  const char *names[] = {"_ZN4shop6orders14consume_ordersERNS0_5QueueIlEE",
                         "_ZN4shop7pricing10post_priceERNS0_6LedgerEl",
                         "_ZN4shop7pricing11spin_pricesEPKim"};
  perf__sym_module_t *m = open_module(NAMES_APP_PATH, NULL, 0, NULL);
  r->n = 0;
  for (size_t k = 0; k < 3; k++) {
    const sym_t *s = find_sym(syms, ns, names[k]);
    CHECKF(s, "no %s", names[k]);
    for (uint64_t a = s->addr; a < s->addr + s->size && r->n < 256; a += 3) {
      r->addrs[r->n] = a;
      CHECK(perf__sym_lookup(m, a, &r->frames[r->n]) && r->frames[r->n].from_dwarf);
      r->n++;
    }
  }
  /* The answers' strings outlive the module only as copies: keep the
     module open for the test's life. */
  (void)m;
}

static void check_same_as_reference(perf__sym_module_t *m, const reference_t *r, const char *how) {
  for (size_t i = 0; i < r->n; i++) {
    perf__sym_frame_t f;
    CHECK(perf__sym_lookup(m, r->addrs[i], &f));
    if (!same_frame(&f, &r->frames[i])) {
      print_frame("unstripped", r->addrs[i], &r->frames[i]);
      print_frame(how, r->addrs[i], &f);
      CHECKF(0, "%s: another answer than the unstripped file's", how);
    }
  }
}

/* dir/app: names_app without any symbols, its DWARF in dir/app.debug. */
static const char *stripped_app(const char *sub) {
  static char dir[256];
  snprintf(dir, sizeof dir, "%s/%s", tempdir_make("perf-sym"), sub);
  CHECK(mkdir(dir, 0700) == 0);
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "cd %s && objcopy --only-keep-debug %s app.debug && "
           "objcopy --strip-all --add-gnu-debuglink=app.debug %s app",
           dir, NAMES_APP_PATH, NAMES_APP_PATH);
  run(cmd);
  return dir;
}

static void case_debug_file_debuglink(void) {
  static reference_t ref;
  make_reference(&ref);
  const char *dir = stripped_app("link");
  char path[512], cmd[1024];
  snprintf(path, sizeof path, "%s/app", dir);
  perf__sym_module_t *m = open_module(path, NULL, 0, NULL); /* next to the file */
  check_same_as_reference(m, &ref, "debuglink next to the file");
  perf__sym_module_free(m);
  snprintf(cmd, sizeof cmd, "cd %s && mkdir .debug && mv app.debug .debug/", dir);
  run(cmd);
  m = open_module(path, NULL, 0, NULL); /* in .debug/ */
  check_same_as_reference(m, &ref, "debuglink in .debug/");
  perf__sym_module_free(m);
}

static void case_debug_file_build_id(void) {
  static reference_t ref;
  make_reference(&ref);
  const char *dir = stripped_app("store");
  uint8_t id[64];
  size_t id_len = build_id_of(NAMES_APP_PATH, id, sizeof id);
  char hex[140] = "", cmd[1024], path[512], store[512];
  for (size_t i = 0; i < id_len; i++)
    sprintf(hex + strlen(hex), "%s%02x", i == 1 ? "/" : "", id[i]);
  /* The collector's store layout; the link's name leads nowhere. */
  snprintf(cmd, sizeof cmd,
           "cd %s && mkdir -p store/.build-id/%.2s && mv app.debug store/.build-id/%s.debug", dir,
           hex, hex);
  run(cmd);
  snprintf(path, sizeof path, "%s/app", dir);
  snprintf(store, sizeof store, "/nonexistent:%s/store", dir);
  perf__sym_module_t *m = open_module(path, id, id_len, store);
  check_same_as_reference(m, &ref, "build-id in debug_dirs");
  perf__sym_module_free(m);
  /* The collector opens the debug file itself. */
  snprintf(path, sizeof path, "%s/store/.build-id/%s.debug", dir, hex);
  m = open_module(path, NULL, 0, NULL);
  check_same_as_reference(m, &ref, "the debug file opened itself");
  perf__sym_module_free(m);
}

static void case_debug_file_mismatch(void) {
  const char *dir = stripped_app("wrong");
  char cmd[1024], path[512];
  /* A debug file of another build under the link's name: not used. */
  snprintf(cmd, sizeof cmd, "cd %s && objcopy --only-keep-debug %s app.debug", dir,
           TEST_SYMBOLS_SELF);
  run(cmd);
  snprintf(path, sizeof path, "%s/app", dir);
  perf__sym_module_t *m = open_module(path, NULL, 0, NULL);
  static sym_t syms[MAX_SYMS];
  size_t ns = nm_functions(NAMES_APP_PATH, syms, MAX_SYMS);
  const sym_t *s = find_sym(syms, ns, "_ZN4shop6orders14consume_ordersERNS0_5QueueIlEE");
  perf__sym_frame_t f;
  CHECK(s && !perf__sym_lookup(m, s->addr + 4, &f) && f.count == 0);
  perf__sym_module_free(m);
}

/* ------------------------------------------------------------------------ */
/* The memory cap                                                            */
/* ------------------------------------------------------------------------ */

static void case_memory_cap(void) {
  enum { COPIES = 6 };
  static sym_t syms[MAX_SYMS];
  size_t ns = nm_functions(NAMES_APP_PATH, syms, MAX_SYMS);
  const sym_t *s = find_sym(syms, ns, "_ZN4shop6orders14consume_ordersERNS0_5QueueIlEE");
  CHECK(s && s->size > 40);
  perf__sym_module_t *mods[COPIES];
  for (int i = 0; i < COPIES; i++) {
    char cmd[1024], path[512];
    snprintf(path, sizeof path, "%s/copy%d", tempdir_make("perf-sym"), i);
    snprintf(cmd, sizeof cmd, "cp %s %s", NAMES_APP_PATH, path);
    run(cmd);
    mods[i] = open_module(path, NULL, 0, NULL);
  }
  /* One module's DWARF, as counted. */
  perf__symbols_stats_t st;
  perf__sym_frame_t f;
  CHECK(perf__sym_lookup(mods[0], s->addr, &f) && f.from_dwarf);
  perf__symbols_stats(&st);
  size_t one = st.dwarf_bytes;
  CHECK(one > 0 && st.dwarf_modules == 1);
  /* Room for two: every lookup leaves the count under the cap, and each
     address still gets its inline chain from DWARF read again. */
  size_t cap = one * 5 / 2;
  perf__symbols_set_cap(cap);
  for (uint64_t off = 1; off < 40; off++) {
    for (int i = 0; i < COPIES; i++) {
      CHECK(perf__sym_lookup(mods[i], s->addr + off, &f));
      CHECKF(f.from_dwarf, "module %d, +%" PRIu64 ": no DWARF", i, off);
      perf__symbols_stats(&st);
      CHECKF(st.dwarf_bytes <= cap && st.dwarf_modules <= 2, "%zu bytes in %zu modules, cap %zu",
             st.dwarf_bytes, st.dwarf_modules, cap);
    }
  }
  CHECKF(st.dwarf_opens >= 39 * COPIES, "%zu opens", st.dwarf_opens);
  /* A cap below one module's DWARF: named from the symbol table only. */
  perf__symbols_set_cap(one / 2);
  perf__symbols_stats(&st);
  CHECK(st.dwarf_bytes <= one / 2 && st.dwarf_modules == 0);
  CHECK(perf__sym_lookup(mods[0], s->addr + 41, &f) && !f.from_dwarf && f.count == 1);
  CHECK(strcmp(f.lines[0].function, "shop::orders::consume_orders(shop::orders::Queue<long>&)") ==
        0);
  /* Answers already cached keep their chains. */
  CHECK(perf__sym_lookup(mods[0], s->addr + 1, &f) && f.from_dwarf);
  perf__symbols_set_cap(PERF__SYM_DEFAULT_CAP);
  for (int i = 0; i < COPIES; i++) {
    CHECK(perf__sym_module_bytes(mods[i]) < (1u << 20));
    perf__sym_module_free(mods[i]);
  }
  perf__symbols_stats(&st);
  CHECK(st.dwarf_bytes == 0 && st.dwarf_modules == 0);
}

/* The writer's idle drop (perf__symbols_drop_dwarf): a module's DWARF and
   symbol table go, its cached answers stay, and its next new address reads
   both again, once, with the same names as before. */
static void case_idle_drop(void) {
  static sym_t syms[MAX_SYMS];
  size_t ns = nm_functions(NAMES_APP_PATH, syms, MAX_SYMS);
  const sym_t *s = find_sym(syms, ns, "_ZN4shop6orders14consume_ordersERNS0_5QueueIlEE");
  CHECK(s && s->size > 40);
  const char *name = "shop::orders::consume_orders(shop::orders::Queue<long>&)";
  perf__sym_module_t *m = open_module(NAMES_APP_PATH, NULL, 0, NULL);
  perf__sym_frame_t f;
  CHECK(perf__sym_lookup(m, s->addr + 1, &f) && f.from_dwarf);
  CHECK(strcmp(f.lines[f.count - 1].function, name) == 0);
  size_t held = perf__sym_module_bytes(m);
  perf__symbols_stats_t st;
  perf__symbols_stats(&st);
  size_t loads = st.table_loads, opens = st.dwarf_opens;
  perf__symbols_drop_dwarf();
  perf__symbols_stats(&st);
  CHECK(st.dwarf_modules == 0 && st.dwarf_bytes == 0);
  size_t dropped = perf__sym_module_bytes(m);
  /* the table held at least an address and a name per function */
  CHECKF(dropped + ns * sizeof(uint64_t) <= held,
         "%zu bytes before the drop, %zu after, %zu functions", held, dropped, ns);
  /* A cached address: nothing read. */
  CHECK(perf__sym_lookup(m, s->addr + 1, &f) && f.from_dwarf);
  CHECK(strcmp(f.lines[f.count - 1].function, name) == 0);
  perf__symbols_stats(&st);
  CHECKF(st.table_loads == loads && st.dwarf_opens == opens, "%zu table loads, %zu opens",
         st.table_loads - loads, st.dwarf_opens - opens);
  /* A new one: the table and the DWARF read again, once. */
  for (uint64_t off = 2; off < 8; off++) {
    CHECK(perf__sym_lookup(m, s->addr + off, &f) && f.from_dwarf);
    CHECK(strcmp(f.lines[f.count - 1].function, name) == 0);
  }
  perf__symbols_stats(&st);
  CHECKF(st.table_loads == loads + 1 && st.dwarf_opens == opens + 1, "%zu table loads, %zu opens",
         st.table_loads - loads, st.dwarf_opens - opens);
  CHECK(perf__sym_module_bytes(m) >= dropped + ns * sizeof(uint64_t));
  perf__sym_module_free(m);
}

/* A module's DWARF that cannot be read for a while (its debug file moved
   away, as by a package upgrade, or no descriptor left): the lookups meanwhile
   are named from the symbol table, the open is not tried again before the
   next idle drop, and after it the DWARF is read. */
static void case_dwarf_after_failed_open(void) {
  static sym_t syms[MAX_SYMS];
  size_t ns = nm_functions(NAMES_APP_PATH, syms, MAX_SYMS);
  const sym_t *s = find_sym(syms, ns, "_ZN4shop6orders14consume_ordersERNS0_5QueueIlEE");
  CHECK(s && s->size > 40);
  const char *name = "shop::orders::consume_orders(shop::orders::Queue<long>&)";
  const char *dir = stripped_app("away");
  char path[512], cmd[1024];
  snprintf(path, sizeof path, "%s/app", dir);
  perf__sym_module_t *m = open_module(path, NULL, 0, NULL); /* its table from app.debug */
  snprintf(cmd, sizeof cmd, "cd %s && mv app.debug app.away", dir);
  run(cmd);
  perf__sym_frame_t f;
  CHECK(perf__sym_lookup(m, s->addr + 1, &f) && !f.from_dwarf);
  CHECK(strcmp(f.lines[f.count - 1].function, name) == 0);
  snprintf(cmd, sizeof cmd, "cd %s && mv app.away app.debug", dir);
  run(cmd);
  CHECK(perf__sym_lookup(m, s->addr + 2, &f) && !f.from_dwarf); /* not before the drop */
  perf__symbols_drop_dwarf();
  CHECK(perf__sym_lookup(m, s->addr + 3, &f) && f.from_dwarf);
  CHECK(strcmp(f.lines[f.count - 1].function, name) == 0 && f.lines[0].line > 0);
  perf__sym_module_free(m);
}

/* A debug file that is there but cannot be opened when the module is (here
   a symlink loop, ELOOP, standing for EMFILE and the like): the module is
   named from its own tables meanwhile, the search runs again after the
   next idle drop (not before) and finds the file put in its place. */
static void case_debug_file_after_failed_search(void) {
  static sym_t syms[MAX_SYMS];
  size_t ns = nm_functions(NAMES_APP_PATH, syms, MAX_SYMS);
  const sym_t *s = find_sym(syms, ns, "_ZN4shop6orders14consume_ordersERNS0_5QueueIlEE");
  CHECK(s && s->size > 40);
  const char *dir = stripped_app("loop");
  uint8_t id[64];
  size_t id_len = build_id_of(NAMES_APP_PATH, id, sizeof id);
  char hex[140] = "", cmd[1024], path[512], store[512];
  for (size_t i = 0; i < id_len; i++)
    sprintf(hex + strlen(hex), "%s%02x", i == 1 ? "/" : "", id[i]);
  snprintf(cmd, sizeof cmd,
           "cd %s && mkdir -p store/.build-id/%.2s && mv app.debug store/app.debug && "
           "ln -s %s.debug store/.build-id/%s.debug",
           dir, hex, hex + 3, hex);
  run(cmd);
  snprintf(path, sizeof path, "%s/app", dir);
  snprintf(store, sizeof store, "%s/store", dir);
  perf__sym_module_t *m = open_module(path, id, id_len, store);
  perf__sym_frame_t f;
  CHECK(!perf__sym_lookup(m, s->addr + 1, &f)); /* static: in no table of the stripped file */
  snprintf(cmd, sizeof cmd, "cd %s/store && mv -f app.debug .build-id/%s.debug", dir, hex);
  run(cmd);
  CHECK(!perf__sym_lookup(m, s->addr + 2, &f)); /* not before the drop */
  perf__symbols_drop_dwarf();
  CHECK(perf__sym_lookup(m, s->addr + 3, &f) && f.from_dwarf);
  CHECK(strcmp(f.lines[f.count - 1].function,
               "shop::orders::consume_orders(shop::orders::Queue<long>&)") == 0);
  perf__sym_module_free(m);
}

/* ------------------------------------------------------------------------ */
/* libc, errors                                                              */
/* ------------------------------------------------------------------------ */

typedef struct libc_s {
  char path[512];
  uint8_t id[64];
  size_t id_len;
  uintptr_t bias;
} libc_t;

static int find_libc(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  libc_t *l = data;
  if (!info->dlpi_name || !strstr(info->dlpi_name, "/libc.so")) return 0;
  snprintf(l->path, sizeof l->path, "%s", info->dlpi_name);
  l->bias = info->dlpi_addr;
  return 1;
}

static void case_libc(void) {
  libc_t libc = {0};
  CHECK(dl_iterate_phdr(find_libc, &libc) == 1);
  libc.id_len = build_id_of(libc.path, libc.id, sizeof libc.id);
  perf__sym_module_t *m = open_module(libc.path, libc.id, libc.id_len, NULL);
  perf__sym_frame_t f;
  /* libc's own, not a sanitizer's interceptor of the same name */
  void *handle = dlopen(libc.path, RTLD_NOW | RTLD_NOLOAD);
  uintptr_t fn = handle ? (uintptr_t)dlsym(handle, "pthread_mutex_lock") : 0;
  if (handle) dlclose(handle);
  CHECK(fn && perf__sym_lookup(m, fn - libc.bias, &f) && f.offset == 0);
  CHECKF(strcmp(f.lines[f.count - 1].function, "pthread_mutex_lock") == 0 ||
             strcmp(f.lines[f.count - 1].function, "__pthread_mutex_lock") == 0,
         "%s", f.lines[f.count - 1].function);
  CHECK(f.lines[f.count - 1].linkage == NULL); /* a C name is shown as it is */
  char debug[256];
  snprintf(debug, sizeof debug, "/usr/lib/debug/.build-id/%02x/", libc.id[0]);
  if (access(debug, R_OK) == 0) { /* libc6-dbg: its DWARF found by build-id */
    CHECKF(f.from_dwarf && f.lines[f.count - 1].file &&
               strstr(f.lines[f.count - 1].file, "pthread_mutex_lock.c"),
           "libc's debug file was not used");
  } else {
    fprintf(stderr, "no libc debug file: its DWARF not checked\n");
  }
  perf__sym_module_free(m);
}

static void case_errors(void) {
  perf__sym_module_t *m = (perf__sym_module_t *)&m;
  CHECK_EQ_INT(perf__sym_module_open(NULL, NULL, 0, NULL, 0, NULL, &m), PERF_E_INVALID_ARGUMENT);
  CHECK(m == NULL);
  CHECK_EQ_INT(perf__sym_module_open("/x", NULL, 0, NULL, 4, NULL, &m), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__sym_module_open("/x", NULL, 0, NULL, 0, NULL, NULL), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__sym_module_open("/nonexistent/lib.so", NULL, 0, NULL, 0, NULL, &m),
               PERF_E_SYSTEM);
  CHECK_EQ_INT(perf__sym_module_open("/proc/self/status", NULL, 0, NULL, 0, NULL, &m),
               PERF_E_SYSTEM);
  perf__sym_frame_t f;
  CHECK(!perf__sym_lookup(NULL, 0x1000, &f) && f.count == 0);
  perf__sym_module_free(NULL);
}

static const test_case_t g_cases[] = {
    TEST_CASE(demangle),
    TEST_CASE(base_name),
    TEST_CASE(fixture_names),
    TEST_CASE(against_addr2line),
    TEST_CASE(debug_file_debuglink),
    TEST_CASE(debug_file_build_id),
    TEST_CASE(debug_file_mismatch),
    TEST_CASE(memory_cap),
    TEST_CASE(idle_drop),
    TEST_CASE(dwarf_after_failed_open),
    TEST_CASE(debug_file_after_failed_search),
    TEST_CASE(libc),
    TEST_CASE(errors),
};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
