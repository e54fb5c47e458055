/*
 * plt_ibt.c - a program built with x86_64's indirect branch tracking
 * (-fcf-protection, -z ibtplt), so its calls into libc go through the IBT
 * PLT: `endbr64; bnd jmp *slot` stubs in .plt.sec, the lazy entries in
 * .plt. test_symtab names its stubs against gdb; it is never run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  char *copy = argc > 1 ? realpath(argv[1], NULL) : NULL;
  printf("%d %lld %s\n", (int)getpid(), (long long)t.tv_sec, copy ? copy : argv[0]);
  free(copy);
  return 0;
}
