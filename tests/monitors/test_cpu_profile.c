/*
 * test_cpu_profile.c - the CPU monitor's burst as a CPU profile, against
 * real threads whose CPU split the test knows (it measures it itself from
 * the threads' CPU clocks):
 *  - a cycle thread spending 7 ms of CPU in phase_seventy, then 3 ms in
 *    phase_thirty, over and over (a 10 ms cycle on an idle core): the
 *    burst's CPU time per function within 5 points of the truth, whatever
 *    the interval's phase against the cycle (the interval is randomized);
 *  - three nearly idle threads waking every millisecond to burn ~60 us in
 *    idle_work, then waiting in nanosleep: each at about its CPU share, and
 *    their waits (where they are almost always found) not counted as CPU;
 *  - the same with two CPU-bound processes beside it;
 *  - a burst that finds no thread running records no CPU event.
 * The report is the file sink's: a weighted event's stacks say cpu_ms.
 * The workload is support/cpu_workload.c (bench/cpu_profile_bench.c runs
 * the same against perf record). Each case in its own process; waits poll
 * with deadlines.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cpu_workload.h"
#include "perf_sdk.h"
#include "sdk_util.h"
#include "stack_assert.h"
#include "tempdir.h"
#include "test_util.h"

#define WAIT_MS 20000 /* every wait for the SDK gives up after this */
#define IDLE_THREADS CPU_WORKLOAD_IDLE

static volatile unsigned long g_sink;

/* ---- the SDK and its report -------------------------------------------------- */

static char g_report[300];

static void config(perf_sdk_config_t *cfg) {
  const char *dir = tempdir_make("perf_cpu_profile");
  snprintf(g_report, sizeof g_report, "%s/report.txt", dir);
  perf_sdk_config_init(cfg);
  cfg->app_name = "test_cpu_profile";
  cfg->data_dir = dir;
  cfg->sink = PERF_SINK_FILE;
  cfg->sink_path = g_report;
  cfg->hang_threshold_ms = 60000; /* the hang monitor out of the way */
  /* A twentieth of a core over a 300 ms window: what the workload still
     gets beside a whole test suite on two cores. */
  cfg->cpu_threshold_percent = 5;
  cfg->cpu_window_ms = 300;
  cfg->cpu_cooldown_ms = 60000;
}

#define WAIT_FOR_STATS(st, cond) SDK_WAIT_FOR_STATS(st, cond, WAIT_MS, 1)

/* One stack of the report's event: its thread, CPU time and functions. */
typedef struct {
  int thread;
  long samples;
  double cpu_ms;
  stack_syms_t syms;
} stack_t_;

static bool has_function(const stack_t_ *s, const char *name) {
  for (size_t i = 0; i < s->syms.count; i++)
    if (strcmp(s->syms.symbols[i], name) == 0) return true;
  return false;
}

/* The stacks of the report's only event (which must be a cpu event). */
static size_t parse_stacks(const char *report, stack_t_ **out) {
  CHECKF(strncmp(report, "event cpu ", 10) == 0, "no cpu event first in:\n%s", report);
  CHECKF(strstr(report + 1, "\nevent ") == NULL, "more than one event in:\n%s", report);
  size_t n = 0;
  for (const char *p = report; (p = strstr(p, "\nstack samples=")) != NULL; p++)
    n++;
  stack_t_ *stacks = calloc(n ? n : 1, sizeof *stacks);
  CHECK(stacks != NULL);
  size_t i = 0;
  for (const char *p = report; (p = strstr(p, "\nstack samples=")) != NULL; p++, i++) {
    stack_t_ *s = &stacks[i];
    CHECKF(sscanf(p + 1, "stack samples=%ld thread=%d cpu_ms=%lf", &s->samples, &s->thread,
                  &s->cpu_ms) == 3,
           "a stack without cpu_ms in:\n%s", report);
    const char *next = strstr(p + 1, "\nstack samples=");
    char *text = strndup(p + 1, next ? (size_t)(next - p) : strlen(p + 1));
    CHECK(text != NULL);
    stack_parse(text, &s->syms); /* its frame lines, up to the next stack */
    free(text);
  }
  *out = stacks;
  return n;
}

/* ---- cases ------------------------------------------------------------------- */

static double points(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0;
}

