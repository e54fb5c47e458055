/*
 * unwind_walk.c - the stack walk the signal handler runs (see unwind_rules.h).
 *
 * Runs inside the sampler's signal handler on the target thread, so it is
 * async-signal-safe: it only reads the immutable rule tables and the stack
 * window, every read checked against [current frame's sp, stack top). (The
 * frame-pointer search of a walk that starts without rbp, a blocked
 * thread's on the requesting thread and never in the handler, also reads
 * the code around candidate return addresses, through process_vm_readv: a
 * system call that fails where memory is gone.) The
 * unwind validator (tests/sampler/test_unwind_validate.c) runs the same
 * code over a copy of a ptrace-stopped process's stack.
 *
 * Frame 0, and the frame just above a signal frame, are "exact": their pc
 * is where the code was interrupted, not a return address. Everything that
 * depends on where in a function an instruction is applies to them only
 * (docs/internals/unwinding.md has the same list as a table):
 *  - their row is looked up at pc itself (callers: at pc - 1, their call);
 *  - prologues and epilogues: GCC's CFI moves the CFA at every push and
 *    pop, so the row is right at every instruction; but after `pop %rbp`
 *    or `leave` it still says rbp is saved at CFA-16, which now lies below
 *    sp. A saved-register slot below an exact frame's sp means the register
 *    was already restored: its live value is the caller's, and nothing
 *    below sp is read. That holds as long as no code saves rbp or rbx below
 *    sp (into the red zone, by a mov: GCC does only under tunings that save
 *    registers with moves); tests/sampler/test_unwind_rules.c checks it on
 *    every loaded module. A caller's slot below its sp is impossible (it is
 *    stopped at a call): for rbp that ends the walk as a bad read, rbx is
 *    just lost;
 *  - PLT stubs: GNU ld's expression rule (rsp + 8, + 8 once the stub pushed
 *    its relocation index), rbp and rbx untouched;
 *  - glibc's lazy-binding trampoline keeps its CFA in rbx while it calls
 *    _dl_fixup: rbx is followed through the callees' saves, read from its
 *    slot only when a CFA needs it;
 *  - tail calls: the jump target's rule holds from its first instruction
 *    and the return address on the stack is the tail-caller's caller's, so
 *    the tail-caller's frame is gone, as it is in reality;
 *  - the signal trampoline (__restore_rt, an FDE marked 'S'): pc, sp, rbp
 *    and rbx come from the ucontext the kernel saved at sp, and the frame
 *    above is exact again;
 *  - code without CFI (no module, no .eh_frame, an FDE gap) and rules the
 *    rows cannot express (__longjmp and setcontext after they switch their
 *    CFI to the target context, libgcc's eh_return stack switch): one
 *    frame-pointer step, [rbp] = caller's rbp and [rbp + 8] = return
 *    address. Right in the body of a function that keeps a frame pointer;
 *    in its prologue and epilogue, and anywhere in a function without a
 *    frame, it skips the caller (or stops). That is the documented
 *    fallback; JIT code and hand-written assembly without CFI reach it.
 *
 * The walk says how it ended (perf__walk_status_t): complete only at an
 * outermost frame, else why the frames beyond the last one are missing.
 */
#include <stdbool.h>

#include "sdk/sampler/arch.h"
#include "sdk/sampler/thread_state.h"
#include "sdk/sampler/unwind_rules.h"

/* A frame being unwound. rbx is read lazily: only glibc's lazy-binding
   trampoline needs it, while most frames save it. */
typedef struct {
  perf__unwind_regs_t r;
  uintptr_t bx_slot;    /* not 0: r.bx is still to be read from this stack slot */
  bool exact;           /* r.pc was interrupted there (see the top of the file) */
  bool fp_known;        /* r.fp is the frame's rbp (false once a rule said "unknown") */
  bool bx_known;        /* r.bx (or bx_slot) is the frame's rbx */
  bool fp_scan;         /* rbp was unknown from the start: it may be searched for */
  bool sp_guess;        /* aarch64: r.sp came from a frame-pointer step (fp + 16,
                           a lower bound: the record is at the frame's bottom) */
  bool same_sp;         /* the last step took the return address from the link
                           register (aarch64 leaf): the caller may share the sp */
  uintptr_t pending_pc; /* scan_frame_pointer: a candidate in a module whose
                           rules are still to be compiled */
  const perf__unwind_map_t *map;
} frame_t;

/* What a step returns when the walk goes on; anything else is the
   perf__walk_status_t that ends it. */
enum { STEP_OK = -1 };
/* frame_record_ok's answers. */
enum { RECORD_NO, RECORD_OK, RECORD_PENDING };
/* call_enters' answers. */
enum { CALL_UNKNOWN, CALL_MATCH, CALL_MISMATCH };

/* A candidate frame record of scan_frame_pointer, as frame_record_ok read
   it. */
