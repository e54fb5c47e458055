/*
 * cpu_profile_bench.c - the CPU monitor's burst against `perf record` on the
 * same workload: --hot N (default 1, at most 8) equally hot threads, each
 * spending 7 ms of CPU in phase_seventy and 3 ms in phase_thirty over and
 * over, and three nearly idle threads waking every millisecond to burn
 * ~60 us in idle_work, waiting in idle_wait (nanosleep) otherwise
 * (tests/support/cpu_workload.c: tests/monitors/test_cpu_profile.c's
 * workload, linked in).
 *
 *  1. In this process under the SDK (file sink): one burst of --burst-ms at
 *     --hz; the report's CPU time per thread and function (a stack counts
 *     for the first of the workload's functions it holds), and the truth
 *     from the threads' CPU clocks and each hot thread's CPU per phase
 *     over the burst.
 *  2. The same burst under `perf record -e cpu-clock -F 997 -k
 *     CLOCK_MONOTONIC --call-graph dwarf -p <this process>`, attached a
 *     second before the SDK starts and stopped (SIGINT) once the event is
 *     recorded; `perf script` gives each sample's time and stack: the
 *     workload threads' samples between the moments the bench saw the
 *     burst begin and its event recorded (the window of the clocks' truth
 *     too), by the same classes. perf's own window (`-- sleep <burst>`
 *     started when the burst begins) starts and ends later than the
 *     burst: 8 threads sharing 2 cores had thread shares up to 3.9 points
 *     apart from the SDK's that way, 0.1 in the same window.
 *
 * Prints, per thread (the idle ones together) and per function of each,
 * the shares of the workload's CPU side by side (SDK, perf, the clocks)
 * and the largest difference in points. Not a test: it never fails on the
 * figures; exit 1 only when a part could not run (then it says which, e.g.
 * perf not permitted).
 *
 *   ./build/bench/cpu_profile_bench [--hot 1] [--hz 200] [--burst-ms 4000] [--keep]
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
/* Rows of threads: the hot ones, then the idle ones together. */
#define MAX_ROWS (CPU_WORKLOAD_MAX_HOT + 1)

enum { SEVENTY, THIRTY, IDLE_WORK, IDLE_WAIT, OTHER, CLASSES };
static const char *const CLASS_NAMES[CLASSES] = {"phase_seventy", "phase_thirty", "idle_work",
                                                 "idle_wait", "other"};

/* CPU (ms, or perf's samples) per thread row and class; -1: not known. */
typedef struct {
  double v[MAX_ROWS][CLASSES];
} split_t;

static cpu_workload_t g_work; /* its tids, for perf's samples, stay after it stopped */
static int g_hot = 1;

/* ---- the workload ---------------------------------------------------------- */

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The workload's clocks now: per hot thread its CPU and its CPU in each
   phase, the idle threads' CPU together (its classes unknown). */
static void workload_clocks(const cpu_workload_t *w, split_t *out) {
  for (int r = 0; r < MAX_ROWS; r++)
    for (int c = 0; c < CLASSES; c++)
      out->v[r][c] = 0;
  for (int i = 0; i < g_hot; i++) {
    double all = (double)cpu_worker_cpu_ns(&w->cycle[i]) / 1e6;
    out->v[i][SEVENTY] = (double)atomic_load(&w->cycle[i].seventy_ns) / 1e6;
    out->v[i][THIRTY] = (double)atomic_load(&w->cycle[i].thirty_ns) / 1e6;
    out->v[i][OTHER] = all - out->v[i][SEVENTY] - out->v[i][THIRTY];
  }
  for (int i = 0; i < IDLE_THREADS; i++)
    out->v[g_hot][OTHER] += (double)cpu_worker_cpu_ns(&w->idle[i]) / 1e6;
}

