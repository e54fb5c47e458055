/*
 * frame_names.h - what the naming tests share: reading one line of the
 * SDK's frame text (sdk/base/frame_text.h), and the one place where the
 * documented differences between the SDK's names and gdb's or addr2line's
 * are forgiven (frame_name_norm), so every test forgives the same and
 * nothing else.
 */
#ifndef PERF_TEST_FRAME_NAMES_H
#define PERF_TEST_FRAME_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FRAME_NAME_MAX 2048
#define FRAME_FILE_MAX 512

/* One line of the frame text. */
typedef struct frame_text_s {
  unsigned index;
  char module[256];
  uint64_t pc;
  bool is_inline;
  bool truncated;            /* `<index> <truncated: reason>`: reason in name */
  char name[FRAME_NAME_MAX]; /* unnamed: "<module>+0x<offset>", as written */
  bool unnamed;              /* a physical line `<module>+0x<offset>` */
  uint64_t offset;           /* physical lines: `+ offset`; unnamed: the module-relative offset */
  char file[FRAME_FILE_MAX]; /* "" when not printed */
  unsigned line;             /* 0 when not printed */
} frame_text_t;

/* Parse one frame line (no newline needed); false when it is not one. */
bool frame_text_parse(const char *line, frame_text_t *out);

/*
 * The name reduced to what the SDK and gdb (or addr2line) are expected to
 * agree on, into out[0..cap):
 *  - compiler clone suffixes dropped (" [clone .isra.0]", ".constprop.0"):
 *    the SDK names a frame's machine code by its symbol, gdb by DWARF;
 *  - parameter lists, cv-qualifiers and return types dropped: gdb prints a
 *    function with debug info without them, a demangled symbol with them;
 *  - template arguments reduced to "<>": DWARF spells them as the compiler
 *    wrote them ("long int", "main(int, char**)::<lambda()>"), the
 *    demangler its own way ("long", "main::{lambda()#1}"); a frame's
 *    physical function is named by the SDK from its symbol (demangled), by
 *    gdb from DWARF;
 *  - lambdas read "{lambda}": the demangler writes "{lambda()#1}", DWARF
 *    (and gdb) "<lambda()>";
 *  - glibc's alias prefixes dropped ("__GI_", "__libc_", leading
 *    underscores): glibc exports one function under several names (read,
 *    __read, __libc_read, __GI___libc_read); the SDK shows the symbol
 *    table's global one, gdb the DWARF one;
 *  - spaces dropped ("> >" against ">>");
 *  - the vDSO's "__vdso_" prefix dropped: the vDSO exports each function
 *    twice (__vdso_clock_gettime, clock_gettime), the SDK shows the
 *    global one, gdb either;
 *  - a symbol version dropped ("pthread_cond_timedwait@@GLIBC_2.3.2"):
 *    gdb may name a function of .dynsym with its version, the SDK never;
 *  - an unnamed frame, "<module>+0x<offset>" in the SDK's text, reads "??"
 *    as in gdb (the offset is the test's to check).
 * One more is no rule on the text: the function the machine code belongs
 * to may be named by another of its aliases (__libc_start_main where gdb
 * reads DWARF's __libc_start_main_impl, pthread_cond_timedwait for
 * ___pthread_cond_timedwait64): the SDK shows the symbol table's global
 * name. A test that knows where gdb's function starts (test_names_gaps)
 * takes gdb's name for the SDK's when the two start at one address.
 */
void frame_name_norm(const char *name, char *out, size_t cap);

/* The last component of a path ("a/b/c.cc" -> "c.cc"). */
const char *frame_basename(const char *path);

#endif