typedef struct {
  uintptr_t next_fp, ra; /* [a] the caller's rbp, [a + 8] the return address */
  uintptr_t caller_ra;   /* the caller's own return address (0: none, outermost) */
  uint8_t code[PERF__ARCH_RETURN_SITE_BYTES]; /* from ra - 8 */
  bool code_read;                             /* false: code could not be read */
} record_t;

/* The positional pick among candidates (see scan_frame_pointer): the
   lowest, or a higher one sharing its saved rbp; closed once the scan
   passes that saved rbp. */
typedef struct {
  uintptr_t at, next_fp;
} pick_t;

/* The module of the last row lookup, and its rules as loaded then (a walk
   that meets a pending module stops, so they never change under it). */
typedef struct {
  const perf__module_t *m;
  const perf__unwind_table_t *table;
} module_t;

static inline const perf__unwind_row_t *find_row(const perf__unwind_map_t *map, uintptr_t pc,
                                                 module_t *m, perf__unwind_row_t *copy,
                                                 bool *pending);
static bool read_word(perf__stack_window_t w, uintptr_t floor, uintptr_t addr, uintptr_t *out)
    __attribute__((no_sanitize_address));
static int step_with_rule(const perf__unwind_row_t *row, perf__stack_window_t w, frame_t *f);
static int step_signal_frame(perf__stack_window_t w, frame_t *f);
static int link_register_ra(const perf__unwind_row_t *row, perf__stack_window_t w, uintptr_t cfa,
                            frame_t *f, uintptr_t *ra);
static int step_caller_rbp(const perf__unwind_row_t *row, perf__stack_window_t w, uintptr_t cfa,
                           frame_t *f);
static void step_caller_rbx(const perf__unwind_row_t *row, uintptr_t cfa, frame_t *f);
static bool frame_rbx(perf__stack_window_t w, frame_t *f, uintptr_t *bx);
static int step_frame_pointer(perf__stack_window_t w, frame_t *f, bool fallback);
static int scan_frame_pointer(const perf__unwind_row_t *row, perf__stack_window_t w, frame_t *f);
static bool return_address(const perf__unwind_map_t *map, uintptr_t ra,
                           const perf__unwind_row_t **row);
static int frame_record_ok(const frame_t *f, perf__stack_window_t w, uintptr_t a, record_t *rec);
static int call_enters(const perf__unwind_map_t *map, uintptr_t ra, const uint8_t *code,
                       uintptr_t fn_pc);
static bool function_start(const perf__unwind_map_t *map, uintptr_t pc, uintptr_t *start);
static void pick_offer(pick_t *p, uintptr_t a, uintptr_t next_fp);
static size_t walk_callers(module_t *m, perf__stack_window_t w, frame_t *f, uintptr_t *pcs,
                           size_t n, size_t max);

/* How far above a frame's sp scan_frame_pointer() looks for its rbp. */
#define FP_SCAN_BYTES 16384

size_t perf__unwind_walk(const perf__unwind_map_t *map, int use_rules, perf__unwind_regs_t regs,
                         perf__stack_window_t stack, uintptr_t *pcs, size_t max,
                         perf__walk_status_t *status) {
  *status = PERF__WALK_DEPTH;
  if (max == 0) return 0;
  size_t n = 0;
  pcs[n++] = regs.pc;
  if (regs.sp < stack.lo || regs.sp >= stack.hi || stack.hi < sizeof(uintptr_t)) {
    *status = PERF__WALK_BAD_READ;
    return n;
  }
  frame_t f = {.r = regs,
               .exact = true,
               .fp_known = !regs.fp_unknown,
               .bx_known = !regs.bx_unknown,
               .fp_scan = regs.fp_unknown && use_rules && map,
               .map = map};
  module_t m = {NULL, NULL}; /* callers are mostly in the callee's module */
  for (;;) {
    if (!f.exact && use_rules && map && !perf__arch.ra_in_bx) {
      n = walk_callers(&m, stack, &f, pcs, n, max);
    }
    bool pending = false;
    perf__unwind_row_t copy; /* the row's rule, through the table's memo */
    const perf__unwind_row_t *row =
        use_rules && map ? find_row(map, f.exact ? f.r.pc : f.r.pc - 1, &m, &copy, &pending) : NULL;
    if (pending) {
      *status = PERF__WALK_RULES_PENDING;
      break;
    }
    uintptr_t prev_sp = f.r.sp;
    f.same_sp = false;
    int step;
    if (row && row->cfa_kind != PERF__CFA_UNKNOWN)
      step = step_with_rule(row, stack, &f);
    else if (!row && use_rules && map && perf__arch_sigreturn_at(f.r.pc))
      step = step_signal_frame(stack, &f); /* a trampoline without CFI */
    else
      step = step_frame_pointer(stack, &f, use_rules && map);
    if (step != STEP_OK) {
      /* A frame-pointer search met a candidate it could not check yet:
         its return address ends the stack, so that the capture compiles
         its module's rules and walks again (see scan_frame_pointer). */
      if (step == PERF__WALK_RULES_PENDING && n < max) pcs[n++] = f.pending_pc;
      *status = (perf__walk_status_t)step;
      break;
    }
    /* The stack only grows towards lower addresses; an aarch64 leaf
       without a frame of its own shares its caller's sp. */
    if (f.r.sp < prev_sp || (f.r.sp == prev_sp && !f.same_sp)) {
      *status = PERF__WALK_NOT_ASCENDING;
      break;
    }
    if (n == max) break; /* PERF__WALK_DEPTH */
    pcs[n++] = f.r.pc;
  }
  return n;
}

