/*
 * unwind_targets.c - the frame shapes real code has, for the unwind
 * validator to single-step (see unwind_targets.h): a leaf without a frame,
 * callee-saved registers pushed and popped, tail calls (after pops, too),
 * recursion, calls through the PLT into libc, variable-length and alloca
 * frames, an over-aligned (realigned) frame, an indirect call, a signal
 * handler entered from libc, and libc's own code driven through callbacks.
 * Built in each flavour of tests/sampler/CMakeLists.txt (-O0, -O2, -O3,
 * with and without frame pointers). Runs in the validator's forked child.
 */
#include "unwind_targets.h"

#include <alloca.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

volatile unsigned long g_target_sink;
/* Opaque to the optimizer: sizes and strings it cannot fold. */
static volatile int g_size = 24;
static const char *volatile g_text = "unwind validator text";

CHAIN unsigned long target_leaf(unsigned long x) {
  for (int i = 0; i < 3; i++)
    x = x * 6364136223846793005UL + 1442695040888963407UL;
  return x;
}

/* Values live across calls: callee-saved registers pushed and popped. */
CHAIN unsigned long target_saves(unsigned long a, unsigned long b) {
  unsigned long c = target_leaf(a), d = target_leaf(b), e = target_leaf(c ^ d);
  return (a + b) * (c + d) + e;
}

/* A sibling call (at -O2 and -O3): the jump reuses this frame. */
CHAIN unsigned long target_tail(unsigned long x) {
  return target_saves(x + 1, x);
}

/* Registers popped, then a tail call. */
CHAIN unsigned long target_tail_after_pops(unsigned long x) {
  unsigned long a = target_leaf(x), b = target_leaf(a);
  return target_tail(a ^ b ^ x);
}

CHAIN unsigned long target_recurse(int depth, unsigned long x) {
  if (depth == 0) return target_leaf(x);
  return target_recurse(depth - 1, x + 1) * 3;
}

/* Through the PLT into libc (and a system call). */
CHAIN size_t target_plt(const char *s) {
  char buf[64];
  size_t n = strlen(s);
  memcpy(buf, s, n + 1);
  return n + strlen(buf) + (size_t)getppid() % 2;
}

CHAIN unsigned long target_vla(int n) {
  volatile char buf[n];
  for (int i = 0; i < n; i++)
    buf[i] = (char)i;
  return target_leaf((unsigned long)buf[n - 1]) + (unsigned long)n;
}

CHAIN unsigned long target_alloca(int n) {
  volatile char *p = alloca((size_t)n);
  p[0] = 1;
  p[n - 1] = 2;
  return target_leaf((unsigned long)p[0]) + (unsigned long)p[n - 1];
}

/* An over-aligned local: the frame is realigned. */
CHAIN unsigned long target_aligned(unsigned long x) {
  _Alignas(64) volatile unsigned long a[8];
  for (int i = 0; i < 8; i++)
    a[i] = x + (unsigned long)i;
  return target_leaf(a[3]);
}

/* Several returns: each with its own epilogue at -O2. */
CHAIN unsigned long target_branches(unsigned long x) {
  if (x % 3 == 0) return target_leaf(x) + 1;
  unsigned long y = target_leaf(x ^ 5);
  if (y % 2) return y + target_leaf(y);
  return y * 7;
}

CHAIN unsigned long target_indirect(unsigned long (*fn)(unsigned long), unsigned long x) {
  return fn(x) + 1;
}

void targets_signal_handler(int sig) {
  g_target_sink += target_leaf((unsigned long)sig);
}

/* raise(): the signal arrives inside libc, the handler runs on top of it. */
CHAIN void target_raise(void) {
  raise(SIGUSR1);
  g_target_sink++;
}

void targets_run(void) {
  unsigned long x = 1;
  x += target_leaf(x);
  x += target_saves(x, 2);
  x += target_tail(x);
  x += target_tail_after_pops(x);
  x += target_recurse(3, x);
  x += target_plt(g_text);
  x += target_vla(g_size);
  x += target_alloca(g_size);
  x += target_aligned(x);
  for (unsigned long i = 0; i < 3; i++)
    x += target_branches(x + i);
  x += target_indirect(target_leaf, x);
  target_raise();
  g_target_sink = x;
}

/* ---- libc ---------------------------------------------------------------- */

static int compare_desc(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x < y) - (x > y);
}

/* qsort and bsearch calling back into this program. */
static CHAIN void libc_sort(int n) {
  int *v = malloc((size_t)n * sizeof *v);
  for (int i = 0; i < n; i++)
    v[i] = (i * 7919) % 1009;
  qsort(v, (size_t)n, sizeof *v, compare_desc);
  int key = v[n / 3];
  g_target_sink += bsearch(&key, v, (size_t)n, sizeof *v, compare_desc) != NULL;
  free(v);
}

/* The string functions at sizes that take their different assembly paths. */
static CHAIN void libc_strings(void) {
  static const size_t sizes[] = {3, 17, 100, 700, 5000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    char *a = malloc(n + 1), *b = malloc(n + 1);
    memset(a, 'a' + (int)i, n);
    a[n] = '\0';
    memcpy(b, a, n + 1);
    memmove(b + 1, b, n - 1);
    g_target_sink += strlen(a) + (size_t)(strchr(a, 'z') != NULL) + (size_t)strcmp(a, b) +
                     (size_t)memcmp(a, b, n) + (size_t)(strstr(a, "ab") != NULL);
    strcpy(b, a);
    free(b);
    free(a);
  }
}

/* printf's integer, string and floating-point paths, and parsing back. */
static CHAIN void libc_format(void) {
  char line[256];
  int len = snprintf(line, sizeof line, "%d %5s|%-8x %p %c %.3f %g %e %ld %%", g_size, g_text,
                     0xbeefu, (void *)line, 'q', 3.25, 1e-7, 6.02e23, (long)-42);
  double d = strtod("2.718281828", NULL);
  int x = 0;
  g_target_sink += (size_t)len + (size_t)d + (size_t)sscanf(line, "%d", &x) + (size_t)x;
  g_target_sink += (size_t)printf("%s %d\n", g_text, x); /* buffered: the child never flushes */
}

/* The allocator's small, medium and mmap'd sizes, calloc and realloc. */
static CHAIN void libc_memory(void) {
  static const size_t sizes[] = {16, 200, 4000, 300000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    char *p = malloc(sizes[i]), *q = calloc(sizes[i] / 8 + 1, 8);
    p[0] = q[0];
    p = realloc(p, sizes[i] * 2);
    g_target_sink += (size_t)p[0];
    free(q);
    free(p);
  }
}

/* stdio on a real file, down to its system calls. */
static CHAIN void libc_stdio(void) {
  FILE *f = fopen("/dev/null", "w");
  if (!f) return;
  fprintf(f, "%s %d\n", g_text, g_size);
  fputs(g_text, f);
  fwrite(g_text, 1, 5, f);
  fflush(f);
  fclose(f);
}

static jmp_buf g_jump;

static CHAIN void libc_jump_away(void) {
  longjmp(g_jump, 1);
}

/* setjmp and longjmp: glibc's hand-written assembly. */
static CHAIN void libc_jumps(void) {
  if (setjmp(g_jump) == 0) libc_jump_away();
  g_target_sink++;
}

/* The vDSO's clock and a plain system call. */
static CHAIN void libc_time(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  g_target_sink += (size_t)ts.tv_nsec + (size_t)getpid();
}

void targets_run_libc(void) {
  libc_sort(g_size * 8);
  libc_strings();
  libc_format();
  libc_memory();
  libc_stdio();
  libc_jumps();
  libc_time();
}
