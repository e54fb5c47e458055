/*
 * call_record.h - the unwind validator's ground truth: the return addresses
 * a single-stepped process really has on its stack, recorded from the
 * calls, returns and signal deliveries seen one instruction at a time
 * (tests/sampler/unwind_oracle.c). Independent of any call-frame
 * information: where a frame's return address lies is known from the call
 * that pushed it, and the frame is gone once sp has moved above that slot
 * (ret, longjmp, sigreturn; a tail call's epilogue never touches it). The
 * address itself is read from the slot when the stack is asked for: code
 * that rewrites its return address (libgcc's __builtin_eh_return, which
 * "returns" into a landing pad) returns where the slot says.
 *
 * Runs in the validator's parent process, on the test's main thread.
 */
#ifndef PERF_TEST_CALL_RECORD_H
#define PERF_TEST_CALL_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CALL_RECORD_MAX 4096

/* Slot of a frame pushed before the record started, never popped in it. */
#define CALL_RECORD_OUTER UINTPTR_MAX

typedef struct {
  uintptr_t slot; /* stack address of the return address (of the interrupted pc) */
  uintptr_t pc;   /* the return address when pushed, or the exact interrupted pc */
  bool fixed;     /* pc is not read back from the slot (interrupted pc, outer frames) */
} call_entry_t;

/* Reads the word at a stack address of the stepped process. */
typedef bool (*call_record_read_fn)(void *ctx, uintptr_t addr, uintptr_t *out);

/* Outermost first: slots strictly decrease towards the top of the array. */
typedef struct {
  call_entry_t entries[CALL_RECORD_MAX];
  size_t count;
} call_record_t;

/* Start from the frames that exist already: `outer[0..n)` innermost first;
   only outer[0]'s slot is known (`first_slot`), the rest are never popped
   while the record runs. */
void call_record_init(call_record_t *r, const uintptr_t *outer, size_t n, uintptr_t first_slot);

/* One instruction ran: from (prev_pc, prev_sp) to (pc, sp); `top_word` is
   the word now at sp. Records a call (sp went down by 8 and the word at sp
   is a return address just after prev_pc while pc jumped elsewhere) and
   forgets every slot now below sp. */
void call_record_step(call_record_t *r, uintptr_t prev_pc, uintptr_t prev_sp, uintptr_t pc,
                      uintptr_t sp, uintptr_t top_word);

/* A signal handler was entered at sp, interrupting `interrupted_pc`: the
   kernel put the trampoline's address (`restorer`) at sp and the
   interrupted context just above it. */
void call_record_signal(call_record_t *r, uintptr_t sp, uintptr_t restorer,
                        uintptr_t interrupted_pc);

/* Forget the slots below sp (registers were set back by hand). */
void call_record_pop_to(call_record_t *r, uintptr_t sp);

/* The true stack at pc: pcs[0] = pc, then the recorded frames, innermost
   first, each read from its slot. Returns the number written (at most
   max). */
size_t call_record_stack(const call_record_t *r, uintptr_t pc, call_record_read_fn read, void *ctx,
                         uintptr_t *pcs, size_t max);

#endif