/* The walk's fast path, where nearly every frame of a stack is: callers
 * (not exact frames) whose row says CFA = rsp + offset, or rbp + offset
 * with rbp known, with the return address at CFA - 8 (x86_64), in the
 * module of the frame before. It takes exactly the step step_with_rule
 * takes there, with the frame's registers in locals rather than in *f
 * (the general step's functions take its address, which keeps it in
 * memory: a store and a load on every frame's critical path). At the
 * first frame it cannot take as surely (another module or kind of rule,
 * pending rules, a read out of bounds, a return address of 0, a stack
 * not ascending, max frames written) it leaves that frame in *f for the
 * general step, which takes it or ends the walk with the reason. Returns
 * the frames written so far. */
static size_t walk_callers(module_t *m, perf__stack_window_t w, frame_t *f, uintptr_t *pcs,
                           size_t n, size_t max) {
  const perf__module_t *mod = m->m;
  const perf__unwind_table_t *table = m->table;
  if (!mod || !table || table == &perf__unwind_table_pending) return n;
  uintptr_t pc = f->r.pc, sp = f->r.sp, fp = f->r.fp, bx_slot = f->bx_slot;
  bool fp_known = f->fp_known, bx_known = f->bx_known;
  perf__unwind_memo_view_t memo = perf__unwind_memo_view(table);
  while (n < max && pc - 1 >= mod->start && pc - 1 < mod->end) {
    uint64_t rule = perf__unwind_table_rule(table, memo, pc - 1 - mod->bias, pc - 1);
    if (rule == PERF__UNWIND_NO_RULE) break;
    uintptr_t cfa, ra, next_fp = fp;
    unsigned kind = perf__unwind_rule_cfa_kind(rule), rbp_rule = perf__unwind_rule_rbp_rule(rule),
             rbx_rule = perf__unwind_rule_rbx_rule(rule);
    if (kind == PERF__CFA_RSP)
      cfa = sp + (intptr_t)perf__unwind_rule_cfa_off(rule);
    else if (kind == PERF__CFA_RBP && fp_known)
      cfa = fp + (intptr_t)perf__unwind_rule_cfa_off(rule);
    else
      break;
    if (cfa <= sp || !read_word(w, sp, cfa - 8, &ra) || (ra = perf__arch_strip_ra(ra)) == 0) break;
    bool next_fp_known = fp_known;
    if (rbp_rule == PERF__REG_SAVED) {
      if (!read_word(w, sp, cfa + (intptr_t)perf__unwind_rule_rbp_off(rule), &next_fp)) break;
      next_fp_known = true;
    } else if (rbp_rule != PERF__REG_SAME) {
      next_fp_known = false;
    }
    if (rbx_rule != PERF__REG_SAME) {
      bx_slot = cfa + 8 * (intptr_t)perf__unwind_rule_rbx_off8(rule);
      bx_known = rbx_rule == PERF__REG_SAVED && bx_slot >= sp;
    }
    pc = ra;
    sp = cfa;
    fp = next_fp;
    fp_known = next_fp_known;
    pcs[n++] = pc;
  }
  f->r.pc = pc;
  f->r.sp = sp;
  f->r.fp = fp;
  f->fp_known = fp_known;
  f->bx_slot = bx_slot;
  f->bx_known = bx_known;
  return n;
}

const char *perf__walk_status_name(perf__walk_status_t status) {
  switch (status) {
  case PERF__WALK_COMPLETE: return "complete";
  case PERF__WALK_NO_RULE: return "no rule";
  case PERF__WALK_BAD_READ: return "bad read";
  case PERF__WALK_NOT_ASCENDING: return "not ascending";
  case PERF__WALK_DEPTH: return "depth";
  case PERF__WALK_RULES_PENDING: return "rules pending";
  }
  return "unknown";
}

const perf__unwind_row_t *perf__unwind_table_find(const perf__unwind_table_t *table,
                                                  uint64_t vaddr) {
  if (!table || table->count == 0 || vaddr > UINT32_MAX) return NULL;
  uint32_t pc = (uint32_t)vaddr;
  if (pc < table->rows[0].pc) return NULL;
  /* Rows that can cover pc: from the one covering its block's first byte to
     the one covering the next block's first byte (or the last row). */
  size_t block = (pc >> table->block_shift) - table->first_block;
  if (block >= table->nblocks) return &table->rows[table->count - 1];
  size_t lo = table->block_row[block];
  size_t hi = block + 1 < table->nblocks ? table->block_row[block + 1] + 1 : table->count;
  while (hi - lo > 1) { /* invariant: rows[lo].pc <= pc < rows[hi].pc (or hi = end) */
    size_t mid = lo + (hi - lo) / 2;
    if (table->rows[mid].pc <= pc)
      lo = mid;
    else
      hi = mid;
  }
  return &table->rows[lo];
}

