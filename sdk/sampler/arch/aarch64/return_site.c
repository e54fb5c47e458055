/*
 * return_site.c - whether an address can follow an aarch64 call, and where
 * a bl went (see perf__arch_return_site and perf__arch_call_target in
 * sdk/sampler/arch.h). Pure decoding of bytes the caller read.
 */
#include <string.h>

#include "sdk/sampler/arch.h"

static uint32_t insn_at(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v); /* little-endian, as the code */
  return v;
}

bool perf__arch_return_site(const uint8_t *code) {
  uint32_t before = insn_at(code + 4);
  if ((before & 0xfc000000u) == 0x94000000u) return true; /* bl */
  if ((before & 0xfffffc1fu) == 0xd63f0000u) return true; /* blr */
  if ((before & 0xfefff800u) == 0xd63f0800u) return true; /* blraa, blrab, blraaz, blrabz */
  /* the signal trampoline: mov x8, #139 (rt_sigreturn); svc #0 */
  return insn_at(code + 8) == 0xd2801168u && insn_at(code + 12) == 0xd4000001u;
}

bool perf__arch_call_target(const uint8_t *code, uintptr_t ra, uintptr_t *target) {
  uint32_t before = insn_at(code + 4);
  if ((before & 0xfc000000u) != 0x94000000u) return false; /* bl */
  uint32_t imm26 = before & 0x03ffffffu;
  int64_t words = (int64_t)imm26 - ((imm26 & 0x02000000u) ? (int64_t)1 << 26 : 0);
  *target = ra - 4 + (uintptr_t)(words * 4);
  return true;
}
