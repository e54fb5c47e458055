/*
 * return_site.c - whether an address can follow an aarch64 call (see
 * perf__arch_return_site in sdk/sampler/arch.h). Pure decoding of bytes
 * the caller read.
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