bool perf__unwind_table_function(const perf__unwind_table_t *table, uint64_t vaddr,
                                 uint32_t *start) {
  if (!table || table->fn_count == 0 || vaddr < table->fn_start[0]) return false;
  uint32_t pc = vaddr > UINT32_MAX ? UINT32_MAX : (uint32_t)vaddr;
  size_t lo = 0, hi = table->fn_count; /* invariant: fn_start[lo] <= pc < fn_start[hi] */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (table->fn_start[mid] <= pc)
      lo = mid;
    else
      hi = mid;
  }
  *start = table->fn_start[lo];
  return true;
}

const perf__unwind_table_t perf__unwind_table_pending = {0};

uint64_t perf__unwind_table_rule_slow(const perf__unwind_table_t *table, uint64_t vaddr) {
  const perf__unwind_row_t *row = perf__unwind_table_find(table, vaddr);
  if (!row) return PERF__UNWIND_NO_RULE;
  uint64_t rule = perf__unwind_rule_pack(row);
  perf__unwind_memo_put(perf__unwind_memo_view(table), vaddr, rule);
  return rule;
}

/* The row for `pc` (a lookup address: exact pc, or return address - 1);
 *m caches the module of the previous lookup and its rules. `copy` not
 NULL: through the table's memo, the answer written to *copy (the walk's
 own frames; not the candidates a frame-pointer search tries, which would
 only push real frames out).
 *pending: the module's rules are yet to be compiled. */
__attribute__((always_inline)) static inline const perf__unwind_row_t *
find_row(const perf__unwind_map_t *map, uintptr_t pc, module_t *m, perf__unwind_row_t *copy,
         bool *pending) {
  if (!m->m || pc < m->m->start || pc >= m->m->end) {
    m->m = perf__module_map_find(map->modules, pc);
    if (!m->m) return NULL;
    m->table = __atomic_load_n(&map->tables[m->m - map->modules->modules], __ATOMIC_ACQUIRE);
  }
  *pending = m->table == &perf__unwind_table_pending;
  if (!m->table || *pending) return NULL;
  if (!copy) return perf__unwind_table_find(m->table, pc - m->m->bias);
  uint64_t rule =
      perf__unwind_table_rule(m->table, perf__unwind_memo_view(m->table), pc - m->m->bias, pc);
  if (rule == PERF__UNWIND_NO_RULE) return NULL;
  *copy = perf__unwind_rule_row(rule);
  return copy;
}

/* One word of the target's stack at `addr`, which must lie in [floor, hi)
   (floor: the current frame's sp, never below the window's lo) and be
   aligned. The walk reads other frames' memory, ASan redzones included: it
   is bounds-checked by hand and must not be instrumented. */
__attribute__((no_sanitize_address)) static bool read_word(perf__stack_window_t w, uintptr_t floor,
                                                           uintptr_t addr, uintptr_t *out) {
  if (addr < floor || addr > w.hi - sizeof(uintptr_t) || (addr & (sizeof(uintptr_t) - 1)))
    return false;
  /* In place (the handler's own stack) the address is the pointer: one
     less addition on the walk's critical path. */
  if (w.base == (const uint8_t *)w.lo)
    *out = *(const volatile uintptr_t *)addr;
  else
    *out = *(const volatile uintptr_t *)(w.base + (addr - w.lo));
  return true;
}

