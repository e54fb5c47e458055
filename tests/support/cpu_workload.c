/*
 * cpu_workload.c - the CPU workload of known split (see cpu_workload.h).
 */
#include "cpu_workload.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "test_util.h"

atomic_int cpu_workload_stop_flag;
atomic_llong cpu_workload_seventy_ns, cpu_workload_thirty_ns;
static volatile unsigned long g_sink;
static _Thread_local cpu_worker_t *g_self; /* the cycle thread's own worker */

/* Burn until this thread used cpu_ns more CPU time (however long that
   takes), reading its CPU clock (a system call) every ~10 us. Inlined:
   its frame is its caller's. */
static inline __attribute__((always_inline)) unsigned long burn_cpu(int64_t cpu_ns) {
  int64_t end = thread_cpu_ns() + cpu_ns;
  unsigned long x = 7;
  do {
    for (int i = 0; i < 8192; i++)
      x = x * 2862933555777941757UL + 3;
  } while (thread_cpu_ns() < end);
  return x;
}

CHAIN unsigned long phase_seventy(void) {
  int64_t t0 = thread_cpu_ns();
  unsigned long x = burn_cpu(7000000);
  int64_t used = thread_cpu_ns() - t0;
  atomic_fetch_add(&cpu_workload_seventy_ns, used);
  if (g_self) atomic_fetch_add(&g_self->seventy_ns, used);
  return x + 1;
}

CHAIN unsigned long phase_thirty(void) {
  int64_t t0 = thread_cpu_ns();
  unsigned long x = burn_cpu(3000000);
  int64_t used = thread_cpu_ns() - t0;
  atomic_fetch_add(&cpu_workload_thirty_ns, used);
  if (g_self) atomic_fetch_add(&g_self->thirty_ns, used);
  return x + 1;
}

CHAIN unsigned long idle_work(void) {
  return burn_cpu(60000) + 1;
}

CHAIN void idle_wait(void) {
  struct timespec ms = {0, 1000000};
  nanosleep(&ms, NULL);
}

static void *cycle_main(void *arg) {
  g_self = arg;
  unsigned long x = 0;
  while (!atomic_load(&cpu_workload_stop_flag))
    x += phase_seventy() + phase_thirty();
  g_sink = x;
  return NULL;
}

static void *idle_main(void *arg) {
  (void)arg;
  unsigned long x = 0;
  while (!atomic_load(&cpu_workload_stop_flag)) {
    x += idle_work();
    idle_wait();
  }
  g_sink = x;
  return NULL;
}

static void *worker_start(void *arg) {
  cpu_worker_t *w = arg;
  atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
  return w->body(w);
}

void cpu_worker_start(cpu_worker_t *w, void *(*body)(void *)) {
  atomic_store(&w->tid, 0);
  atomic_store(&w->seventy_ns, 0);
  atomic_store(&w->thirty_ns, 0);
  w->body = body;
  CHECK_EQ_INT(pthread_create(&w->thread, NULL, worker_start, w), 0);
  while (atomic_load(&w->tid) == 0)
    sleep_ms(1);
}

int64_t cpu_worker_cpu_ns(const cpu_worker_t *w) {
  clockid_t clock;
  struct timespec ts;
  CHECK_EQ_INT(pthread_getcpuclockid(w->thread, &clock), 0);
  CHECK_EQ_INT(clock_gettime(clock, &ts), 0);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void cpu_workload_start(cpu_workload_t *w) {
  cpu_workload_start_hot(w, 1);
}

void cpu_workload_start_hot(cpu_workload_t *w, int hot) {
  CHECKF(hot >= 1 && hot <= CPU_WORKLOAD_MAX_HOT, "%d cycle threads: 1..%d", hot,
         CPU_WORKLOAD_MAX_HOT);
  atomic_store(&cpu_workload_stop_flag, 0);
  for (int i = 0; i < CPU_WORKLOAD_IDLE; i++)
    cpu_worker_start(&w->idle[i], idle_main);
  w->hot = hot;
  for (int i = 0; i < hot; i++)
    cpu_worker_start(&w->cycle[i], cycle_main);
}

void cpu_workload_stop(cpu_workload_t *w) {
  atomic_store(&cpu_workload_stop_flag, 1);
  for (int i = 0; i < w->hot; i++)
    pthread_join(w->cycle[i].thread, NULL);
  for (int i = 0; i < CPU_WORKLOAD_IDLE; i++)
    pthread_join(w->idle[i].thread, NULL);
}
