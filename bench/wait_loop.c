/*
 * wait_loop.c - a loop that never waits long, for bench/preload_bench.sh:
 * N rounds of poll() with a one-second timeout on a pipe that always has
 * data, so each call returns at once and counts as a blocking wait (under
 * libperfsdk-preload.so: a watched loop's idle and busy marks around each).
 * Prints the nanoseconds per round. Not linked with the SDK.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 2000000;
  int fds[2];
  if (pipe(fds) != 0 || write(fds[1], "x", 1) != 1) return 1;
  struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < rounds; i++)
    if (poll(&pfd, 1, 1000) != 1) return 1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
  printf("%.1f\n", ns / (double)rounds);
  return 0;
}