static int step_with_rule(const perf__unwind_row_t *row, perf__stack_window_t w, frame_t *f) {
  uintptr_t cfa;
  /* What nearly every frame needs, first, as branches the CPU predicts
     (a switch's indirect jump it often does not); the switch has every
     case. */
  if (row->cfa_kind == PERF__CFA_RSP && !f->sp_guess)
    cfa = f->r.sp + (intptr_t)row->cfa_off;
  else if (row->cfa_kind == PERF__CFA_RBP && f->fp_known)
    cfa = f->r.fp + (intptr_t)row->cfa_off;
  else
    switch (row->cfa_kind) {
    case PERF__CFA_RSP:
      /* After a frame-pointer step on aarch64 the sp is a guess, but x29
         points at the frame record the row says x29 was saved in. */
      if (f->sp_guess && f->fp_known && row->rbp_rule == PERF__REG_SAVED)
        cfa = f->r.fp - (intptr_t)row->rbp_off;
      else
        cfa = f->r.sp + (intptr_t)row->cfa_off;
      break;
    case PERF__CFA_RBP:
      if (!f->fp_known) {
        int st = f->fp_scan ? scan_frame_pointer(row, w, f) : PERF__WALK_NO_RULE;
        if (st != STEP_OK) return st;
      }
      cfa = f->r.fp + (intptr_t)row->cfa_off;
      break;
    case PERF__CFA_RBX: {
      uintptr_t bx;
      if (!frame_rbx(w, f, &bx)) return PERF__WALK_NO_RULE;
      cfa = bx + (intptr_t)row->cfa_off;
      break;
    }
    case PERF__CFA_PLT: cfa = perf__arch_plt_cfa(f->r.pc, f->r.sp, row->cfa_off); break;
    case PERF__CFA_SIGNAL: return step_signal_frame(w, f);
    case PERF__CFA_OUTERMOST: return PERF__WALK_COMPLETE;
    default: return PERF__WALK_NO_RULE;
    }
  uintptr_t ra;
  if (perf__arch.ra_in_bx) {
    int st = link_register_ra(row, w, cfa, f, &ra);
    if (st != STEP_OK) return st;
  } else if (!read_word(w, f->r.sp, cfa - 8, &ra)) {
    return PERF__WALK_BAD_READ;
  }
  ra = perf__arch_strip_ra(ra);
  int st = step_caller_rbp(row, w, cfa, f);
  if (st != STEP_OK) return st;
  if (perf__arch.ra_in_bx) { /* the caller's link register holds its return address */
    f->same_sp = row->rbx_rule == PERF__REG_SAME || perf__arch_bx_slot(row, cfa) < f->r.sp;
    f->r.bx = ra;
    f->bx_slot = 0;
    f->bx_known = true;
  } else {
    step_caller_rbx(row, cfa, f);
  }
  if (ra == 0) return PERF__WALK_COMPLETE;
  f->r.pc = ra;
  f->r.sp = cfa;
  f->exact = false;
  f->sp_guess = false;
  return STEP_OK;
}

/* The signal trampoline: the kernel saved the interrupted registers in the
   ucontext at sp. The interrupted pc is exact. */
static int step_signal_frame(perf__stack_window_t w, frame_t *f) {
  uintptr_t pc, sp, fp, bx_slot = f->r.sp + perf__arch.sigframe_bx;
  if (!read_word(w, f->r.sp, f->r.sp + perf__arch.sigframe_pc, &pc) ||
      !read_word(w, f->r.sp, f->r.sp + perf__arch.sigframe_sp, &sp) ||
      !read_word(w, f->r.sp, f->r.sp + perf__arch.sigframe_fp, &fp))
    return PERF__WALK_BAD_READ;
  f->r = (perf__unwind_regs_t){.pc = pc, .sp = sp, .fp = fp};
  f->bx_slot = bx_slot;
  f->exact = true;
  f->sp_guess = false;
  f->fp_known = true;
  f->bx_known = true;
  return STEP_OK;
}

/* aarch64: the return address is the caller's value of the link register
   (x30), by the row's rule for it ("bx"). Still live in x30 in an exact
   frame (a leaf, a prologue before the save, an epilogue after the
   restore); a caller is stopped at a call, which overwrote x30: it must
   have saved it. */
static int link_register_ra(const perf__unwind_row_t *row, perf__stack_window_t w, uintptr_t cfa,
                            frame_t *f, uintptr_t *ra) {
  uintptr_t slot = perf__arch_bx_slot(row, cfa);
  bool live = row->rbx_rule == PERF__REG_SAME ||
              (row->rbx_rule == PERF__REG_SAVED && slot < f->r.sp); /* restored already */
  if (live) return f->exact && frame_rbx(w, f, ra) ? STEP_OK : PERF__WALK_NO_RULE;
  if (row->rbx_rule != PERF__REG_SAVED) return PERF__WALK_NO_RULE;
  return read_word(w, f->r.sp, slot, ra) ? STEP_OK : PERF__WALK_BAD_READ;
}

/* The caller's rbp by the row's rule (the CFA is computed already). */
static int step_caller_rbp(const perf__unwind_row_t *row, perf__stack_window_t w, uintptr_t cfa,
                           frame_t *f) {
  if (row->rbp_rule == PERF__REG_SAME) return STEP_OK;
  if (row->rbp_rule != PERF__REG_SAVED) {
    f->fp_known = false;
    return STEP_OK;
  }
  uintptr_t slot = cfa + (intptr_t)row->rbp_off;
  /* Popped already (an epilogue after pop %rbp or leave): the live rbp is
     the caller's. See the top of the file. */
  if (slot < f->r.sp && f->exact) return STEP_OK;
  if (!read_word(w, f->r.sp, slot, &f->r.fp)) return PERF__WALK_BAD_READ;
  f->fp_known = true;
  return STEP_OK;
}

/* The caller's rbx by the row's rule, as a slot to read if a frame ever
   needs it. A slot below a caller's sp cannot be right: rbx is then lost. */