/* The row of a workload thread, or -1. */
static int row_of(long tid) {
  for (int i = 0; i < g_hot; i++)
    if (atomic_load(&g_work.cycle[i].tid) == tid) return i;
  for (int i = 0; i < IDLE_THREADS; i++)
    if (atomic_load(&g_work.idle[i].tid) == tid) return g_hot;
  return -1;
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

/* How long perf is given to attach before the SDK starts. */
#define PERF_ATTACH_MS 1000

static pid_t perf_start(const char *data);
static bool perf_finish(pid_t perf);

/* The report's stacks of the workload's threads, their cpu_ms per row and
   class. */
static void parse_report(const char *text, split_t *cpu_ms) {
  for (const char *p = text; (p = strstr(p, "\nstack samples=")) != NULL; p++) {
    const char *next = strstr(p + 1, "\nstack samples=");
    long samples = 0;
    int tid = 0;
    double weight = 0;
    /* An SDK before CPU profiles prints no cpu_ms: its samples, 1 each. */
    int got = sscanf(p + 1, "stack samples=%ld thread=%d cpu_ms=%lf", &samples, &tid, &weight);
    if (got < 2) continue;
    if (got == 2) weight = (double)samples;
    int row = row_of(tid);
    if (row < 0) continue;
    char *stack = strndup(p + 1, next ? (size_t)(next - p - 1) : strlen(p + 1));
    if (stack) cpu_ms->v[row][classify(stack)] += weight;
    free(stack);
  }
}

/* CPU ms per row and class from the report's one cpu event, the clocks'
   over the burst in truth_ms; perf recording this process from before the
   SDK starts to the event into `data` (*perf_ok: it ran), the burst's
   monotonic bounds as the bench saw them in window[]. */
static bool sdk_profile(unsigned hz, unsigned burst_ms, bool keep, const char *data,
                        split_t *cpu_ms, split_t *truth_ms, int64_t window[2], bool *perf_ok) {
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
  cfg.cpu_top_threads = (unsigned)(g_hot + IDLE_THREADS);
  cpu_workload_t *w = &g_work;
  cpu_workload_start_hot(w, g_hot);
  /* perf attached (it takes a moment) before the burst can begin. */
  pid_t perf = perf_start(data);
  usleep(PERF_ATTACH_MS * 1000);
  if (perf_sdk_init(&cfg) != PERF_OK) {
    cpu_workload_stop(w);
    if (perf > 0) perf_finish(perf);
    return false;
  }
  perf_sdk_stats_t st = {0};
  int64_t deadline = now_ns() + (int64_t)(burst_ms + 30000) * 1000000;
  split_t at_start;
  window[0] = -1;
  while (now_ns() < deadline && perf_sdk_get_stats(&st) == PERF_OK && st.events_recorded == 0) {
    if (window[0] < 0 && st.cpu_bursts > 0) {
      window[0] = now_ns();
      workload_clocks(w, &at_start);
    }
    usleep(1000);
  }
  window[1] = now_ns();
  workload_clocks(w, truth_ms);
  for (int r = 0; r < MAX_ROWS; r++)
    for (int c = 0; c < CLASSES; c++)
      truth_ms->v[r][c] -= at_start.v[r][c];
  *perf_ok = perf > 0 && perf_finish(perf);
  cpu_workload_stop(w);
  perf_sdk_shutdown(5000);
  char *text = read_file(report);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (keep)
    fprintf(stderr, "the SDK's report: %s (its batches: %s.batches/)\n", report, report);
  else if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  if (!text || !st.events_recorded || window[0] < 0) {
    free(text);
    return false;
  }
  const char *failed = strstr(text, " failed_samples=");
  if (failed)
    fprintf(stderr, "the SDK's event: failed_samples=%ld\n", strtol(failed + 16, NULL, 10));
  parse_report(text, cpu_ms);
  free(text);
  return true;
}

/* ---- 2. perf record --------------------------------------------------------------- */

/* perf record on this process until perf_finish, in the background, its
   samples' times on CLOCK_MONOTONIC (the bench's clock). */
static pid_t perf_start(const char *data) {
  char self[16];
  snprintf(self, sizeof self, "%d", (int)getpid());
  char *record[] = {
      "perf", "record",       "-q",    "-e", "cpu-clock",  "-F", "997", "-k", "CLOCK_MONOTONIC",
      "-g",   "--call-graph", "dwarf", "-o", (char *)data, "-p", self,  NULL};
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(127);
    execvp(record[0], record);
    _exit(127);
  }
  return pid;
}

/* Stop perf (SIGINT; killed after a minute): whether it succeeded. */
static bool perf_finish(pid_t perf) {
  int64_t deadline = now_ns() + 60000 * 1000000LL;
  int status;
  kill(perf, SIGINT);
  for (;;) {
    pid_t r = waitpid(perf, &status, WNOHANG);
    if (r == perf) break;
    if (r < 0 && errno != EINTR) return false;
    if (now_ns() > deadline) {
      kill(perf, SIGKILL);
      waitpid(perf, &status, 0);
      fprintf(stderr, "perf record: killed a minute after SIGINT\n");
      return false;
    }
    usleep(20000);
  }
  int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) rc = 0;
  if (rc != 0)
    fprintf(stderr,
            "perf record failed (exit %d): not installed, or not permitted here "
            "(kernel.perf_event_paranoid, seccomp); no perf row\n",
            rc);
  return rc == 0;
}

/* Samples per row and class of the workload's threads in perf's recording,
   those taken within window[] (monotonic ns). */
