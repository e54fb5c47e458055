/*
 * unwind_rules_build.c - compiles a module's .eh_frame into the compact rows
 * of unwind_rules.h, with elfutils libdw doing the DWARF CFI interpretation.
 *
 * Runs on the thread that refreshes the sampler's module map, never in the
 * signal handler. The FDEs are enumerated through the .eh_frame_hdr search
 * table (PT_GNU_EH_FRAME), which every GNU-linked module carries; for each
 * FDE, libdw's dwarf_cfi_addrframe gives the rule at an address and the
 * address range where that rule holds, so walking the ranges yields the rows.
 * The FDEs' starts are kept too, as where functions start.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/proc_files.h"
#include "sdk/sampler/arch.h"
#include "sdk/sampler/unwind_rules.h"

typedef struct {
  perf__unwind_row_t *rows;
  size_t count, cap;
} row_vec_t;

/* The most PLT sections one module has whose FDE starts are left out. */
#define PLT_SECTIONS_MAX 8

typedef struct {
  uint64_t lo, hi;
} addr_range_t;

typedef struct {
  const uint8_t *data; /* .eh_frame_hdr contents */
  size_t size;
  uint64_t vaddr; /* its ELF virtual address (base of datarel encodings) */
} eh_frame_hdr_t;

static int open_elf(const perf__module_t *m, int *fd, Elf **elf, char **image_copy);
static int find_eh_frame_hdr(Elf *elf, eh_frame_hdr_t *hdr);
static int fde_starts(const eh_frame_hdr_t *hdr, uint64_t **out, size_t *count);
static int compile_fde(Dwarf_CFI *cfi, uint64_t start, uint64_t limit, row_vec_t *v);
static int push_row(row_vec_t *v, perf__unwind_row_t row);
static bool rows_same_rule(const perf__unwind_row_t *a, const perf__unwind_row_t *b);
static int build_block_index(perf__unwind_table_t *t);
static int keep_function_starts(Elf *elf, const uint64_t *starts, size_t n,
                                perf__unwind_table_t *t);
static int make_memo(perf__unwind_table_t *t);
static size_t plt_sections(Elf *elf, addr_range_t *out, size_t max);

int perf__unwind_table_build(const perf__module_t *module, perf__unwind_table_t **out) {
  *out = NULL;
  int fd = -1;
  Elf *elf = NULL;
  char *image_copy = NULL;
  int err = open_elf(module, &fd, &elf, &image_copy);
  if (err) return err;
  Dwarf_CFI *cfi = dwarf_getcfi_elf(elf);
  eh_frame_hdr_t hdr;
  uint64_t *starts = NULL;
  size_t nstarts = 0;
  row_vec_t v = {0};
  if (!cfi || find_eh_frame_hdr(elf, &hdr) != 0) {
    err = PERF_E_UNSUPPORTED;
    goto done;
  }
  if ((err = fde_starts(&hdr, &starts, &nstarts)) != 0) goto done;
  for (size_t i = 0; i < nstarts && !err; i++) {
    uint64_t limit = i + 1 < nstarts ? starts[i + 1] : UINT64_MAX;
    err = compile_fde(cfi, starts[i], limit, &v);
  }
  if (!err && v.count == 0) err = PERF_E_UNSUPPORTED;
  if (!err) {
    perf__unwind_table_t *t = calloc(1, sizeof *t);
    if (!t) {
      err = PERF_E_NO_MEMORY;
    } else {
      t->rows = v.rows;
      t->count = v.count;
      v.rows = NULL;
      if ((err = build_block_index(t)) != 0 ||
          (err = keep_function_starts(elf, starts, nstarts, t)) != 0 || (err = make_memo(t)) != 0)
        perf__unwind_table_free(t);
      else
        *out = t;
    }
  }
done:
  free(v.rows);
  free(starts);
  if (cfi) dwarf_cfi_end(cfi);
  elf_end(elf);
  if (fd >= 0) close(fd);
  free(image_copy);
  return err;
}

void perf__unwind_table_free(perf__unwind_table_t *table) {
  if (!table) return;
  free(table->memo);
  free(table->fn_start);
  free(table->block_row);
  free(table->rows);
  free(table);
}