static void step_caller_rbx(const perf__unwind_row_t *row, uintptr_t cfa, frame_t *f) {
  if (row->rbx_rule == PERF__REG_SAME) return;
  uintptr_t slot = cfa + 8 * (intptr_t)row->rbx_off8;
  if (row->rbx_rule == PERF__REG_SAVED && slot < f->r.sp && f->exact) return; /* popped */
  f->bx_known = row->rbx_rule == PERF__REG_SAVED && slot >= f->r.sp;
  f->bx_slot = slot;
}

/* The frame's rbx, read from its slot on first use. The slot was checked
   against the sp of the frame that saved it, which lies below this one's. */
static bool frame_rbx(perf__stack_window_t w, frame_t *f, uintptr_t *bx) {
  if (!f->bx_known) return false;
  if (f->bx_slot) {
    if (!read_word(w, w.lo, f->bx_slot, &f->r.bx)) return false;
    f->bx_slot = 0;
  }
  *bx = f->r.bx;
  return true;
}

/* Standard frame: [fp] = caller's fp, [fp + 8] = return address, the frame
   at or above the current sp. `fallback`: standing in for a missing rule
   (a failure is then NO_RULE, and rbp of 0 says nothing: CFI code uses rbp
   as a general register), rather than walking frame pointers by choice. */
static int step_frame_pointer(perf__stack_window_t w, frame_t *f, bool fallback) {
  if (!f->fp_known) return PERF__WALK_NO_RULE;
  if (f->r.fp == 0) return fallback ? PERF__WALK_NO_RULE : PERF__WALK_COMPLETE;
  /* A frame below the current one: a loop in the chain, or garbage. */
  if (f->r.fp < f->r.sp) return fallback ? PERF__WALK_NO_RULE : PERF__WALK_NOT_ASCENDING;
  uintptr_t next_fp, ra;
  if (!read_word(w, f->r.sp, f->r.fp, &next_fp) || !read_word(w, f->r.sp, f->r.fp + 8, &ra))
    return fallback ? PERF__WALK_NO_RULE : PERF__WALK_BAD_READ;
  ra = perf__arch_strip_ra(ra);
  /* aarch64: a leaf (GCC builds leaves without a frame record) still has
     its return address in x30; the record at fp is its caller's. Step to
     x30 first when it is a return address other than the record's (as
     libdwfl's aarch64 fallback does). */
  uintptr_t lr;
  if (perf__arch.ra_in_bx && f->exact && frame_rbx(w, f, &lr) &&
      (lr = perf__arch_strip_ra(lr)) != ra && lr >= 4096 && f->map &&
      perf__module_map_find(f->map->modules, lr - 1)) {
    f->r.pc = lr;
    f->exact = false;
    f->same_sp = true;
    return STEP_OK;
  }
  if (ra == 0) return PERF__WALK_COMPLETE;
  f->r = (perf__unwind_regs_t){.pc = ra, .sp = f->r.fp + 16, .fp = next_fp};
  f->exact = false;
  f->sp_guess = perf__arch.ra_in_bx;
  return STEP_OK;
}

/* A walk that started without rbp (a thread blocked in a system call: only
   its pc and sp are known) reached a frame whose CFA is rbp + 16 before any
   inner frame had saved rbp: the live rbp is this frame's own frame
   pointer, pointing at its record [caller's rbp][return address] somewhere
   above its sp. Search the frame for it. The frame's uninitialised locals
   may hold stale records, left by earlier calls deeper than this frame's
   caller, that pass every check a record alone allows (a real saved rbp, a
   real return site); which record is real is a heuristic, used only here,
   and a wrong pick shows as a wrong caller or an earlier end:
    - a candidate's return address must lie in a module, where the caller's
      rule lets its own return address be checked too (see
      frame_record_ok): garbage rarely passes;
    - a candidate in a module whose rules are still to be compiled cannot
      be checked: the walk ends there (PERF__WALK_RULES_PENDING, the
      candidate's return address last) and the capture compiles that
      module and walks again (a stale record of the dynamic linker's, left
      by a lazy binding, was taken for the real one before);
    - the real record's return address follows the call that entered this
      frame's function, and its caller's return address the call that
      entered the caller (call_enters: a direct call names its target,
      compared with the function starts the FDEs give); a stale record's
      call went into whatever function ran there before. Candidates rank:
      (1) the call seen entering this function, the caller's call not seen
      entering another: the lowest such is taken at once; (2) the call
      seen entering this function, the caller's entering another (the
      caller was entered by a tail call; or the record is an earlier
      call's of this function, its caller's record overwritten since);
      (3) neither call seen going elsewhere (an indirect call, a call
      through a PLT stub from another module, code that cannot be read);
      (4) the rest (this function entered by a tail call, or a cold part
      with its own FDE, or through a thunk: the real record's call names
      another function too). While no candidate of rank 1 is found the
      search goes on, past the caller's record of the best pick so far (a
      stale record lower in the frame can claim a caller whose record lies
      below the real one), up to FP_SCAN_BYTES; it skips the records on
      the chain of saved rbps of the rank-3 pick: if that pick is this
      frame's record, they are its callers' (an outer activation of this
      same function must not be taken for this one);
    - within ranks 2 to 4 the lowest candidate wins, but a record left
      lower in the frame by an earlier call of the same caller points at
      the same caller's record as the real one, which is the highest of
      them (the real one sits at the frame's top): among candidates with
      the same saved rbp, the highest below it wins. Not for a saved rbp
      of 0 (a caller without a frame pointer): every outer record whose
      caller has none shares it, and the highest would skip to the
      thread's start.
   Limits: a stale record of an earlier call of this same function, from a
   caller whose record is intact, is taken when it lies lower than the real
   one or when the real call cannot be told; where neither the real call
   nor a stale one can be told, the lowest wins (the stale one); and where
   the real record ranks 2 or 4, an outer activation of this function
   entered by a direct call within FP_SCAN_BYTES ranks 1 and is taken, the
   frames between lost. Cost: the code before each candidate's return
   address, and before its caller's, is read by a system call (~2 us), up
   to the first candidate of rank 1: a few on a stack of frame-pointer
   code; otherwise about one per frame without a frame pointer within
   FP_SCAN_BYTES. Returns STEP_OK, PERF__WALK_NO_RULE or
   PERF__WALK_RULES_PENDING (f->pending_pc). */
