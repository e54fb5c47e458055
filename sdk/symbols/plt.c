/*
 * plt.c - names for a module's PLT stubs (see plt.h): the dynamic
 * relocations of GOT slots, sorted by slot, then each stub of the PLT
 * sections decoded to the slot it jumps through. The layouts are those the
 * GNU and LLVM linkers write, and the ones BFD decodes for gdb and objdump:
 *
 *   x86_64 .plt      ff 25 <disp32>  push <n>  jmp <plt0>     (lazy, 16 bytes)
 *          .plt.sec  f3 0f 1e fa  [f2] ff 25 <disp32>  ...    (IBT, 16 bytes)
 *          .plt.got  ff 25 <disp32>  66 90                    (8 bytes; 16 with IBT)
 *   aarch64 .plt     [bti c]  adrp x16, <page>  ldr x17, [x16, #<off>]  add  br x17
 *
 * An x86_64 stub is one section entry (sh_entsize, else 16 bytes); an
 * aarch64 stub runs up to the next one. The first entry of .plt (the lazy
 * binder's) jumps through a slot no relocation names, so it stays unnamed,
 * as in gdb. Any thread but the signal handler; allocates the slot table
 * for the call only.
 */
#include "sdk/symbols/plt.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "perf_sdk.h"

#define X86_STUB_DEFAULT 16
#define A64_BTI_C 0xd503245fu

/* A GOT slot and what its relocation says. */
typedef struct slot_s {
  uint64_t got;
  uint64_t addend;
  const char *symbol; /* NULL: no symbol (*ABS*) */
} slot_t;

typedef struct slots_s {
  slot_t *v;
  size_t n;
} slots_t;

/* One stub found: where, and the slot it jumps through. */
typedef struct walk_s {
  const slots_t *slots;
  perf__plt_fn fn;
  void *ctx;
  int err;
} walk_t;

static bool plt_machine(Elf *elf, GElf_Half *machine);
static int read_slots(Elf *elf, GElf_Half machine, slots_t *out);
static void x86_64_stubs(walk_t *w, const uint8_t *p, size_t size, uint64_t addr, uint64_t entsize);
static void aarch64_stubs(walk_t *w, const uint8_t *p, size_t size, uint64_t addr);

int perf__plt_each(Elf *elf, perf__plt_fn fn, void *ctx) {
  GElf_Half machine;
  size_t shstrndx;
  if (!plt_machine(elf, &machine) || elf_getshdrstrndx(elf, &shstrndx) != 0) return PERF_OK;
  slots_t slots = {NULL, 0};
  int err = read_slots(elf, machine, &slots);
  walk_t w = {&slots, fn, ctx, err};
  for (Elf_Scn *scn = NULL; !w.err && slots.n && (scn = elf_nextscn(elf, scn)) != NULL;) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_EXECINSTR))
      continue;
    const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (!name || (strcmp(name, ".plt") && strcmp(name, ".plt.sec") && strcmp(name, ".plt.got")))
      continue;
    Elf_Data *data = elf_getdata(scn, NULL);
    if (!data || !data->d_buf || data->d_size > sh.sh_size) continue;
    if (machine == EM_X86_64)
      x86_64_stubs(&w, data->d_buf, data->d_size, sh.sh_addr, sh.sh_entsize);
    else
      aarch64_stubs(&w, data->d_buf, data->d_size, sh.sh_addr);
  }
  free(slots.v);
  return w.err;
}

/* ------------------------------------------------------------------------ */
/* The relocations of GOT slots                                              */
/* ------------------------------------------------------------------------ */

/* x86_64 or aarch64, 64-bit little-endian: the layouts decoded here. */
static bool plt_machine(Elf *elf, GElf_Half *machine) {
  GElf_Ehdr eh;
  if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) return false;
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) return false;
  *machine = eh.e_machine;
  return eh.e_machine == EM_X86_64 || eh.e_machine == EM_AARCH64;
}

/* Relocation types that fill a slot a stub jumps through. */
static bool slot_reloc(GElf_Half machine, GElf_Word type) {
  if (machine == EM_X86_64)
    return type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT || type == R_X86_64_IRELATIVE;
  return type == R_AARCH64_JUMP_SLOT || type == R_AARCH64_GLOB_DAT || type == R_AARCH64_IRELATIVE;
}

static int cmp_slot(const void *a, const void *b) {
  const slot_t *x = a, *y = b;
  return x->got < y->got ? -1 : x->got > y->got;
}

/* The dynamic symbol section a relocation section refers to, with its
   string table's index; false when it is not one. */
static bool dynsym_of(Elf *elf, GElf_Word link, Elf_Data **data, size_t *strndx) {
  GElf_Shdr sh;
  Elf_Scn *scn = elf_getscn(elf, link);
  if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM) return false;
  *data = elf_getdata(scn, NULL);
  *strndx = sh.sh_link;
  return *data != NULL;
}

/* The relocations an SHT_RELA section's data holds: counted from the
   bytes libelf hands over, never from the header's size alone, which a
   damaged or hostile file may set to anything (an array of that many
   slots was allocated up front). */
static size_t rela_count(Elf_Scn *scn, const GElf_Shdr *sh) {
  Elf_Data *d = sh->sh_type == SHT_RELA && sh->sh_entsize ? elf_getdata(scn, NULL) : NULL;
  return d && d->d_buf ? d->d_size / sh->sh_entsize : 0;
}

