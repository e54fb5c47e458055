/*
 * hang_phases.c - a hang in read(), a futex and a spin (see hang_phases.h).
 */
#include "hang_phases.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "perf_sdk.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/spool.h"
#include "sdk_util.h"
#include "test_util.h"

#define WAIT_MS 20000

static uint64_t samples_taken(void) {
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  return st.samples_taken;
}

/* Until the SDK has taken `more` samples from now on; the count then. */
static uint64_t wait_samples(uint64_t more) {
  long long end = now_ms() + WAIT_MS;
  uint64_t from = samples_taken(), n;
  while ((n = samples_taken()) < from + more) {
    CHECKF(now_ms() < end, "%llu samples in %d ms", (unsigned long long)(n - from), WAIT_MS);
    sleep_ms(1);
  }
  return n;
}

/* The driver: holds the mutex; ends each phase after its samples. */
static void *drive(void *arg) {
  hang_phases_t *p = arg;
  pthread_mutex_lock(&p->lock);
  atomic_store(&p->locked, 1);
  wait_in_syscall(p->tid, SYS_read, WAIT_MS); /* samples from here on are of the read */
  p->ends[0] = wait_samples(p->phase_samples);
  p->write_lo = now_ns();
  CHECK(write(p->pipe_fd[1], "x", 1) == 1);
  p->write_hi = now_ns();
  wait_in_syscall(p->tid, SYS_futex, WAIT_MS); /* the wake-up's samples do not count here */
  p->futex_seen = now_ns();
  p->ends[1] = wait_samples(p->phase_samples);
  p->unlock_at = now_ns();
  pthread_mutex_unlock(&p->lock);
  long long end = now_ms() + WAIT_MS;
  while (!atomic_load(&p->spinning)) {
    CHECKF(now_ms() < end, "the hung thread never took the mutex");
    sleep_ms(1);
  }
  p->ends[2] = wait_samples(p->phase_samples);
  atomic_store(&p->stop, 1);
  return NULL;
}

void hang_phases_run(hang_phases_t *p, unsigned phase_samples) {
  memset(p, 0, sizeof *p);
  p->phase_samples = phase_samples;
  p->tid = (pid_t)syscall(SYS_gettid);
  CHECK(pipe(p->pipe_fd) == 0);
  pthread_mutex_init(&p->lock, NULL);
  pthread_t driver;
  CHECK(pthread_create(&driver, NULL, drive, p) == 0);
  while (!atomic_load(&p->locked))
    sleep_ms(1);
  p->busy_lo = now_ns();
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  p->busy_hi = now_ns();
  char c;
  p->read_at = now_ns();
  CHECK(read(p->pipe_fd[0], &c, 1) == 1);
  pthread_mutex_lock(&p->lock);
  p->spin_at = now_ns();
  pthread_mutex_unlock(&p->lock); /* no waiter: no system call */
  atomic_store(&p->spinning, 1);
  /* Only user code from here on: the state is running. */
  volatile unsigned long x = 1;
  while (!atomic_load_explicit(&p->stop, memory_order_relaxed))
    x = x * 3 + 1;
  p->idle_at = now_ns();
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  pthread_join(driver, NULL);
  close(p->pipe_fd[0]);
  close(p->pipe_fd[1]);
  pthread_mutex_destroy(&p->lock);
}

void hang_phases_run_to_file(hang_phases_t *p, unsigned phase_samples, const char *app,
                             const char *dir, char *sink, size_t sink_size) {
  char data[256];
  snprintf(sink, sink_size, "%s/report.txt", dir);
  snprintf(data, sizeof data, "%s/data", dir);
  perf_sdk_config_t cfg;
  sdk_config_short_hangs(&cfg);
  cfg.app_name = app;
  cfg.data_dir = data;
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = sink;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  hang_phases_run(p, phase_samples);
  CHECK_EQ_INT(perf_sdk_shutdown(10000), PERF_OK);
}

/* The decoded hang event of the file sink's batch records (the caller
   frees *bt with perf__v1__batch__free_unpacked). */
const Perf__V1__Event *hang_phases_read_event(const char *sink, Perf__V1__Batch **bt) {
  char dir[300];
  snprintf(dir, sizeof dir, "%s.batches", sink);
  DIR *d = opendir(dir);
  CHECKF(d != NULL, "no %s", dir);
  const Perf__V1__Event *hang = NULL;
  *bt = NULL;
  for (struct dirent *de; !hang && (de = readdir(d));) {
    if (!strstr(de->d_name, ".batch")) continue;
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    uint8_t *payload = NULL;
    size_t len = 0;
    const char *reason = NULL;
    CHECKF(perf__spool_read_file(path, NULL, NULL, &payload, &len, &reason) == PERF_OK, "%s: %s",
           path, reason ? reason : "?");
    CHECK_EQ_INT(perf__batch_decode_stored(payload, len, 64u << 20, bt), PERF_OK);
    free(payload);
    for (size_t i = 0; i < (*bt)->n_events && !hang; i++)
      if ((*bt)->events[i]->kind == PERF__V1__EVENT_KIND__EVENT_KIND_HANG) hang = (*bt)->events[i];
    if (!hang) perf__v1__batch__free_unpacked(*bt, NULL);
  }
  closedir(d);
  CHECKF(hang != NULL, "no hang event in %s", dir);
  return hang;
}