static int scan_frame_pointer(const perf__unwind_row_t *row, perf__stack_window_t w, frame_t *f) {
  if (row->rbp_rule != PERF__REG_SAVED || row->rbp_off != -row->cfa_off || row->cfa_off != 16)
    return PERF__WALK_NO_RULE;
  f->fp_scan = false; /* once: the frames above have their rbp from here on */
  uintptr_t end = f->r.sp + FP_SCAN_BYTES < w.hi ? f->r.sp + FP_SCAN_BYTES : w.hi;
  uintptr_t fn_pc = f->exact ? f->r.pc : f->r.pc - 1;
  uintptr_t entered = 0;     /* the first candidate of rank 1 (see above) */
  pick_t entered_only = {0}; /* rank 2: its call entered this function, the caller's not */
  pick_t untold = {0};       /* rank 3: neither call seen going elsewhere */
  pick_t any = {0};          /* rank 4 */
  uintptr_t chain = 0;       /* the next record up the rank-3 pick's chain of saved rbps */
  for (uintptr_t a = (f->r.sp + 7) & ~(uintptr_t)7; a + 16 <= end && !entered; a += 8) {
    if (a == chain) { /* an outer frame's record, if the rank-3 pick is this frame's */
      uintptr_t next;
      chain = read_word(w, a, a, &next) && next > a ? next : 0;
      continue;
    }
    record_t rec;
    int ok = frame_record_ok(f, w, a, &rec);
    if (ok == RECORD_PENDING) {
      f->pending_pc = rec.ra;
      return PERF__WALK_RULES_PENDING;
    }
    if (ok != RECORD_OK) continue;
    pick_offer(&any, a, rec.next_fp);
    int call = call_enters(f->map, rec.ra, rec.code_read ? rec.code : NULL, fn_pc);
    if (call == CALL_MISMATCH) continue;
    int caller_call =
        rec.caller_ra ? call_enters(f->map, rec.caller_ra, NULL, rec.ra - 1) : CALL_UNKNOWN;
    if (call == CALL_MATCH && caller_call != CALL_MISMATCH) {
      entered = a;
    } else if (call == CALL_MATCH) {
      pick_offer(&entered_only, a, rec.next_fp);
    } else if (caller_call != CALL_MISMATCH) {
      pick_offer(&untold, a, rec.next_fp);
      if (untold.at == a) chain = untold.next_fp > a ? untold.next_fp : 0;
    }
  }
  uintptr_t best = entered           ? entered
                   : entered_only.at ? entered_only.at
                   : untold.at       ? untold.at
                                     : any.at;
  if (!best) return PERF__WALK_NO_RULE;
  f->r.fp = best;
  f->fp_known = true;
  return STEP_OK;
}

/* Offer the candidate record at a (saved rbp next_fp) to a positional pick:
   taken when it is the first, or when it shares the pick's saved rbp (not
   0) and lies below it; never once the scan passed the pick's saved rbp
   (the pick's caller's record: above it lie outer frames). */
static void pick_offer(pick_t *p, uintptr_t a, uintptr_t next_fp) {
  if (p->at && p->next_fp > p->at && a >= p->next_fp) return;
  if (!p->at || (next_fp != 0 && next_fp == p->next_fp)) {
    p->at = a;
    p->next_fp = next_fp;
  }
}

/* Whether [a] [a + 8] can be a frame record (saved rbp, return address)
   whose caller's own return address checks out: through the caller's rbp
   when it keeps a frame pointer, through its CFA when that is rsp-based.
   RECORD_PENDING when the return address (rec->ra) lies in a module whose
   rules are still to be compiled. Fills *rec (the code before the return
   address, and the caller's return address) for the call checks. */
