/*
 * cpu_profile_bench.c - the CPU monitor's burst against `perf record` on the
 * same workload: one thread spending 7 ms of CPU in phase_seventy and 3 ms
 * in phase_thirty over and over, and three nearly idle threads waking every
 * millisecond to burn ~60 us in idle_work, waiting in idle_wait (nanosleep)
 * otherwise (tests/support/cpu_workload.c: tests/monitors/test_cpu_profile.c's
 * workload, linked in).
 *
 *  1. In this process under the SDK (file sink): one burst of --burst-ms at
 *     --hz; the report's CPU time per function (a stack counts for the
 *     first of the workload's functions it holds), and the truth from the
 *     threads' CPU clocks over the burst.
 *  2. The same burst under `perf record -e cpu-clock -F 997 --call-graph
 *     dwarf -p <this process> -- sleep <burst>`, started as the burst
 *     begins and killed if it overruns; `perf script` gives each sample's
 *     stack; the workload threads' samples, by the same classes.
 *
 * Prints the shares side by side and the largest difference in points. Not
 * a test: it never fails on the figures; exit 1 only when a part could not
 * run (then it says which, e.g. perf not permitted).
 *
 *   ./build/bench/cpu_profile_bench [--hz 200] [--burst-ms 4000] [--keep]
 * (--keep: leave the SDK's report and batches and say where.)
 */
#include <errno.h>
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

#include "cpu_workload.h"
#include "perf_sdk.h"

#define IDLE_THREADS CPU_WORKLOAD_IDLE

enum { SEVENTY, THIRTY, IDLE_WORK, IDLE_WAIT, OTHER, CLASSES };
static const char *const CLASS_NAMES[CLASSES] = {"phase_seventy", "phase_thirty", "idle_work",
                                                 "idle_wait", "other"};

static cpu_workload_t g_work; /* its tids, for perf's samples, stay after it stopped */

/* ---- the workload ---------------------------------------------------------- */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t workload_cpu_ns(const cpu_workload_t *w) {
  int64_t sum = cpu_worker_cpu_ns(&w->cycle);
  for (int i = 0; i < IDLE_THREADS; i++)
    sum += cpu_worker_cpu_ns(&w->idle[i]);
  return sum;
}

/* ---- classes of a stack -------------------------------------------------------- */

/* Which class a stack's frames (names, innermost first, any text holding
   them as whole words) fall in: the first workload function found. */
static int classify(const char *frames) {
  for (int c = 0; c < OTHER; c++) {
    size_t n = strlen(CLASS_NAMES[c]);
    for (const char *p = frames; (p = strstr(p, CLASS_NAMES[c])) != NULL; p += n) {
      bool start = p == frames || p[-1] == ' ' || p[-1] == '\t';
      bool end = p[n] == ' ' || p[n] == '\n' || p[n] == '\0' || p[n] == '+';
      if (start && end) return c;
    }
  }
  return OTHER;
}

static void print_shares(const char *title, const double *v) {
  double all = 0;
  for (int c = 0; c < CLASSES; c++)
    all += v[c];
  printf("%-28s", title);
  for (int c = 0; c < CLASSES; c++)
    printf(" %13.1f%%", all > 0 ? 100 * v[c] / all : 0);
  printf("\n");
}

/* ---- 1. the SDK's burst ----------------------------------------------------------- */

