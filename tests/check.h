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

#endif
