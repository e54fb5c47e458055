/*
 * call_record.c - the validator's ground truth from observed calls and
 * returns (see call_record.h). Runs in the validator's parent process.
 */
#include "call_record.h"

#include "check.h"

/* The longest call instruction is 15 bytes (prefixes included); the
   shortest is 2 (call *%rax). */
enum { CALL_MIN_LEN = 2, CALL_MAX_LEN = 15 };

static void push(call_record_t *r, uintptr_t slot, uintptr_t pc, bool fixed);

void call_record_init(call_record_t *r, const uintptr_t *outer, size_t n, uintptr_t first_slot) {
  r->count = 0;
  for (size_t i = n; i-- > 1;)
    push(r, CALL_RECORD_OUTER, outer[i], true);
  if (n > 0) push(r, first_slot, outer[0], false);
}

void call_record_step(call_record_t *r, uintptr_t prev_pc, uintptr_t prev_sp, uintptr_t pc,
                      uintptr_t sp, uintptr_t top_word) {
  call_record_pop_to(r, sp);
  /* A push of a value that happens to point just past the pushing
     instruction, followed by a jump in the same instruction, is a call. */
  if (sp == prev_sp - 8 && top_word - prev_pc >= CALL_MIN_LEN &&
      top_word - prev_pc <= CALL_MAX_LEN && pc != top_word)
    push(r, sp, top_word, false);
}

void call_record_signal(call_record_t *r, uintptr_t sp, uintptr_t restorer,
                        uintptr_t interrupted_pc) {
  call_record_pop_to(r, sp);
  /* The interrupted pc sits "in" the signal frame: gone at sigreturn. */
  push(r, sp + 8, interrupted_pc, true);
  push(r, sp, restorer, false);
}

void call_record_pop_to(call_record_t *r, uintptr_t sp) {
  while (r->count > 0 && r->entries[r->count - 1].slot < sp)
    r->count--;
}

size_t call_record_stack(const call_record_t *r, uintptr_t pc, call_record_read_fn read, void *ctx,
                         uintptr_t *pcs, size_t max) {
  size_t n = 0;
  if (max == 0) return 0;
  pcs[n++] = pc;
  for (size_t i = r->count; i-- > 0 && n < max;) {
    const call_entry_t *e = &r->entries[i];
    pcs[n] = e->pc;
    CHECKF(e->fixed || read(ctx, e->slot, &pcs[n]), "return address slot %#lx unreadable",
           (unsigned long)e->slot);
    n++;
  }
  return n;
}

static void push(call_record_t *r, uintptr_t slot, uintptr_t pc, bool fixed) {
  CHECKF(r->count < CALL_RECORD_MAX, "call record full (%d frames)", CALL_RECORD_MAX);
  CHECKF(r->count == 0 || slot < r->entries[r->count - 1].slot ||
             r->entries[r->count - 1].slot == CALL_RECORD_OUTER,
         "call record: slot %#lx not below %#lx", (unsigned long)slot,
         (unsigned long)r->entries[r->count - 1].slot);
  r->entries[r->count++] = (call_entry_t){slot, pc, fixed};
}
