/*
 * footprint_bench.c - what the SDK adds to an app: resident memory, mapped
 * libraries, glibc malloc arenas, threads, and start-up time (perf_sdk_init
 * to return; to unwind rules ready, the moment the monitors can capture).
 * Not a test: it prints figures measured in one run, each against the same
 * app without the SDK measured in the same run, and always exits 0 when it
 * could run.
 *
 * The driver runs every (app, mode) pair `runs` times as a fresh process
 * (this program again, `--child ...`) and prints the medians. Apps:
 *   idle50  an idle app with 50 threads blocked on a condition variable;
 *   gtk     an app that maps GTK 3 and its libraries (dlopen of
 *           libgtk-3.so.0: 50+ shared libraries, no display needed).
 * Modes: baseline (the SDK is not even loaded), disabled
 * (PERF_SDK_DISABLED=1), rules (disabled, plus one perf_backtrace_thread:
 * the sampler's unwind rules for every loaded module alone), none, file,
 * http0 (the http sink with nothing sent), http (to a local test server,
 * one event sent). The
 * SDK is loaded with dlopen from --sdk, so that baseline maps nothing of it.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http_server.h"
#include "perf_sdk.h"

#define APP_THREADS 50
#define SETTLE_MS 2500 /* idle time before the snapshot: past the writer's 2 s DWARF drop */

typedef struct {
  double rss_kb, anon_kb, file_kb, pss_kb, uss_kb, libs, arenas, arena_kb, threads, init_ms,
      ready_ms;
} figures_t;

/* ---- the app (child) ------------------------------------------------------ */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void *idle_thread(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_lock);
  for (;;)
    pthread_cond_wait(&g_cond, &g_lock);
  return NULL;
}

static void start_app(const char *app) {
  if (strcmp(app, "gtk") == 0) {
    if (!dlopen("libgtk-3.so.0", RTLD_NOW | RTLD_GLOBAL)) {
      fprintf(stderr, "footprint_bench: %s\n", dlerror());
      exit(2);
    }
    return;
  }
  for (int i = 0; i < APP_THREADS; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, idle_thread, NULL) != 0) exit(2);
  }
}

/* The SDK's public calls, from the dlopen'd library. */
typedef struct {
  void (*config_init)(perf_sdk_config_t *, size_t);
  int (*init)(const perf_sdk_config_t *);
  int (*shutdown)(int);
  int (*capture_now)(const char *);
  int (*flush)(int);
  int (*backtrace)(pid_t, uintptr_t *, size_t, size_t *);
} sdk_api_t;

static void load_sdk(const char *path, sdk_api_t *api) {
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "footprint_bench: %s\n", dlerror());
    exit(2);
  }
  void *fns[6] = {dlsym(lib, "perf_sdk_config_init_sized"),
                  dlsym(lib, "perf_sdk_init"),
                  dlsym(lib, "perf_sdk_shutdown"),
                  dlsym(lib, "perf_sdk_capture_now"),
                  dlsym(lib, "perf_sdk_flush"),
                  dlsym(lib, "perf_backtrace_thread")};
  for (int i = 0; i < 6; i++)
    if (!fns[i]) exit(2);
  memcpy(&api->config_init, &fns[0], sizeof fns[0]);
  memcpy(&api->init, &fns[1], sizeof fns[1]);
  memcpy(&api->shutdown, &fns[2], sizeof fns[2]);
  memcpy(&api->capture_now, &fns[3], sizeof fns[3]);
  memcpy(&api->flush, &fns[4], sizeof fns[4]);
  memcpy(&api->backtrace, &fns[5], sizeof fns[5]);
}

/* A "Key:   123 kB" line of /proc/self/status. */
static double status_value(const char *status, const char *key) {
  const char *p = strstr(status, key);
  return p ? strtod(p + strlen(key), NULL) : -1;
}

/* Distinct shared objects in /proc/self/maps. The list is static: on the
   stack (128 KiB, in main's frame once inlined) it would make the app's
   main thread that deep, and the SDK's copy of that stack (the watched
   thread's first capture, blocked) that big. */
static int count_libraries(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[PATH_MAX + 128];
  static char seen[512][256];
  int n = 0;
  while (f && fgets(line, sizeof line, f)) {
    char *path = strchr(line, '/');
    if (!path || !strstr(path, ".so")) continue;
    path[strcspn(path, "\n")] = '\0';
    bool dup = false;
    for (int i = 0; i < n && !dup; i++)
      dup = strncmp(seen[i], path, sizeof seen[i] - 1) == 0;
    if (!dup && n < 512) snprintf(seen[n++], sizeof seen[0], "%s", path);
  }
  if (f) fclose(f);
  return n;
}

/* glibc's arenas: how many (malloc_info), and what the ones other than the
   main arena keep resident. Their heaps are the anonymous read-write
   mappings that start on a 64 MiB boundary (glibc reserves each heap of a
   thread arena as 64 MiB, aligned, and makes its used start writable);
   malloc_info's "system" size would count what they have mapped, also the
   pages malloc_trim gave back. */
