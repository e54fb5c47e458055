/*
 * dwarf_libs.c - libdw, libelf and zlib for libperfsdk-core.so, loaded at
 * the first call (sdk/base/lazy_lib.h): the functions the SDK calls, under
 * their own names. libdw.so.1 needs libelf.so.1 and libz.so.1, so its
 * handle finds all three. Objects counted: Elf (elf_begin, elf_memory /
 * elf_end), Dwarf (dwarf_begin_elf / dwarf_end), Dwarf_CFI (dwarf_getcfi_elf
 * / dwarf_cfi_end) and Dwfl (dwfl_begin / dwfl_end). An Elf handed to
 * libdwfl by a find_elf callback is ended inside libdwfl, not here: the
 * stack-copy unwinder keeps the library loaded once used. Each load sets
 * libelf's version (set_elf_version), as the first one did.
 */
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <libelf.h>
#include <zlib.h>

#include "sdk/lazy/lazy_fn.h"

/* clang-format off */
#define DWARF_FNS(X)                                                                               \
  X(FN, Dwarf_Die *, dwarf_addrdie, (Dwarf *a, Dwarf_Addr b, Dwarf_Die *c), (a, b, c), NULL)       \
  X(FN, Dwarf_Attribute *, dwarf_attr, (Dwarf_Die *a, unsigned int b, Dwarf_Attribute *c),         \
    (a, b, c), NULL)                                                                               \
  X(FN, Dwarf_Attribute *, dwarf_attr_integrate,                                                   \
    (Dwarf_Die *a, unsigned int b, Dwarf_Attribute *c), (a, b, c), NULL)                           \
  X(NEW, Dwarf *, dwarf_begin_elf, (Elf *a, Dwarf_Cmd b, Elf_Scn *c), (a, b, c), NULL)            \
  X(FN, int, dwarf_cfi_addrframe, (Dwarf_CFI *a, Dwarf_Addr b, Dwarf_Frame **c), (a, b, c), -1)   \
  X(END, int, dwarf_cfi_end, (Dwarf_CFI *a), (a), -1)                                              \
  X(FN, int, dwarf_child, (Dwarf_Die *a, Dwarf_Die *b), (a, b), -1)                                \
  X(FN, Dwarf_Die *, dwarf_diecu, (Dwarf_Die *a, Dwarf_Die *b, uint8_t *c, uint8_t *d),            \
    (a, b, c, d), NULL)                                                                            \
  X(FN, const char *, dwarf_diename, (Dwarf_Die *a), (a), NULL)                                    \
  X(FN, Dwarf_Off, dwarf_dieoffset, (Dwarf_Die *a), (a), (Dwarf_Off)-1)                           \
  X(END, int, dwarf_end, (Dwarf *a), (a), -1)                                                      \
  X(FN, int, dwarf_entrypc, (Dwarf_Die *a, Dwarf_Addr *b), (a, b), -1)                             \
  X(FN, const char *, dwarf_filesrc, (Dwarf_Files *a, size_t b, Dwarf_Word *c, Dwarf_Word *d),     \
    (a, b, c, d), NULL)                                                                            \
  X(FN, Dwarf_Die *, dwarf_formref_die, (Dwarf_Attribute *a, Dwarf_Die *b), (a, b), NULL)          \
  X(FN, const char *, dwarf_formstring, (Dwarf_Attribute *a), (a), NULL)                           \
  X(FN, int, dwarf_formudata, (Dwarf_Attribute *a, Dwarf_Word *b), (a, b), -1)                     \
  X(FN, int, dwarf_frame_cfa, (Dwarf_Frame *a, Dwarf_Op **b, size_t *c), (a, b, c), -1)           \
  X(FN, int, dwarf_frame_info, (Dwarf_Frame *a, Dwarf_Addr *b, Dwarf_Addr *c, bool *d),            \
    (a, b, c, d), -1)                                                                              \
  X(FN, int, dwarf_frame_register,                                                                 \
    (Dwarf_Frame *a, int b, Dwarf_Op c[3], Dwarf_Op **d, size_t *e), (a, b, c, d, e), -1)         \
  X(FN, Dwarf *, dwarf_getalt, (Dwarf *a), (a), NULL)                                              \
  X(FN, int, dwarf_getaranges, (Dwarf *a, Dwarf_Aranges **b, size_t *c), (a, b, c), -1)           \
  X(NEW, Dwarf_CFI *, dwarf_getcfi_elf, (Elf *a), (a), NULL)                                       \
  X(FN, Elf *, dwarf_getelf, (Dwarf *a), (a), NULL)                                                \
  X(FN, Dwarf_Line *, dwarf_getsrc_die, (Dwarf_Die *a, Dwarf_Addr b), (a, b), NULL)                \
  X(FN, int, dwarf_getsrcfiles, (Dwarf_Die *a, Dwarf_Files **b, size_t *c), (a, b, c), -1)        \
  X(FN, int, dwarf_getsrclines, (Dwarf_Die *a, Dwarf_Lines **b, size_t *c), (a, b, c), -1)        \
  X(FN, int, dwarf_haschildren, (Dwarf_Die *a), (a), -1)                                           \
  X(FN, int, dwarf_haspc, (Dwarf_Die *a, Dwarf_Addr b), (a, b), -1)                                \
  X(FN, int, dwarf_linecol, (Dwarf_Line *a, int *b), (a, b), -1)                                   \
  X(FN, int, dwarf_lineno, (Dwarf_Line *a, int *b), (a, b), -1)                                    \
  X(FN, const char *, dwarf_linesrc, (Dwarf_Line *a, Dwarf_Word *b, Dwarf_Word *c), (a, b, c),     \
    NULL)                                                                                          \
  X(FN, Dwarf_Die *, dwarf_offdie, (Dwarf *a, Dwarf_Off b, Dwarf_Die *c), (a, b, c), NULL)         \
  X(FN, ptrdiff_t, dwarf_ranges,                                                                   \
    (Dwarf_Die *a, ptrdiff_t b, Dwarf_Addr *c, Dwarf_Addr *d, Dwarf_Addr *e), (a, b, c, d, e), -1)\
  X(FN, int, dwarf_siblingof, (Dwarf_Die *a, Dwarf_Die *b), (a, b), -1)                            \
  X(FN, int, dwarf_tag, (Dwarf_Die *a), (a), -1)                                                   \
  X(FN, ssize_t, dwelf_elf_gnu_build_id, (Elf *a, const void **b), (a, b), -1)                     \
  X(FN, const char *, dwelf_elf_gnu_debuglink, (Elf *a, GElf_Word *b), (a, b), NULL)               \
  X(FN, bool, dwfl_attach_state,                                                                   \
    (Dwfl *a, Elf *b, pid_t c, const Dwfl_Thread_Callbacks *d, void *e), (a, b, c, d, e), false)  \
  X(NEW, Dwfl *, dwfl_begin, (const Dwfl_Callbacks *a), (a), NULL)                                 \
  X(FN, int, dwfl_build_id_find_debuginfo,                                                         \
    (Dwfl_Module *a, void **b, const char *c, Dwarf_Addr d, const char *e, const char *f,          \
     GElf_Word g, char **h), (a, b, c, d, e, f, g, h), -1)                                         \
  X(VEND, void, dwfl_end, (Dwfl *a), (a), )                                                        \
  X(FN, const char *, dwfl_errmsg, (int a), (a), "libdw.so.1 could not be loaded")                 \
  X(FN, bool, dwfl_frame_pc, (Dwfl_Frame *a, Dwarf_Addr *b, bool *c), (a, b, c), false)            \
  X(FN, int, dwfl_frame_reg, (Dwfl_Frame *a, unsigned b, Dwarf_Word *c), (a, b, c), -1)            \
  X(FN, int, dwfl_getthread_frames, (Dwfl *a, pid_t b, int (*c)(Dwfl_Frame *, void *), void *d),  \
    (a, b, c, d), -1)                                                                              \
  X(FN, int, dwfl_module_build_id, (Dwfl_Module *a, const unsigned char **b, GElf_Addr *c),       \
    (a, b, c), -1)                                                                                 \
  X(FN, const char *, dwfl_module_info,                                                            \
    (Dwfl_Module *a, void ***b, Dwarf_Addr *c, Dwarf_Addr *d, Dwarf_Addr *e, Dwarf_Addr *f,        \
     const char **g, const char **h), (a, b, c, d, e, f, g, h), NULL)                              \
  X(FN, int, dwfl_offline_section_address,                                                         \
    (Dwfl_Module *a, void **b, const char *c, Dwarf_Addr d, const char *e, GElf_Word f,            \
     const GElf_Shdr *g, Dwarf_Addr *h), (a, b, c, d, e, f, g, h), -1)                             \
  X(VFN, void, dwfl_report_begin, (Dwfl *a), (a), )                                                \
  X(FN, Dwfl_Module *, dwfl_report_elf,                                                            \
    (Dwfl *a, const char *b, const char *c, int d, GElf_Addr e, bool f), (a, b, c, d, e, f), NULL) \
  X(FN, int, dwfl_report_end,                                                                      \
    (Dwfl *a, int (*b)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *), void *c),         \
    (a, b, c), -1)                                                                                 \
  X(FN, Dwfl_Module *, dwfl_report_module, (Dwfl *a, const char *b, Dwarf_Addr c, Dwarf_Addr d),  \
    (a, b, c, d), NULL)                                                                            \
  X(FN, int, dwfl_standard_find_debuginfo,                                                         \
    (Dwfl_Module *a, void **b, const char *c, Dwarf_Addr d, const char *e, const char *f,          \
     GElf_Word g, char **h), (a, b, c, d, e, f, g, h), -1)                                         \
  X(VFN, void, dwfl_thread_state_register_pc, (Dwfl_Thread *a, Dwarf_Word b), (a, b), )           \
  X(FN, bool, dwfl_thread_state_registers,                                                         \
    (Dwfl_Thread *a, int b, unsigned c, const Dwarf_Word *d), (a, b, c, d), false)                 \
  X(NEW, Elf *, elf_begin, (int a, Elf_Cmd b, Elf *c), (a, b, c), NULL)                            \
  X(END, int, elf_end, (Elf *a), (a), 0)                                                           \
  X(FN, Elf_Data *, elf_getdata, (Elf_Scn *a, Elf_Data *b), (a, b), NULL)                          \
  X(FN, int, elf_getphdrnum, (Elf *a, size_t *b), (a, b), -1)                                      \
  X(FN, Elf_Scn *, elf_getscn, (Elf *a, size_t b), (a, b), NULL)                                   \
  X(FN, int, elf_getshdrstrndx, (Elf *a, size_t *b), (a, b), -1)                                   \
  X(FN, Elf_Kind, elf_kind, (Elf *a), (a), ELF_K_NONE)                                             \
  X(NEW, Elf *, elf_memory, (char *a, size_t b), (a, b), NULL)                                     \
  X(FN, Elf_Scn *, elf_nextscn, (Elf *a, Elf_Scn *b), (a, b), NULL)                                \
  X(FN, Elf_Data *, elf_rawdata, (Elf_Scn *a, Elf_Data *b), (a, b), NULL)                          \
  X(FN, char *, elf_rawfile, (Elf *a, size_t *b), (a, b), NULL)                                    \
  X(FN, char *, elf_strptr, (Elf *a, size_t b, size_t c), (a, b, c), NULL)                         \
  X(FN, unsigned int, elf_version, (unsigned int a), (a), EV_NONE)                                 \
  X(FN, size_t, gelf_fsize, (Elf *a, Elf_Type b, size_t c, unsigned int d), (a, b, c, d), 0)       \
  X(FN, GElf_Chdr *, gelf_getchdr, (Elf_Scn *a, GElf_Chdr *b), (a, b), NULL)                       \
  X(FN, GElf_Ehdr *, gelf_getehdr, (Elf *a, GElf_Ehdr *b), (a, b), NULL)                           \
  X(FN, GElf_Phdr *, gelf_getphdr, (Elf *a, int b, GElf_Phdr *c), (a, b, c), NULL)                 \
  X(FN, GElf_Shdr *, gelf_getshdr, (Elf_Scn *a, GElf_Shdr *b), (a, b), NULL)                       \
  X(FN, GElf_Rela *, gelf_getrela, (Elf_Data *a, int b, GElf_Rela *c), (a, b, c), NULL)            \
  X(FN, GElf_Sym *, gelf_getsym, (Elf_Data *a, int b, GElf_Sym *c), (a, b, c), NULL)               \
  X(FN, uLong, crc32, (uLong a, const Bytef *b, uInt c), (a, b, c), 0)
/* clang-format on */

/* libelf refuses every handle (elf_begin, elf_memory: ELF_E_NO_VERSION)
   until elf_version has been called in this copy of the library, and the
   version lives in a global that each load starts at EV_NONE: once the
   idle release has unloaded the library, the next copy must be told again,
   or no module read after that is named. */
static void set_elf_version(void *const *fns);

PERF__LAZY_LIBRARY("libdw.so.1", DWARF_FNS, set_elf_version)

static void set_elf_version(void *const *fns) {
  unsigned int (*version)(unsigned int) =
      (unsigned int (*)(unsigned int))fns[PERF__LAZY_IDX_elf_version];
  version(EV_CURRENT);
}