static int frame_record_ok(const frame_t *f, perf__stack_window_t w, uintptr_t a, record_t *rec) {
  const perf__unwind_row_t *caller, *unused;
  rec->caller_ra = 0;
  rec->code_read = false;
  if (!read_word(w, f->r.sp, a, &rec->next_fp) || !read_word(w, f->r.sp, a + 8, &rec->ra))
    return RECORD_NO;
  rec->ra = perf__arch_strip_ra(rec->ra);
  if (!return_address(f->map, rec->ra, &caller)) return RECORD_NO;
  /* The code before a return address is a call (code that cannot be read,
     as in the walker's tests, is not checked). */
  rec->code_read = perf__memory_copy(rec->code, rec->ra - 8, sizeof rec->code) == sizeof rec->code;
  if (rec->code_read && !perf__arch_return_site(rec->code)) return RECORD_NO;
  /* A call never changes its caller's CFA: a row that starts exactly at
     ra (a function's first byte: ASan's frame headers hold one) is not
     what follows a call. */
  module_t m = {NULL, NULL};
  bool pending = false;
  const perf__unwind_row_t *at = find_row(f->map, rec->ra, &m, NULL, &pending);
  if (pending) return RECORD_PENDING;
  if (at && m.m && at->pc == (uint32_t)(rec->ra - m.m->bias)) return RECORD_NO;
  if (!caller) return RECORD_OK; /* a module without rules: nothing more to check */
  uintptr_t ra2;
  switch (caller->cfa_kind) {
  case PERF__CFA_OUTERMOST: return RECORD_OK;
  case PERF__CFA_RBP:
    if (rec->next_fp <= a + 8 || (rec->next_fp & 7) || !read_word(w, a, rec->next_fp + 8, &ra2))
      return RECORD_NO;
    break;
  case PERF__CFA_RSP: {
    uintptr_t cfa = a + 16 + (intptr_t)caller->cfa_off;
    if (cfa <= a + 16 || !read_word(w, a, cfa - 8, &ra2)) return RECORD_NO;
    break;
  }
  default: return RECORD_NO; /* rules this check cannot follow */
  }
  ra2 = perf__arch_strip_ra(ra2);
  if (ra2 != 0 && !return_address(f->map, ra2, &unused)) return RECORD_NO;
  rec->caller_ra = ra2;
  return RECORD_OK;
}

/* Whether the call before return address ra (code: the bytes from ra - 8,
   or NULL to read them here) entered the function holding fn_pc (a lookup
   address: an exact pc, or a return address - 1). CALL_MATCH: a direct
   call to that function's first byte; CALL_MISMATCH: a direct call to
   another function's first byte; CALL_UNKNOWN: it cannot be told (an
   indirect call; a target that starts no function: a PLT stub, the call
   crossing modules, or code without CFI; code that cannot be read; a
   module without compiled rules). */
static int call_enters(const perf__unwind_map_t *map, uintptr_t ra, const uint8_t *code,
                       uintptr_t fn_pc) {
  uint8_t buf[PERF__ARCH_RETURN_SITE_BYTES];
  if (!code) {
    if (perf__memory_copy(buf, ra - 8, sizeof buf) != sizeof buf) return CALL_UNKNOWN;
    code = buf;
  }
  uintptr_t target, target_fn, fn;
  if (!perf__arch_call_target(code, ra, &target)) return CALL_UNKNOWN;
  if (!function_start(map, target, &target_fn) || target_fn != target) return CALL_UNKNOWN;
  if (!function_start(map, fn_pc, &fn)) return CALL_UNKNOWN;
  return fn == target ? CALL_MATCH : CALL_MISMATCH;
}

/* The address of the first byte of the function holding pc, from the
   function starts of its module's rules (false: no module, or rules not
   compiled, or none starts at or below pc). */
static bool function_start(const perf__unwind_map_t *map, uintptr_t pc, uintptr_t *start) {
  const perf__module_t *m = perf__module_map_find(map->modules, pc);
  if (!m) return false;
  const perf__unwind_table_t *t =
      __atomic_load_n(&map->tables[m - map->modules->modules], __ATOMIC_ACQUIRE);
  uint32_t s;
  if (!t || t == &perf__unwind_table_pending || !perf__unwind_table_function(t, pc - m->bias, &s))
    return false;
  *start = m->bias + s;
  return true;
}

/* Whether ra can be a return address: in a known module, with a known rule
   there when the module has rules (*row: that rule, or NULL). */
static bool return_address(const perf__unwind_map_t *map, uintptr_t ra,
                           const perf__unwind_row_t **row) {
  module_t m = {NULL, NULL};
  *row = NULL;
  if (ra < 4096) return false;
  bool pending = false;
  *row = find_row(map, ra - 1, &m, NULL, &pending);
  if (!m.m) return false;
  if (pending) return true; /* rules not compiled yet: as a module without them */
  if (m.table && (!*row || (*row)->cfa_kind == PERF__CFA_UNKNOWN)) return false;
  return true;
}