static void count_arenas(double *arenas, double *arena_kb) {
  char *xml = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&xml, &len);
  malloc_info(0, m);
  fclose(m);
  *arenas = 0;
  for (const char *p = xml; (p = strstr(p, "<heap nr=\"")) != NULL; p++)
    (*arenas)++;
  free(xml);
  *arena_kb = 0;
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[PATH_MAX + 128];
  bool in_heap = false;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char perms[8];
    int name_at = 0;
    if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &name_at) == 3) {
      in_heap = lo % (64ul << 20) == 0 && strcmp(perms, "rw-p") == 0 &&
                (line[name_at] == '\n' || line[name_at] == '\0');
    } else if (in_heap && strncmp(line, "Rss:", 4) == 0) {
      *arena_kb += strtod(line + 4, NULL);
    }
  }
  if (f) fclose(f);
}

/* The start of a /proc file as a string. */
static void read_proc(const char *path, char *buf, size_t len) {
  FILE *s = fopen(path, "r");
  size_t n = s ? fread(buf, 1, len - 1, s) : 0;
  buf[n] = '\0';
  if (s) fclose(s);
}

static void snapshot(figures_t *f) {
  char status[8192], rollup[4096];
  read_proc("/proc/self/status", status, sizeof status);
  read_proc("/proc/self/smaps_rollup", rollup, sizeof rollup);
  /* PSS shares each library page among the processes mapping it; USS is
     what this process alone holds (what leaving would free). */
  f->pss_kb = status_value(rollup, "\nPss:");
  f->uss_kb = status_value(rollup, "Private_Clean:") + status_value(rollup, "Private_Dirty:");
  f->rss_kb = status_value(status, "VmRSS:");
  f->anon_kb = status_value(status, "RssAnon:");
  f->file_kb = status_value(status, "RssFile:");
  f->threads = status_value(status, "Threads:");
  f->libs = count_libraries();
  count_arenas(&f->arenas, &f->arena_kb);
}

/* With FOOTPRINT_DETAIL=prefix: /proc/self/smaps and malloc_info into
   prefix-APP-MODE.smaps and .malloc, to see which mappings hold the bytes. */
static void dump_detail(const char *app, const char *mode) {
  const char *dir = getenv("FOOTPRINT_DETAIL");
  if (!dir) return;
  char path[PATH_MAX], name[PATH_MAX + 16], cmd[2 * PATH_MAX];
  snprintf(path, sizeof path, "%s-%s-%s", dir, app, mode);
  snprintf(cmd, sizeof cmd, "cp /proc/%d/smaps %s.smaps", (int)getpid(), path);
  if (system(cmd) != 0) fprintf(stderr, "footprint_bench: no smaps\n");
  snprintf(name, sizeof name, "%s.malloc", path);
  FILE *m = fopen(name, "w");
  if (m) {
    malloc_info(0, m);
    fclose(m);
  }
}

static int run_child(const char *app, const char *mode, const char *sdk, const char *dir,
                     const char *endpoint) {
  start_app(app);
  sleep_ms(200);
  figures_t f = {0};
  sdk_api_t api = {0};
  bool with_sdk = strcmp(mode, "baseline") != 0;
  if (with_sdk) {
    /* rules: no perf_sdk_init, one perf_backtrace_thread: what the
       sampler's unwind rules for every loaded module cost on their own. */
    if (strcmp(mode, "disabled") == 0 || strcmp(mode, "rules") == 0)
      setenv("PERF_SDK_DISABLED", "1", 1);
    load_sdk(sdk, &api);
    perf_sdk_config_t cfg;
    api.config_init(&cfg, sizeof cfg);
    char report[PATH_MAX], data[PATH_MAX];
    snprintf(report, sizeof report, "%s/report-%d.txt", dir, (int)getpid());
    snprintf(data, sizeof data, "%s/data-%d", dir, (int)getpid());
    cfg.app_name = "footprint";
    cfg.data_dir = data;
    cfg.sink = strcmp(mode, "file") == 0       ? PERF_SINK_FILE
               : strncmp(mode, "http", 4) == 0 ? PERF_SINK_HTTP
                                               : PERF_SINK_NONE;
    cfg.sink_path = report;
    cfg.endpoint = endpoint;
    double t0 = now_ms();
    if (api.init(&cfg) != 0) return 3;
    f.init_ms = now_ms() - t0;
    uintptr_t pcs[8];
    size_t depth;
    /* Waits for the rules the writer compiles (or compiles them, "rules"). */
    if (strcmp(mode, "disabled") != 0) api.backtrace(0, pcs, 8, &depth);
    f.ready_ms = now_ms() - t0;
    if (strcmp(mode, "file") == 0 || strcmp(mode, "http") == 0) {
      api.capture_now("footprint"); /* the sink opened, libcurl loaded, one batch sent */
      api.flush(10000);
    }
  }
  sleep_ms(SETTLE_MS);
  snapshot(&f);
  dump_detail(app, mode);
  printf("%f %f %f %f %f %f %f %f %f %f %f\n", f.rss_kb, f.anon_kb, f.file_kb, f.pss_kb, f.uss_kb,
         f.libs, f.arenas, f.arena_kb, f.threads, f.init_ms, f.ready_ms);
  fflush(stdout);
  /* FOOTPRINT_NO_SHUTDOWN: exit at once, so that what a heap profiler
     (heaptrack) reports as leaked is what was live at the snapshot. */
  if (getenv("FOOTPRINT_NO_SHUTDOWN")) exit(0);
  if (with_sdk) api.shutdown(5000);
  return 0;
}

