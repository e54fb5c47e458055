/*
 * backtrace_demo.c - starts a few threads parked in recognisable call chains
 * (a busy loop, a blocking read on a pipe, a sleep) and prints the stacks of
 * every thread of the process with perf_backtrace_all_threads_text().
 *
 * Build and run: ./scripts/demo.sh
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf_sdk.h"

#define NOINLINE __attribute__((noinline))

static atomic_int g_stop;
static atomic_int g_ready;
static int g_pipe[2];
static volatile unsigned long g_sink;

/* A checksum that never finishes: the "CPU spike". */
static NOINLINE unsigned long checksum_forever(unsigned long seed) {
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed))
    seed = seed * 6364136223846793005UL + 1442695040888963407UL;
  return seed;
}
static NOINLINE unsigned long render_frame(unsigned long seed) {
  return checksum_forever(seed) + 1;
}
static void *render_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "render");
  atomic_fetch_add(&g_ready, 1);
  g_sink = render_frame(42);
  return NULL;
}

/* A read that waits for data that never comes: the "hang". */
static NOINLINE long wait_for_reply(int fd) {
  char c;
  long n = read(fd, &c, 1);
  return n + 1;
}
static NOINLINE long fetch_config(int fd) {
  return wait_for_reply(fd) * 2;
}
static void *network_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "network");
  atomic_fetch_add(&g_ready, 1);
  g_sink = (unsigned long)fetch_config(g_pipe[0]);
  return NULL;
}

/* A periodic job that sleeps between runs. */
static NOINLINE int nap(void) {
  struct timespec ts = {0, 200 * 1000 * 1000};
  return nanosleep(&ts, NULL);
}
static NOINLINE void housekeeping_loop(void) {
  while (!atomic_load(&g_stop))
    g_sink += (unsigned long)nap();
}
static void *housekeeping_thread(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "housekeeping");
  atomic_fetch_add(&g_ready, 1);
  housekeeping_loop();
  return NULL;
}

int main(void) {
  if (pipe(g_pipe) != 0) return 1;
  pthread_t t[3];
  pthread_create(&t[0], NULL, render_thread, NULL);
  pthread_create(&t[1], NULL, network_thread, NULL);
  pthread_create(&t[2], NULL, housekeeping_thread, NULL);
  while (atomic_load(&g_ready) < 3)
    usleep(1000);
  usleep(50 * 1000); /* let each thread reach its innermost call */

  char *text = NULL;
  int err = perf_backtrace_all_threads_text(&text);
  if (err) {
    fprintf(stderr, "perf_backtrace_all_threads_text: %s\n", perf_strerror(err));
    return 1;
  }
  printf("sampler signal: %d\n\n%s", perf_sampler_signal(), text);
  perf_free(text);

  atomic_store(&g_stop, 1);
  if (write(g_pipe[1], "x", 1) != 1) return 1;
  for (int i = 0; i < 3; i++)
    pthread_join(t[i], NULL);
  return 0;
}
