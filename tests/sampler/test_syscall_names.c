/*
 * test_syscall_names.c - every system call number the kernel can report
 * has its name (sdk/sampler/syscall_names.h, built from the target's
 * <sys/syscall.h>):
 *  - abi_numbers: numbers fixed by each architecture's kernel ABI (written
 *    here, not taken from a header) named, restart_syscall (what a call
 *    interrupted by a stop sleeps on in) among them; a number the kernel
 *    has not is "syscall N", none (-1) is "". Also in the aarch64 stage.
 *  - kernel_header (x86_64): every `#define __NR_<name> <number>` of the
 *    kernel's own header (asm/unistd_64.h, read as text) is named <name>,
 *    and no other number has a name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sdk/sampler/sample_state.h"

#define CHECK_EQ_STR(a, b) CHECKF(strcmp((a), (b)) == 0, "\"%s\" != \"%s\"", (a), (b))

typedef struct abi_call_s {
  long nr;
  const char *name;
} abi_call_t;

static const abi_call_t ABI[] = {
#if defined(__x86_64__)
    {0, "read"},
    {1, "write"},
    {7, "poll"},
    {39, "getpid"},
    {202, "futex"},
    {219, "restart_syscall"},
    {230, "clock_nanosleep"},
    {231, "exit_group"},
    {426, "io_uring_enter"},
    {450, "set_mempolicy_home_node"},
#elif defined(__aarch64__)
    {0, "io_setup"},
    {63, "read"},
    {64, "write"},
    {94, "exit_group"},
    {98, "futex"},
    {115, "clock_nanosleep"},
    {128, "restart_syscall"},
    {172, "getpid"},
    {426, "io_uring_enter"},
    {450, "set_mempolicy_home_node"},
#else
#error "the kernel ABI numbers of this architecture are not written here"
#endif
};

static void case_abi_numbers(void) {
  char call[32];
  for (size_t i = 0; i < ARRAY_LEN(ABI); i++) {
    const char *name = perf__syscall_name(ABI[i].nr);
    CHECKF(name && strcmp(name, ABI[i].name) == 0, "%ld: %s, want %s", ABI[i].nr,
           name ? name : "(none)", ABI[i].name);
    perf__syscall_label(ABI[i].nr, call, sizeof call);
    CHECK_EQ_STR(call, ABI[i].name);
  }
  CHECK(perf__syscall_name(100000) == NULL);
  perf__syscall_label(100000, call, sizeof call);
  CHECK_EQ_STR(call, "syscall 100000");
  perf__syscall_label(-1, call, sizeof call);
  CHECK_EQ_STR(call, "");
}

#ifdef PERF_KERNEL_UNISTD_H
static void case_kernel_header(void) {
  FILE *f = fopen(PERF_KERNEL_UNISTD_H, "r");
  CHECKF(f != NULL, "cannot open %s", PERF_KERNEL_UNISTD_H);
  static char kernel[4096][64]; /* the kernel's name of each number, "" none */
  long count = 0, max = -1;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    char name[64];
    long nr;
    if (sscanf(line, "#define __NR_%63s %ld", name, &nr) != 2) continue;
    CHECKF(nr >= 0 && nr < 4096, "%s", line);
    CHECKF(!kernel[nr][0], "%ld twice in the header", nr);
    snprintf(kernel[nr], sizeof kernel[nr], "%s", name);
    count++;
    if (nr > max) max = nr;
  }
  fclose(f);
  CHECKF(count >= 300, "%ld calls in %s", count, PERF_KERNEL_UNISTD_H);
  long named = 0;
  for (long nr = 0; nr < 4096; nr++) {
    const char *name = perf__syscall_name(nr);
    if (kernel[nr][0])
      CHECKF(name && strcmp(name, kernel[nr]) == 0, "%ld: %s, the kernel's %s", nr,
             name ? name : "(none)", kernel[nr]);
    else
      CHECKF(!name, "%ld: named %s, the kernel has no such call", nr, name);
    named += name != NULL;
  }
  CHECK_EQ_INT(named, count);
  fprintf(stderr, "%ld calls named as %s names them (0..%ld)\n", count, PERF_KERNEL_UNISTD_H, max);
}
#endif

static const test_case_t g_cases[] = {
    TEST_CASE(abi_numbers),
#ifdef PERF_KERNEL_UNISTD_H
    TEST_CASE(kernel_header),
#endif
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