static bool perf_profile(const char *data, const int64_t window[2], split_t *samples) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "timeout 300 perf script --ns -i %s -F pid,tid,time,ip,sym 2>/dev/null",
           data);
  FILE *p = popen(cmd, "r");
  if (!p) return false;
  char line[1024], *stack = NULL;
  size_t len = 0;
  int row = -1;
  bool any = false;
  FILE *s = open_memstream(&stack, &len);
  while (s && fgets(line, sizeof line, p)) {
    if (line[0] != '\t' && line[0] != '\n') { /* "  pid/tid  sec.ns:": a sample begins */
      long pid = 0, tid = 0, sec = 0, ns = 0;
      row = sscanf(line, "%ld/%ld %ld.%ld:", &pid, &tid, &sec, &ns) == 4 ? row_of(tid) : -1;
      int64_t at = sec * 1000000000LL + ns;
      if (at < window[0] || at > window[1]) row = -1;
      fflush(s);
      rewind(s);
      continue;
    }
    if (line[0] == '\n') {
      fputc('\0', s);
      fflush(s);
      if (row >= 0 && len) {
        samples->v[row][classify(stack)]++;
        any = true;
      }
      row = -1;
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

/* ---- the table ------------------------------------------------------------------ */

static double total_of(const split_t *x) {
  double all = 0;
  for (int r = 0; r <= g_hot; r++)
    for (int c = 0; c < CLASSES; c++)
      all += x->v[r][c];
  return all;
}

/* Share (%) of row r's class c (c == CLASSES: the whole row) in x. */
static double share(const split_t *x, double all, int r, int c) {
  double v = 0;
  for (int k = 0; k < CLASSES; k++)
    if (c == CLASSES || c == k) v += x->v[r][k];
  return all > 0 ? 100 * v / all : 0;
}

static double diff(double a, double b) {
  return a > b ? a - b : b - a;
}

/* One line of the table; the largest differences so far in worst[]
   (SDK-perf, SDK-clocks, perf-clocks). */
static void print_row(const char *name, const split_t *sdk, const split_t *prf,
                      const split_t *truth, const double all[3], bool with_truth, int r, int c,
                      double worst[3]) {
  double a = share(sdk, all[0], r, c), b = share(prf, all[1], r, c);
  double t = share(truth, all[2], r, c);
  printf("%-30s %8.1f%% %8.1f%%", name, a, b);
  if (with_truth)
    printf(" %8.1f%%", t);
  else
    printf(" %9s", "-");
  printf(" %8.1f\n", diff(a, b));
  if (diff(a, b) > worst[0]) worst[0] = diff(a, b);
  if (with_truth && diff(a, t) > worst[1]) worst[1] = diff(a, t);
  if (with_truth && diff(b, t) > worst[2]) worst[2] = diff(b, t);
}

static void print_table(const split_t *sdk, const split_t *prf, const split_t *truth) {
  double all[3] = {total_of(sdk), total_of(prf), total_of(truth)}, worst[3] = {0, 0, 0};
  printf("%-30s %9s %9s %9s %8s\n", "share of the workload's CPU", "SDK", "perf", "clocks",
         "|S-p|");
  char name[64];
  for (int r = 0; r <= g_hot; r++) {
    bool idle = r == g_hot;
    if (idle)
      snprintf(name, sizeof name, "idle threads (%d)", IDLE_THREADS);
    else
      snprintf(name, sizeof name, "hot thread %d", r);
    print_row(name, sdk, prf, truth, all, true, r, CLASSES, worst);
    for (int c = 0; c < CLASSES; c++) {
      if (idle ? c == SEVENTY || c == THIRTY : c == IDLE_WORK || c == IDLE_WAIT) continue;
      snprintf(name, sizeof name, "  %s", CLASS_NAMES[c]);
      print_row(name, sdk, prf, truth, all, !idle, r, c, worst);
    }
  }
  printf("SDK burst: %.0f ms of CPU in the profile, %.0f ms used by the workload's threads "
         "(their CPU clocks); perf: %.0f samples\n",
         all[0], all[2], all[1]);
  printf("largest difference: SDK vs perf %.1f points; vs the clocks: SDK %.1f, perf %.1f\n",
         worst[0], worst[1], worst[2]);
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
    else if (strcmp(argv[i], "--hot") == 0 && i + 1 < argc)
      g_hot = atoi(argv[++i]);
  }
  if (g_hot < 1 || g_hot > CPU_WORKLOAD_MAX_HOT) {
    fprintf(stderr, "--hot %d: 1..%d\n", g_hot, CPU_WORKLOAD_MAX_HOT);
    return 1;
  }
  split_t sdk = {0}, prf = {0}, truth = {0};
  char data[] = "/tmp/cpu_profile_bench_perf_XXXXXX";
  int fd = mkstemp(data);
  if (fd < 0) return 1;
  close(fd);
  bool perf_ok = false;
  int64_t window[2] = {0, 0};
  bool sdk_ok = sdk_profile(hz, burst_ms, keep, data, &sdk, &truth, window, &perf_ok);
  if (!sdk_ok) fprintf(stderr, "the SDK recorded no CPU burst\n");
  perf_ok = perf_ok && perf_profile(data, window, &prf);
  unlink(data);

  printf("cpu_profile_bench: %d hot thread(s) and %d idle, one burst of %u ms at %u Hz, and perf "
         "record -e cpu-clock -F 997 --call-graph dwarf, its samples within the same burst\n",
         g_hot, IDLE_THREADS, burst_ms, hz);
  if (sdk_ok && perf_ok) print_table(&sdk, &prf, &truth);
  return sdk_ok && perf_ok ? 0 : 1;
}