static char *read_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t cap = 1 << 20, len = 0, n;
  char *text = malloc(cap);
  while (text && (n = fread(text + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (len + 1 == cap) {
      char *more = realloc(text, cap *= 2);
      if (!more) break;
      text = more;
    }
  }
  fclose(f);
  if (text) text[len] = '\0';
  return text;
}

static pid_t perf_start(const char *data, unsigned burst_ms);
static bool perf_finish(pid_t perf, unsigned burst_ms);

/* CPU ms per class from the report's one cpu event; perf recording the
   same burst into `data` (*perf_ok: it ran). */
static bool sdk_profile(unsigned hz, unsigned burst_ms, bool keep, const char *data, double *cpu_ms,
                        double *truth_ms, bool *perf_ok) {
  char dir[] = "/tmp/cpu_profile_bench_XXXXXX";
  if (!mkdtemp(dir)) return false;
  char report[128];
  snprintf(report, sizeof report, "%s/report.txt", dir);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "cpu_profile_bench";
  cfg.data_dir = dir;
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = report;
  cfg.hang_threshold_ms = 60000;
  cfg.cpu_threshold_percent = 5;
  cfg.cpu_window_ms = 300;
  cfg.cpu_cooldown_ms = 600000;
  cfg.cpu_sample_hz = hz;
  cfg.cpu_burst_ms = burst_ms;
  cfg.cpu_top_threads = 1 + IDLE_THREADS;
  if (perf_sdk_init(&cfg) != PERF_OK) return false;
  cpu_workload_t *w = &g_work;
  cpu_workload_start(w);
  perf_sdk_stats_t st = {0};
  int64_t deadline = now_ns() + (int64_t)(burst_ms + 30000) * 1000000, cpu0 = -1;
  pid_t perf = -1;
  while (now_ns() < deadline && perf_sdk_get_stats(&st) == PERF_OK && st.events_recorded == 0) {
    if (cpu0 < 0 && st.cpu_bursts > 0) {
      cpu0 = workload_cpu_ns(w);
      perf = perf_start(data, burst_ms);
    }
    usleep(1000);
  }
  *truth_ms = (double)(workload_cpu_ns(w) - cpu0) / 1e6;
  *perf_ok = perf > 0 && perf_finish(perf, burst_ms);
  cpu_workload_stop(w);
  perf_sdk_shutdown(5000);
  char *text = read_file(report);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (keep)
    fprintf(stderr, "the SDK's report: %s (its batches: %s.batches/)\n", report, report);
  else if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  if (!text || !st.events_recorded) {
    free(text);
    return false;
  }
  for (const char *p = text; (p = strstr(p, "\nstack samples=")) != NULL; p++) {
    const char *next = strstr(p + 1, "\nstack samples=");
    /* An SDK before CPU profiles prints no cpu_ms: its samples, 1 each. */
    const char *eol = strchr(p + 1, '\n'), *w_at = strstr(p, " cpu_ms=");
    double weight = w_at && w_at < eol ? strtod(w_at + 8, NULL) : strtod(p + 15, NULL);
    char *stack = strndup(p + 1, next ? (size_t)(next - p - 1) : strlen(p + 1));
    if (stack) cpu_ms[classify(stack)] += weight;
    free(stack);
  }
  free(text);
  return true;
}

/* ---- 2. perf record --------------------------------------------------------------- */

/* perf record on this process for the burst's length, in the background. */
static pid_t perf_start(const char *data, unsigned burst_ms) {
  char self[16], secs[32];
  snprintf(self, sizeof self, "%d", (int)getpid());
  snprintf(secs, sizeof secs, "%.3f", burst_ms / 1000.0);
  char *record[] = {"perf", "record", "-q",           "-e",    "cpu-clock", "-F",
                    "997",  "-g",     "--call-graph", "dwarf", "-o",        (char *)data,
                    "-p",   self,     "--",           "sleep", secs,        NULL};
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(127);
    execvp(record[0], record);
    _exit(127);
  }
  return pid;
}

/* Wait for perf (killed after the burst and a minute): whether it succeeded. */
static bool perf_finish(pid_t perf, unsigned burst_ms) {
  int64_t deadline = now_ns() + ((int64_t)burst_ms + 60000) * 1000000;
  int status;
  for (;;) {
    pid_t r = waitpid(perf, &status, WNOHANG);
    if (r == perf) break;
    if (r < 0 && errno != EINTR) return false;
    if (now_ns() > deadline) {
      kill(perf, SIGKILL);
      waitpid(perf, &status, 0);
      fprintf(stderr, "perf record: killed after %u ms\n", burst_ms + 60000);
      return false;
    }
    usleep(20000);
  }
  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (rc != 0)
    fprintf(stderr,
            "perf record failed (exit %d): not installed, or not permitted here "
            "(kernel.perf_event_paranoid, seccomp); no perf row\n",
            rc);
  return rc == 0;
}