static void known_split(void) {
  perf_sdk_config_t cfg;
  config(&cfg);
  /* About 1000 samples of the cycle thread: a share's standard error is
     under 2 points (fewer on a loaded machine, each of more CPU time).
     200 Hz: a 5 ms interval against the 10 ms cycle, where a fixed one
     would keep sampling the same two points of the cycle. */
  cfg.cpu_burst_ms = 5000;
  cfg.cpu_sample_hz = 200;
  /* Sampled by CPU-clock timers (the default where the kernel allows
     them), samples come at most at each kernel tick the thread runs at
     (250 a second of its CPU here): 1000 Hz asks for every one of them,
     ~1000 samples beside the two hogs. */
  const char *timers = getenv("PERF_SDK_CPU_TIMERS");
  if (!timers || strcmp(timers, "0") != 0) cfg.cpu_sample_hz = 1000;
  cfg.cpu_top_threads = 1 + IDLE_THREADS;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  cpu_workload_t work;
  cpu_workload_start(&work);
  const cpu_worker_t *cycle = &work.cycle[0], *idle = work.idle;

  /* The truth over the burst: the threads' CPU clocks when it began and
     when its event was recorded (polled each millisecond: against a 5 s
     burst, well under a point). */
  perf_sdk_stats_t st;
  WAIT_FOR_STATS(st, st.cpu_bursts >= 1);
  int64_t seventy0 = atomic_load(&cpu_workload_seventy_ns);
  int64_t thirty0 = atomic_load(&cpu_workload_thirty_ns);
  int64_t idle0[IDLE_THREADS], cycle0 = cpu_worker_cpu_ns(cycle);
  for (int i = 0; i < IDLE_THREADS; i++)
    idle0[i] = cpu_worker_cpu_ns(&idle[i]);
  WAIT_FOR_STATS(st, st.events_recorded + st.cpu_bursts_empty >= 1);
  double seventy = (double)(atomic_load(&cpu_workload_seventy_ns) - seventy0);
  double thirty = (double)(atomic_load(&cpu_workload_thirty_ns) - thirty0);
  double idle_true[IDLE_THREADS], all_true = (double)(cpu_worker_cpu_ns(cycle) - cycle0);
  for (int i = 0; i < IDLE_THREADS; i++)
    all_true += idle_true[i] = (double)(cpu_worker_cpu_ns(&idle[i]) - idle0[i]);
  cpu_workload_stop(&work);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  st = sdk_stats();
  CHECK_EQ_INT(st.cpu_bursts, 1);
  CHECK_EQ_INT(st.cpu_bursts_empty, 0);
  CHECK_EQ_INT(st.events_written, 1);
  /* Looked at by the monitor (no CPU-clock timers), the idle threads were
     found waiting, again and again; timers never find a thread waiting. */
  bool looked = timers && strcmp(timers, "0") == 0;
  CHECKF(!looked || st.cpu_samples_off_cpu >= 1, "cpu_samples_off_cpu=%llu",
         (unsigned long long)st.cpu_samples_off_cpu);

  char *report = read_text(g_report);
  stack_t_ *stacks = NULL;
  size_t n = parse_stacks(report, &stacks);
  double w_seventy = 0, w_thirty = 0, w_cycle = 0, w_all = 0, w_idle[IDLE_THREADS] = {0};
  double w_waiting = 0;
  for (size_t i = 0; i < n; i++) {
    const stack_t_ *s = &stacks[i];
    if (s->thread == cycle->tid) {
      w_all += s->cpu_ms;
      w_cycle += s->cpu_ms;
      CHECKF(!(has_function(s, "phase_seventy") && has_function(s, "phase_thirty")),
             "stack %zu has both phases:\n%s", i, report);
      if (has_function(s, "phase_seventy")) w_seventy += s->cpu_ms;
      if (has_function(s, "phase_thirty")) w_thirty += s->cpu_ms;
      continue;
    }
    /* This thread polls the SDK each millisecond: it burns a period of
       CPU between the burst's reads of the threads and is sampled too. */
    if (s->thread == (pid_t)syscall(SYS_gettid)) {
      CHECKF(has_function(s, "known_split"), "stack %zu of this thread outside the test:\n%s", i,
             report);
      continue;
    }
    int k = 0;
    while (k < IDLE_THREADS && s->thread != idle[k].tid)
      k++;
    CHECKF(k < IDLE_THREADS, "stack %zu of thread %d, not a worker:\n%s", i, s->thread, report);
    w_idle[k] += s->cpu_ms;
    w_all += s->cpu_ms;
    /* A thread found waiting is not a CPU sample: what is left of the wait
       is its way in and out of nanosleep while it runs. Its loop's own few
       instructions between the two calls (idle_main as frame 0) are CPU
       too, and caught now and then. */
    bool in_loop = s->syms.count > 0 && strcmp(s->syms.symbols[0], "idle_main") == 0;
    if (has_function(s, "idle_wait"))
      w_waiting += s->cpu_ms;
    else
      CHECKF(has_function(s, "idle_work") || in_loop, "idle stack %zu neither works nor waits:\n%s",
             i, report);
  }
  double truth = points(seventy, seventy + thirty), got = points(w_seventy, w_cycle);
  fprintf(stderr,
          "phase_seventy: %.1f%% of the cycle thread's CPU (truth %.1f%%), phase_thirty %.1f%% "
          "(truth %.1f%%); %zu stacks, %.1f ms of CPU in the profile, %.1f ms measured\n",
          got, truth, points(w_thirty, w_cycle), points(thirty, seventy + thirty), n, w_all,
          all_true / 1e6);
  CHECKF(got > truth - 5 && got < truth + 5, "phase_seventy %.1f%%, truth %.1f%%:\n%s", got, truth,
         report);
  double got30 = points(w_thirty, w_cycle), truth30 = points(thirty, seventy + thirty);
  CHECKF(got30 > truth30 - 5 && got30 < truth30 + 5, "phase_thirty %.1f%%, truth %.1f%%:\n%s",
         got30, truth30, report);
  for (int k = 0; k < IDLE_THREADS; k++) {
    double share = points(w_idle[k], w_all), share_true = points(idle_true[k], all_true);
    fprintf(stderr, "idle thread %d: %.1f%% of the profile's CPU (truth %.1f%%)\n", k, share,
            share_true);
    /* Generous: a thread caught running a few dozen times. */
    CHECKF(share > share_true / 2 - 1 && share < share_true * 2 + 1,
           "idle thread %d: %.1f%%, truth %.1f%%:\n%s", k, share, share_true, report);
  }
  /* Where the idle threads wait is where wall-clock sampling put nearly
     all of their samples. Found there blocked, they are no CPU samples;
     what is left is their way in and out of nanosleep while running
     (perf record -g puts 5-17% of their CPU there, bench/README.md). */
  double w_idle_all = w_idle[0] + w_idle[1] + w_idle[2];
  fprintf(stderr, "idle_wait: %.1f%% of the idle threads' CPU in the profile\n",
          points(w_waiting, w_idle_all));
  CHECKF(points(w_waiting, w_idle_all) < 40, "idle_wait: %.1f%% of the idle threads' CPU:\n%s",
         points(w_waiting, w_idle_all), report);
  free(stacks);
  free(report);
}