/* Append the slot relocations of one SHT_RELA section (room is there). */
static void add_slots(Elf *elf, GElf_Half machine, Elf_Scn *scn, const GElf_Shdr *sh,
                      slots_t *out) {
  Elf_Data *rela = elf_getdata(scn, NULL), *syms = NULL;
  size_t strndx = 0, n = rela_count(scn, sh);
  if (!rela || !dynsym_of(elf, sh->sh_link, &syms, &strndx)) return;
  for (size_t i = 0; i < n && i <= INT32_MAX; i++) {
    GElf_Rela r;
    if (!gelf_getrela(rela, (int)i, &r) || !slot_reloc(machine, GELF_R_TYPE(r.r_info))) continue;
    const char *symbol = NULL;
    size_t k = GELF_R_SYM(r.r_info);
    if (k) {
      GElf_Sym s;
      if (k > INT32_MAX || !gelf_getsym(syms, (int)k, &s)) continue;
      symbol = elf_strptr(elf, strndx, s.st_name);
      if (!symbol || !*symbol) continue;
    }
    out->v[out->n++] = (slot_t){r.r_offset, (uint64_t)r.r_addend, symbol};
  }
}

/* Every slot relocation of the module, sorted by slot. */
static int read_slots(Elf *elf, GElf_Half machine, slots_t *out) {
  size_t cap = 0;
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh)) cap += rela_count(scn, &sh);
  }
  if (cap == 0) return PERF_OK;
  if (cap > SIZE_MAX / sizeof *out->v || !(out->v = malloc(cap * sizeof *out->v)))
    return PERF_E_NO_MEMORY;
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) && rela_count(scn, &sh) && out->n + rela_count(scn, &sh) <= cap)
      add_slots(elf, machine, scn, &sh, out);
  }
  qsort(out->v, out->n, sizeof *out->v, cmp_slot);
  return PERF_OK;
}

/* The stub [addr, addr + size) jumping through `got`, named when a
   relocation fills that slot. */
static void stub(walk_t *w, uint64_t addr, uint64_t size, uint64_t got) {
  size_t lo = 0, hi = w->slots->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (w->slots->v[mid].got < got)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (w->err || size == 0 || lo == w->slots->n || w->slots->v[lo].got != got) return;
  const slot_t *s = &w->slots->v[lo];
  w->err = w->fn(w->ctx, addr, size, s->symbol, s->addend);
}

/* ------------------------------------------------------------------------ */
/* Decoding the stubs                                                        */
/* ------------------------------------------------------------------------ */

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool endbr64(const uint8_t *p) {
  return p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa;
}

/* Each entry: `jmp *disp32(%rip)` (ff 25) at its start, after a bnd prefix
   (f2), after endbr64, or after both. */
static void x86_64_stubs(walk_t *w, const uint8_t *p, size_t size, uint64_t addr,
                         uint64_t entsize) {
  static const size_t at[] = {0, 1, 4, 5};
  if (entsize != 8 && entsize != 16) entsize = X86_STUB_DEFAULT;
  for (size_t o = 0; o + entsize <= size && !w->err; o += entsize) {
    const uint8_t *e = p + o;
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
      size_t k = at[i];
      if (k + 6 > entsize || (k >= 4 && !endbr64(e)) || ((k == 1 || k == 5) && e[k - 1] != 0xf2))
        continue;
      if (e[k] != 0xff || e[k + 1] != 0x25) continue;
      int32_t disp = (int32_t)le32(e + k + 2);
      stub(w, addr + o, entsize, addr + o + k + 6 + (uint64_t)(int64_t)disp);
      break;
    }
  }
}

/* The slot of `adrp x16, page` at pc followed by `ldr x17, [x16, #off]`;
   false when the two words are not that pair. */
static bool aarch64_slot(uint32_t adrp, uint32_t ldr, uint64_t pc, uint64_t *got) {
  if ((adrp & 0x9f00001fu) != 0x90000010u || (ldr & 0xffc003ffu) != 0xf9400211u) return false;
  uint64_t imm = (adrp >> 29 & 3u) | (uint64_t)(adrp >> 5 & 0x7ffffu) << 2; /* 21 bits */
  int64_t pages = (int64_t)(imm << 43) >> 43;
  *got = (pc & ~(uint64_t)0xfff) + (uint64_t)(pages * 4096) + (uint64_t)(ldr >> 10 & 0xfffu) * 8;
  return true;
}

/* Each adrp/ldr pair starts a stub (at the `bti c` before it when there is
   one) that runs up to the next stub or the section's end. */
static void aarch64_stubs(walk_t *w, const uint8_t *p, size_t size, uint64_t addr) {
  bool open = false;
  uint64_t start = 0, got = 0;
  for (size_t o = 0; o + 8 <= size; o += 4) {
    uint64_t slot;
    if (!aarch64_slot(le32(p + o), le32(p + o + 4), addr + o, &slot)) continue;
    uint64_t here = addr + o - (o >= 4 && le32(p + o - 4) == A64_BTI_C ? 4 : 0);
    if (open) stub(w, start, here - start, got);
    open = true;
    start = here;
    got = slot;
    o += 4;
  }
  if (open) stub(w, start, addr + size - start, got);
}
