/*
 * symbols_fixture.c - a small program for test_perf_symbols: built several
 * ways (tests/collector/CMakeLists.txt); FIXTURE_ID makes each build's code,
 * and so its GNU build-id, differ.
 */
#include <stdio.h>

int main(void) {
  printf("symbols fixture %d\n", FIXTURE_ID);
  return 0;
}