static bool is_workload_tid(long tid) {
  if (atomic_load(&g_work.cycle.tid) == tid) return true;
  for (int i = 0; i < IDLE_THREADS; i++)
    if (atomic_load(&g_work.idle[i].tid) == tid) return true;
  return false;
}

/* Samples per class of the workload's threads in perf's recording. */
static bool perf_profile(const char *data, double *samples) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "timeout 300 perf script -i %s -F pid,tid,ip,sym 2>/dev/null", data);
  FILE *p = popen(cmd, "r");
  if (!p) return false;
  char line[1024], *stack = NULL;
  size_t len = 0;
  bool counted = false, any = false;
  FILE *s = open_memstream(&stack, &len);
  while (s && fgets(line, sizeof line, p)) {
    if (line[0] != '\t' && line[0] != '\n') { /* "  pid/tid": a sample begins */
      long pid = 0, tid = 0;
      counted = sscanf(line, "%ld/%ld", &pid, &tid) == 2 && is_workload_tid(tid);
      fflush(s);
      rewind(s);
      continue;
    }
    if (line[0] == '\n') {
      fputc('\0', s);
      fflush(s);
      if (counted && len) {
        samples[classify(stack)]++;
        any = true;
      }
      counted = false;
      rewind(s);
      continue;
    }
    fputs(line, s);
  }
  if (s) fclose(s);
  free(stack);
  pclose(p);
  if (!any) fprintf(stderr, "perf script gave no sample of the workload's threads\n");
  return any;
}

int main(int argc, char **argv) {
  unsigned hz = 200, burst_ms = 4000;
  bool keep = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--keep") == 0)
      keep = true;
    else if (strcmp(argv[i], "--hz") == 0 && i + 1 < argc)
      hz = (unsigned)atoi(argv[++i]);
    else if (strcmp(argv[i], "--burst-ms") == 0 && i + 1 < argc)
      burst_ms = (unsigned)atoi(argv[++i]);
  }
  double sdk[CLASSES] = {0}, prf[CLASSES] = {0}, truth_ms = 0;
  char data[] = "/tmp/cpu_profile_bench_perf_XXXXXX";
  int fd = mkstemp(data);
  if (fd < 0) return 1;
  close(fd);
  bool perf_ok = false;
  bool sdk_ok = sdk_profile(hz, burst_ms, keep, data, sdk, &truth_ms, &perf_ok);
  if (!sdk_ok) fprintf(stderr, "the SDK recorded no CPU burst\n");
  perf_ok = perf_ok && perf_profile(data, prf);
  unlink(data);

  printf("cpu_profile_bench: one burst of %u ms at %u Hz (randomized intervals), and perf "
         "record -e cpu-clock -F 997 --call-graph dwarf on the same burst\n",
         burst_ms, hz);
  printf("%-28s", "share of the workload's CPU");
  for (int c = 0; c < CLASSES; c++)
    printf(" %14s", CLASS_NAMES[c]);
  printf("\n");
  if (sdk_ok) print_shares("SDK burst (CPU time)", sdk);
  if (perf_ok) print_shares("perf record (samples)", prf);
  if (sdk_ok) {
    double all = 0;
    for (int c = 0; c < CLASSES; c++)
      all += sdk[c];
    printf("SDK burst: %.0f ms of CPU in the profile, %.0f ms used by the workload's threads "
           "(their CPU clocks)\n",
           all, truth_ms);
  }
  if (sdk_ok && perf_ok) {
    double sa = 0, pa = 0, worst = 0;
    for (int c = 0; c < CLASSES; c++)
      sa += sdk[c], pa += prf[c];
    for (int c = 0; c < CLASSES; c++) {
      double d = 100 * sdk[c] / sa - 100 * prf[c] / pa;
      if (d < 0) d = -d;
      if (d > worst) worst = d;
    }
    printf("largest difference SDK vs perf: %.1f points\n", worst);
  }
  return sdk_ok && perf_ok ? 0 : 1;
}
