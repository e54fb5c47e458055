/*
 * plt.h - the PLT stubs of an ELF module named as gdb and objdump name
 * them (BFD's synthetic symbols): `clock_gettime@plt` for the stub that
 * jumps through the GOT slot of clock_gettime, `*ABS*+0x9f550@plt` for a
 * slot an IRELATIVE relocation fills. A stub has no symbol of its own in
 * .symtab or .dynsym; without these, a frame sampled in one would be
 * unnamed where gdb names it.
 *
 * Read from the module's own sections (a separate debug file has none of
 * them): each stub of .plt, .plt.sec and .plt.got is decoded to the GOT
 * slot it jumps through (x86_64: `jmp *disp(%rip)`, after `endbr64` and
 * `bnd` when present; aarch64: `adrp x16` + `ldr x17, [x16, #off]`, after
 * `bti c` when present), and the dynamic relocation of that slot
 * (.rela.plt, .rela.dyn) names the function. Other machines: no stubs.
 * Off the signal handler; no state.
 */
#ifndef PERF_SYMBOLS_PLT_H
#define PERF_SYMBOLS_PLT_H

#include <gelf.h>
#include <stdint.h>

/* Called once per named stub covering [addr, addr + size): `symbol` is the
   dynamic symbol its slot's relocation names (owned by the Elf), or NULL
   for a relocation without one (shown as "*ABS*"); `addend` the
   relocation's addend (shown "+0x<addend>" when not 0). Returns 0, or a
   negative perf_error_t that stops the walk and is returned. */
typedef int (*perf__plt_fn)(void *ctx, uint64_t addr, uint64_t size, const char *symbol,
                            uint64_t addend);

/* Every PLT stub of elf that can be named, in no particular order. Returns
   0 (also for a module without stubs, or of another machine), the first
   error fn returned, or PERF_E_NO_MEMORY. */
int perf__plt_each(Elf *elf, perf__plt_fn fn, void *ctx);

#endif
