/*
 * check.h - the assertion macros every test program uses. A failed check
 * prints the file, line and expression (plus a formatted detail) to stderr
 * and exits the test process with status 1; ctest runs each test program in
 * its own process with a timeout.
 */
#ifndef PERF_TEST_CHECK_H
#define PERF_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                     \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#define CHECKF(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n  ", __FILE__, __LINE__, #cond);                   \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fputc('\n', stderr);                                                                         \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
  do {                                                                                             \
    long long check_a_ = (long long)(a), check_b_ = (long long)(b);                                \
    CHECKF(check_a_ == check_b_, "%s = %lld, %s = %lld", #a, check_a_, #b, check_b_);              \
  } while (0)

/* The functions of a test's call chains: never inlined, cloned or merged
   (gcc's noipa), kept even when unused, so their frames really exist. */
#if defined(__clang__)
#define CHAIN __attribute__((noinline, used))
#else
#define CHAIN __attribute__((noinline, noipa, used))
#endif

/* One test program holds many cases; ctest runs each in its own process as
   `program <case>`, and learns the list from `program --list`
   (tests/support/discover_tests.cmake). A case that needs the machine to
   itself says why in `serial`; --list marks it and ctest runs it alone. */
/* The number of elements of an array. */
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

typedef struct test_case_s {
  const char *name;
  void (*run)(void);
  const char *serial; /* NULL, or why the case cannot share the machine */
} test_case_t;

#define TEST_CASE(fn)                                                                              \
  { #fn, case_##fn, NULL }
#define TEST_CASE_SERIAL(fn, why)                                                                  \
  { #fn, case_##fn, why }

/* Run the case named `name` from cases[0..n); false when there is none. */
static inline int test_run_case(const test_case_t *cases, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(cases[i].name, name) == 0) {
      cases[i].run();
      return 1;
    }
  }
  return 0;
}

/* `--list`: one line per case, "<name>" or "<name> serial". */
static inline void test_list_cases(const test_case_t *cases, size_t n) {
  for (size_t i = 0; i < n; i++)
    printf("%s%s\n", cases[i].name, cases[i].serial ? " serial" : "");
}

/* The main of a test program: --list, or run the one case named. */
static inline int test_main(const test_case_t *cases, size_t n, int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    test_list_cases(cases, n);
    return 0;
  }
  if (argc == 2 && test_run_case(cases, n, argv[1])) return 0;
  fprintf(stderr, "usage: %s --list | <case>\n", argv[0]);
  return 2;
}

#endif