static int open_elf(const perf__module_t *m, int *fd, Elf **elf, char **image_copy) {
  elf_version(EV_CURRENT);
  if (m->image) {
    /* elf_memory wants writable memory; the vDSO image is read-only. */
    *image_copy = malloc(m->image_size);
    if (!*image_copy) return PERF_E_NO_MEMORY;
    memcpy(*image_copy, m->image, m->image_size);
    *elf = elf_memory(*image_copy, m->image_size);
  } else {
    *fd = perf__mapped_file_open(m->path, O_RDONLY);
    if (*fd < 0) return PERF_E_SYSTEM;
    *elf = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
  }
  return *elf ? PERF_OK : PERF_E_UNSUPPORTED;
}

static int find_eh_frame_hdr(Elf *elf, eh_frame_hdr_t *hdr) {
  size_t phnum;
  if (elf_getphdrnum(elf, &phnum) != 0) return -1;
  size_t file_size;
  const char *raw = elf_rawfile(elf, &file_size);
  for (size_t i = 0; raw && i < phnum; i++) {
    GElf_Phdr ph;
    if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_GNU_EH_FRAME) continue;
    if (ph.p_offset > file_size || ph.p_filesz > file_size - ph.p_offset) return -1;
    hdr->data = (const uint8_t *)raw + ph.p_offset;
    hdr->size = ph.p_filesz;
    hdr->vaddr = ph.p_vaddr;
    return 0;
  }
  return -1;
}

/* .eh_frame_hdr: version, eh_frame_ptr_enc, fde_count_enc, table_enc, the
   encoded eh_frame pointer and FDE count, then sorted (initial location, FDE
   address) pairs. GNU ld always writes the table as datarel sdata4 and the
   count as udata4; anything else is left to the frame-pointer fallback. */
