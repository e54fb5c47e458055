/*
 * demangle.c - names as people read them (see symbols.h): C++ (Itanium)
 * and Rust (legacy and v0) demangled by libiberty's cplus_demangle, the
 * demangler of gdb, binutils and c++filt, so names read as they do there
 * (a PLT stub's too: "std::terminate()@plt"); and a function's base name
 * without its compiler clone suffixes.
 *
 * Any thread but the signal handler. libiberty's demangler keeps no state
 * between calls; it does put arrays sized by the name's length on the
 * caller's stack (about 100 bytes per character), so a name is demangled
 * only where the stack has room for it (see demangle_fits).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

#include "sdk/symbols/symbols.h"

#define DEMANGLE_MAX_LEN 16384          /* longer names are shown raw */
#define DEMANGLE_STACK_PER_CHAR 128     /* libiberty's arrays, recursion, with margin */
#define DEMANGLE_STACK_BASE (64u << 10) /* what the rest of the call needs */
#define DEMANGLE_SHORT 256              /* this short always fits a thread's stack */

/* A PLT stub's name (sdk/symbols/plt.h): the function's, then "@plt". */
#define PLT_SUFFIX "@plt"
#define PLT_SUFFIX_LEN (sizeof PLT_SUFFIX - 1)

static const char *const CLONE_KINDS[] = {"isra", "constprop",  "part",        "cold", "lto_priv",
                                          "llvm", "localalias", "specialized", "clone"};

static bool demangle_fits(size_t len);
static char *demangle_plt_stub(const char *linkage, size_t len);
static size_t raw_clone_suffix(const char *name, size_t len);
static size_t demangled_clone_suffix(const char *name, size_t len);

char *perf__sym_demangle(const char *linkage) {
  if (!linkage) return NULL;
  /* Itanium names start with _Z, Rust v0 ones with _R (legacy Rust is
     Itanium-shaped); anything else is a C name, shown as it is. */
  if (linkage[0] != '_' || (linkage[1] != 'Z' && linkage[1] != 'R')) return NULL;
  size_t len = strlen(linkage);
  if (len > DEMANGLE_MAX_LEN || !demangle_fits(len)) return NULL;
  bool plt = len > PLT_SUFFIX_LEN && strcmp(linkage + len - PLT_SUFFIX_LEN, PLT_SUFFIX) == 0;
  if (!plt) return cplus_demangle(linkage, DMGL_PARAMS | DMGL_ANSI);
  return demangle_plt_stub(linkage, len - PLT_SUFFIX_LEN);
}

char *perf__sym_base_name(const char *name, char *out, size_t size) {
  if (!out || size == 0) return out;
  size_t len = name ? strlen(name) : 0;
  for (size_t cut = 1; cut != 0 && len > 0;) {
    cut = demangled_clone_suffix(name, len);
    if (!cut) cut = raw_clone_suffix(name, len);
    len -= cut;
  }
  if (len >= size) len = size - 1;
  if (len) memcpy(out, name, len);
  out[len] = '\0';
  return out;
}

/* "_ZSt9terminatev@plt" reads "std::terminate()@plt", as in gdb: the
   function's name (its first len characters) demangled, then the suffix. */
static char *demangle_plt_stub(const char *linkage, size_t len) {
  char *name = strndup(linkage, len);
  char *shown = name ? cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI) : NULL;
  free(name);
  size_t n = shown ? strlen(shown) : 0;
  char *out = shown ? realloc(shown, n + PLT_SUFFIX_LEN + 1) : NULL;
  if (!out) {
    free(shown);
    return NULL;
  }
  memcpy(out + n, PLT_SUFFIX, PLT_SUFFIX_LEN + 1);
  return out;
}

/* ------------------------------------------------------------------------ */
/* The stack the demangler needs                                             */
/* ------------------------------------------------------------------------ */

static _Thread_local uintptr_t t_stack_lo; /* the calling thread's stack bottom; 1 unknown */

static uintptr_t stack_lo(void) {
  if (t_stack_lo) return t_stack_lo;
  pthread_attr_t attr;
  void *addr = NULL;
  size_t size = 0;
  t_stack_lo = 1;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    if (pthread_attr_getstack(&attr, &addr, &size) == 0 && addr) t_stack_lo = (uintptr_t)addr;
    pthread_attr_destroy(&attr);
  }
  return t_stack_lo;
}

/* Whether a name of len characters can be demangled on this stack: an app
   thread asking for a text backtrace may run on a small one. */
static bool demangle_fits(size_t len) {
  if (len <= DEMANGLE_SHORT) return true;
  uintptr_t lo = stack_lo(), sp = (uintptr_t)__builtin_frame_address(0);
  if (lo <= 1 || sp <= lo) return false;
  return sp - lo >= DEMANGLE_STACK_BASE + len * DEMANGLE_STACK_PER_CHAR;
}

/* ------------------------------------------------------------------------ */
/* Clone suffixes                                                            */
/* ------------------------------------------------------------------------ */

static bool is_clone_kind(const char *p, size_t n) {
  for (size_t i = 0; i < sizeof CLONE_KINDS / sizeof CLONE_KINDS[0]; i++)
    if (strlen(CLONE_KINDS[i]) == n && memcmp(CLONE_KINDS[i], p, n) == 0) return true;
  return false;
}

/* Whether s[0..n) is a run of ".<kind>" and ".<digits>" parts that starts
   with a kind (".isra.0", ".constprop.0.isra.0", ".cold", ".part.1.cold"). */
static bool all_clone_parts(const char *s, size_t n) {
  bool first = true;
  while (n > 0) {
    if (s[0] != '.') return false;
    size_t part = 1;
    while (part < n && s[part] != '.')
      part++;
    bool digits = part > 1 && strspn(s + 1, "0123456789") >= part - 1;
    if (!(first ? is_clone_kind(s + 1, part - 1) : digits || is_clone_kind(s + 1, part - 1)))
      return false;
    first = false;
    s += part;
    n -= part;
  }
  return !first;
}

/* Length of the raw clone suffix ending name[0..len) (0: none). The first
   character is never cut: ".cold" alone is a name. */
static size_t raw_clone_suffix(const char *name, size_t len) {
  for (size_t i = 1; i < len; i++)
    if (name[i] == '.' && all_clone_parts(name + i, len - i)) return len - i;
  return 0;
}

/* Length of one demangled clone suffix " [clone .isra.0]" ending
   name[0..len) (0: none). */
static size_t demangled_clone_suffix(const char *name, size_t len) {
  static const char open[] = " [clone .";
  if (len < sizeof open + 1 || name[len - 1] != ']') return 0;
  for (size_t i = len - 1; i-- > 0;) {
    if (name[i] == '[' || name[i] == ']') {
      if (i == 0 || name[i] != '[' || name[i - 1] != ' ') return 0;
      bool match = memcmp(name + i - 1, open, sizeof open - 1) == 0;
      return match ? len - (i - 1) : 0;
    }
  }
  return 0;
}
