/*
 * return_site.c - whether an address can follow an x86_64 call, and where
 * a direct call went (see perf__arch_return_site and perf__arch_call_target
 * in sdk/sampler/arch.h): decodes the call forms compilers emit before a
 * return address. Pure decoding of bytes the caller read.
 */
#include <string.h>

#include "sdk/sampler/arch.h"

/* The length of a `call r/m64` (ff /2) whose ff byte is at insn[0], from
   its ModRM (and SIB) byte: 0 when insn[1] is no call's ModRM. `avail`
   bytes are readable from insn. */
static size_t indirect_call_len(const uint8_t *insn, size_t avail) {
  if (avail < 2 || insn[0] != 0xff || (insn[1] & 0x38) != 0x10) return 0;
  unsigned mod = insn[1] >> 6, rm = insn[1] & 7;
  if (mod == 3) return 2; /* call *%reg */
  size_t len = 2;
  if (rm == 4) { /* a SIB byte follows */
    if (avail < 3) return 0;
    len++;
    if (mod == 0 && (insn[2] & 7) == 5) len += 4; /* no base: disp32 */
  } else if (mod == 0 && rm == 5) {
    len += 4; /* call *disp32(%rip) */
  }
  if (mod == 1) len += 1;
  if (mod == 2) len += 4;
  return len;
}

bool perf__arch_return_site(const uint8_t *code) {
  const uint8_t *ra = code + 8;
  /* glibc's __restore_rt: mov $15, %rax (rt_sigreturn); syscall */
  static const uint8_t restore_rt[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  if (memcmp(ra, restore_rt, sizeof restore_rt) == 0) return true;
  if (ra[-5] == 0xe8) return true; /* call rel32 */
  for (size_t len = 2; len <= 7; len++)
    if (indirect_call_len(ra - len, len) == len) return true;
  return false;
}

bool perf__arch_call_target(const uint8_t *code, uintptr_t ra, uintptr_t *target) {
  if (code[3] != 0xe8) return false; /* call rel32: e8, then 4 bytes to ra */
  int32_t rel;
  memcpy(&rel, code + 4, sizeof rel);
  *target = ra + (uintptr_t)(intptr_t)rel;
  return true;
}