static void case_known_split(void) {
  known_split();
}

/* The same with two CPU-bound processes beside it (two compilers on a
   developer's two cores): the workload gets less CPU, the shares of what
   it gets stay right. */
static void case_known_split_beside_busy(void) {
  pid_t hogs[2] = {cpu_hog_start(), cpu_hog_start()};
  known_split();
  for (int i = 0; i < 2; i++)
    cpu_hog_stop(hogs[i]);
}

/* The thread that set the burst off stops as soon as it begins (it watches
   the counter itself) and waits from then on: every sample of the burst
   finds it blocked, and no CPU event is recorded. */
static void *stop_at_burst_main(void *arg) {
  (void)arg;
  perf_sdk_stats_t st;
  unsigned long x = 0;
  while (perf_sdk_get_stats(&st) == PERF_OK && st.cpu_bursts == 0 &&
         !atomic_load(&cpu_workload_stop_flag))
    x += idle_work();
  g_sink = x;
  while (!atomic_load(&cpu_workload_stop_flag))
    idle_wait();
  return NULL;
}

static void case_nothing_running(void) {
  /* The monitor's looks: the first comes 0.5 to 1.5 s into the burst,
     long after the thread stopped. CPU-clock timers would catch it at a
     tick of the CPU it burns while it notices the burst. */
  CHECK(setenv("PERF_SDK_CPU_TIMERS", "0", 1) == 0);
  perf_sdk_config_t cfg;
  config(&cfg);
  cfg.cpu_burst_ms = 1500;
  cfg.cpu_sample_hz = 1; /* the first tick 0.5 to 1.5 s into the burst */
  cfg.cpu_top_threads = 1;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  cpu_worker_t w;
  cpu_worker_start(&w, stop_at_burst_main);
  perf_sdk_stats_t st;
  WAIT_FOR_STATS(st, st.cpu_bursts_empty + st.events_recorded >= 1);
  atomic_store(&cpu_workload_stop_flag, 1);
  pthread_join(w.thread, NULL);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  st = sdk_stats();
  CHECK_EQ_INT(st.cpu_bursts, 1);
  CHECK_EQ_INT(st.cpu_bursts_empty, 1);
  CHECK_EQ_INT(st.events_recorded, 0);
  char *report = read_text(g_report);
  CHECKF(strstr(report, "event cpu") == NULL, "a cpu event with no CPU sample:\n%s", report);
  free(report);
}

static const test_case_t g_cases[] = {
    /* The split is read to 5 points from 200 Hz samples weighted by each
       thread's CPU clock: a suite's other cases on both cores skew which
       phase a long slice of CPU is charged to. */
    TEST_CASE_SERIAL(known_split, "a 70/30 split read to 5 points needs its threads on a core"),
    TEST_CASE_SERIAL(known_split_beside_busy, "two CPU hogs of its own take both cores"),
    TEST_CASE(nothing_running),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