/* ---- the driver ----------------------------------------------------------- */

static bool run_once(const char *self, const char *app, const char *mode, const char *sdk,
                     const char *dir, const char *endpoint, figures_t *out) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl(self, self, "--child", app, mode, sdk, dir, endpoint, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char line[512] = "";
  FILE *f = fdopen(fds[0], "r");
  bool ok = f && fgets(line, sizeof line, f) &&
            sscanf(line, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", &out->rss_kb, &out->anon_kb,
                   &out->file_kb, &out->pss_kb, &out->uss_kb, &out->libs, &out->arenas,
                   &out->arena_kb, &out->threads, &out->init_ms, &out->ready_ms) == 11;
  if (f) fclose(f);
  int status;
  waitpid(pid, &status, 0);
  return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of each figure over n runs. */
static void median(const figures_t *runs, int n, figures_t *out) {
  size_t fields = sizeof *out / sizeof(double);
  for (size_t k = 0; k < fields; k++) {
    double v[64];
    for (int i = 0; i < n; i++)
      v[i] = ((const double *)&runs[i])[k];
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    ((double *)out)[k] = v[n / 2];
  }
}

static const char *k_modes[] = {"baseline", "disabled", "rules", "none", "file", "http0", "http"};
#define MODE_COUNT (sizeof k_modes / sizeof k_modes[0])

static void report_app(const char *app, const figures_t *m) {
  const figures_t *b = &m[0];
  printf("\napp %s (medians; deltas against baseline, the same app without the SDK)\n", app);
  printf("%-9s %7s %7s %7s %7s %7s %7s %5s %5s %6s %7s %7s %7s %8s\n", "mode", "rss KiB", "+rss",
         "+anon", "+file", "+pss", "+uss", "libs", "+libs", "arenas", "+arena", "threads",
         "init ms", "ready ms");
  for (size_t i = 0; i < MODE_COUNT; i++) {
    const figures_t *f = &m[i];
    printf("%-9s %7.0f %+7.0f %+7.0f %+7.0f %+7.0f %+7.0f %5.0f %+5.0f %6.0f %+7.0f %7.0f %7.2f "
           "%8.2f\n",
           k_modes[i], f->rss_kb, f->rss_kb - b->rss_kb, f->anon_kb - b->anon_kb,
           f->file_kb - b->file_kb, f->pss_kb - b->pss_kb, f->uss_kb - b->uss_kb, f->libs,
           f->libs - b->libs, f->arenas, f->arena_kb - b->arena_kb, f->threads, f->init_ms,
           f->ready_ms);
  }
  const double limits_kb[] = {0, 0.3 * 1024, 0, 2 * 1024, 2 * 1024, 4 * 1024, 4 * 1024};
  for (size_t i = 1; i < MODE_COUNT; i++) {
    if (!limits_kb[i]) continue;
    double added = m[i].rss_kb - b->rss_kb;
    printf("target %-8s added %6.0f KiB <= %5.0f KiB: %s\n", k_modes[i], added, limits_kb[i],
           added <= limits_kb[i] ? "PASS" : "MISS");
  }
}

int main(int argc, char **argv) {
  if (argc == 7 && strcmp(argv[1], "--child") == 0)
    return run_child(argv[2], argv[3], argv[4], argv[5], argv[6]);
  int runs = 5;
  const char *sdk = PERF_SDK_LIBRARY;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--runs") == 0) runs = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--sdk") == 0) sdk = argv[i + 1];
  }
  if (runs < 1 || runs > 64) runs = 5;
  char dir[] = "/tmp/footprint_bench.XXXXXX";
  if (!mkdtemp(dir)) return 2;
  http_server_t *srv = http_server_start();
  if (!srv) return 2;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 2;
  self[n] = '\0';
  printf("footprint_bench: %d runs per row, sdk %s\n", runs, sdk);
  const char *apps[] = {"idle50", "gtk"};
  for (size_t a = 0; a < 2; a++) {
    figures_t med[MODE_COUNT];
    for (size_t m = 0; m < MODE_COUNT; m++) {
      figures_t all[64];
      int got = 0;
      for (int r = 0; r < runs; r++)
        got += run_once(self, apps[a], k_modes[m], sdk, dir, http_server_url(srv), &all[got]);
      if (got == 0) {
        fprintf(stderr, "footprint_bench: %s %s did not run\n", apps[a], k_modes[m]);
        return 2;
      }
      median(all, got, &med[m]);
    }
    report_app(apps[a], med);
  }
  http_server_stop(srv);
  char cmd[PATH_MAX + 16];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "footprint_bench: could not remove %s\n", dir);
  return 0;
}