static int fde_starts(const eh_frame_hdr_t *hdr, uint64_t **out, size_t *count) {
  const uint8_t *p = hdr->data;
  if (hdr->size < 12 || p[0] != 1) return PERF_E_UNSUPPORTED;
  uint8_t ptr_enc = p[1], count_enc = p[2], table_enc = p[3];
  if ((ptr_enc & 0x0f) != DW_EH_PE_sdata4 || count_enc != DW_EH_PE_udata4 ||
      table_enc != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
    return PERF_E_UNSUPPORTED;
  uint32_t n;
  memcpy(&n, p + 8, 4);
  if (n == 0 || (hdr->size - 12) / 8 < n) return PERF_E_UNSUPPORTED;
  uint64_t *starts = malloc((size_t)n * sizeof *starts);
  if (!starts) return PERF_E_NO_MEMORY;
  for (uint32_t i = 0; i < n; i++) {
    int32_t rel;
    memcpy(&rel, p + 12 + (size_t)i * 8, 4);
    starts[i] = hdr->vaddr + (int64_t)rel;
  }
  *out = starts;
  *count = n;
  return PERF_OK;
}

/* Append the rows of the FDE that starts at `start`, stopping at `limit` (the
   next FDE's start). A gap after the FDE gets an UNKNOWN row so addresses
   there fall back to frame pointers instead of inheriting a wrong rule. */
static int compile_fde(Dwarf_CFI *cfi, uint64_t start, uint64_t limit, row_vec_t *v) {
  uint64_t addr = start;
  while (addr < limit) {
    Dwarf_Frame *frame;
    if (dwarf_cfi_addrframe(cfi, addr, &frame) != 0) break;
    Dwarf_Addr lo, hi;
    bool signal_frame = false;
    int ra_reg = dwarf_frame_info(frame, &lo, &hi, &signal_frame);
    perf__unwind_row_t row = perf__arch_cfi_row(frame, ra_reg, signal_frame);
    free(frame);
    if (addr > UINT32_MAX) return PERF_OK;
    row.pc = (uint32_t)addr;
    int err = push_row(v, row);
    if (err) return err;
    if (hi <= addr) break;
    addr = hi;
  }
  if (addr < limit && addr <= UINT32_MAX) {
    perf__unwind_row_t gap = {.pc = (uint32_t)addr, .cfa_kind = PERF__CFA_UNKNOWN};
    return push_row(v, gap);
  }
  return PERF_OK;
}

static int push_row(row_vec_t *v, perf__unwind_row_t row) {
  if (v->count > 0) {
    perf__unwind_row_t *last = &v->rows[v->count - 1];
    if (row.pc < last->pc) return PERF_OK; /* overlapping FDE: keep the first */
    if (rows_same_rule(last, &row)) return PERF_OK;
    if (row.pc == last->pc) {
      *last = row;
      return PERF_OK;
    }
  }
  if (v->count == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 1024;
    perf__unwind_row_t *grown = realloc(v->rows, cap * sizeof *grown);
    if (!grown) return PERF_E_NO_MEMORY;
    v->rows = grown;
    v->cap = cap;
  }
  v->rows[v->count++] = row;
  return PERF_OK;
}

static bool rows_same_rule(const perf__unwind_row_t *a, const perf__unwind_row_t *b) {
  return a->cfa_kind == b->cfa_kind && a->cfa_off == b->cfa_off && a->rbp_rule == b->rbp_rule &&
         a->rbp_off == b->rbp_off && a->rbx_rule == b->rbx_rule && a->rbx_off8 == b->rbx_off8;
}

/* For each block from the first row to the last, the row that covers the
   block's first byte (see perf__unwind_table_find). */
static int build_block_index(perf__unwind_table_t *t) {
  uint32_t span = t->rows[t->count - 1].pc - t->rows[0].pc + 1;
  unsigned shift = 4; /* 16..4096-byte blocks, about one row each */
  while (shift < 12 && ((uint64_t)1 << (shift + 1)) * t->count <= span)
    shift++;
  t->block_shift = shift;
  t->first_block = t->rows[0].pc >> shift;
  t->nblocks = (t->rows[t->count - 1].pc >> shift) - t->first_block + 1;
  t->block_row = malloc(t->nblocks * sizeof *t->block_row);
  if (!t->block_row) return PERF_E_NO_MEMORY;
  size_t r = 0;
  for (size_t b = 0; b < t->nblocks; b++) {
    uint64_t start = ((uint64_t)t->first_block + b) << shift;
    while (r + 1 < t->count && t->rows[r + 1].pc <= start)
      r++;
    t->block_row[b] = (uint32_t)r;
  }
  return PERF_OK;
}

/* The lookup memo: one entry per 32 rows, 64 to 512 entries of 16 bytes:
   the return addresses a process's samples hold are a few hundred per
   module. */
static int make_memo(perf__unwind_table_t *t) {
  size_t n = 64;
  while (n < 512 && n * 32 < t->count)
    n *= 2;
  t->memo = calloc(2 * n, sizeof *t->memo);
  if (!t->memo) return PERF_E_NO_MEMORY;
  t->memo_mask = (uint32_t)(n - 1);
  return PERF_OK;
}

/* The FDE starts (sorted, as .eh_frame_hdr's table is) as the table's
   function starts, without those in PLT sections: there one FDE covers
   every stub, and its start is a stub, not a function. */
static int keep_function_starts(Elf *elf, const uint64_t *starts, size_t n,
                                perf__unwind_table_t *t) {
  addr_range_t plt[PLT_SECTIONS_MAX];
  size_t nplt = plt_sections(elf, plt, PLT_SECTIONS_MAX);
  t->fn_start = malloc(n * sizeof *t->fn_start);
  if (!t->fn_start) return PERF_E_NO_MEMORY;
  size_t k = 0;
  for (size_t i = 0; i < n && starts[i] <= UINT32_MAX; i++) {
    bool in_plt = false;
    for (size_t j = 0; j < nplt && !in_plt; j++)
      in_plt = starts[i] >= plt[j].lo && starts[i] < plt[j].hi;
    if (!in_plt && (k == 0 || t->fn_start[k - 1] < starts[i]))
      t->fn_start[k++] = (uint32_t)starts[i];
  }
  t->fn_count = k;
  return PERF_OK;
}

/* The address ranges of the module's PLT sections (.plt, .plt.sec,
   .plt.got, .iplt), from its section headers (none without them). */
static size_t plt_sections(Elf *elf, addr_range_t *out, size_t max) {
  size_t shstrndx, n = 0;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0) return 0;
  for (Elf_Scn *scn = NULL; n < max && (scn = elf_nextscn(elf, scn)) != NULL;) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR)) continue;
    const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (name && (strncmp(name, ".plt", 4) == 0 || strcmp(name, ".iplt") == 0))
      out[n++] = (addr_range_t){sh.sh_addr, sh.sh_addr + sh.sh_size};
  }
  return n;
}
