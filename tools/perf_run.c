/*
 * perf_run.c - perf-run: starts a program with the SDK in it, without
 * changing or rebuilding the program:
 *
 *   perf-run [--sink none|file|http] [--sink-path FILE] [--endpoint URL]
 *            [--api-key KEY] [--app-name NAME] [--app-version V]
 *            [--threshold-ms N] [--log FILE] [--follow-exec]
 *            [--preload LIB] -- PROGRAM [ARG...]
 *
 * The options become the SDK's PERF_SDK_* variables (any already in the
 * environment stay, the options win), libperfsdk-preload.so goes first
 * into LD_PRELOAD, and perf-run executes the program in its own place
 * (same pid, same signals). The library starts the SDK and finds the
 * program's loops by their waits (sdk/preload/). A program the loader
 * would run without LD_PRELOAD (static, setuid, setgid, with file
 * capabilities) is refused with the reason, as bad usage is.
 *
 * Exit status: the program's; 2 usage; 126 the program is refused or
 * cannot be executed; 127 it is not found.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_target.h"

#define PRELOAD_NAME "libperfsdk-preload.so"
#define EXIT_USAGE 2
#define EXIT_REFUSED 126
#define EXIT_NOT_FOUND 127

/* Where the library is: installed, <prefix>/<libdir>/perfsdk/ with
   perf-run in <prefix>/bin (PERF_RUN_LIBDIR is the install's lib directory
   relative to its prefix); in a build tree, PERF_RUN_BUILD_PRELOAD. */
#ifndef PERF_RUN_LIBDIR
#define PERF_RUN_LIBDIR "lib"
#endif
#ifndef PERF_RUN_BUILD_PRELOAD
#define PERF_RUN_BUILD_PRELOAD ""
#endif

static const char k_usage[] =
    "usage: perf-run [OPTION]... -- PROGRAM [ARG]...\n"
    "Run PROGRAM, unmodified and dynamically linked, with the perf SDK loaded into it:\n"
    "every thread that waits in epoll_wait, poll or select is a watched loop.\n"
    "  --sink none|file|http  where events go (PERF_SDK_SINK; default none)\n"
    "  --sink-path FILE       the report file of the file sink (PERF_SDK_SINK_PATH)\n"
    "  --endpoint URL         the collector of the http sink (PERF_SDK_ENDPOINT)\n"
    "  --api-key KEY          its key (PERF_SDK_API_KEY)\n"
    "  --app-name NAME        (PERF_SDK_APP_NAME; default the program's name)\n"
    "  --app-version V        (PERF_SDK_APP_VERSION)\n"
    "  --threshold-ms N       hang threshold of every loop, 20..60000 "
    "(PERF_SDK_HANG_THRESHOLD_MS)\n"
    "  --log FILE             the SDK's log lines, appended (PERF_SDK_LOG_FILE; default none)\n"
    "  --follow-exec          programs PROGRAM executes get the SDK too (PERF_SDK_FOLLOW_EXEC)\n"
    "  --preload LIB          the preload library (default: the installed " PRELOAD_NAME ")\n"
    "Other PERF_SDK_* variables of the environment apply as they are (docs/operations.md).\n"
    "Exit status: PROGRAM's; 2 usage; 126 PROGRAM refused (static, setuid, ...) or not\n"
    "executable; 127 PROGRAM not found.\n";

static int usage_error(const char *fmt, const char *arg);
static int set_env(const char *name, const char *value);
static int find_preload(const char *given, char *out, size_t out_size);
static int prepend_preload(const char *library);
static bool in_range(const char *text, long lo, long hi);

int main(int argc, char **argv) {
  static const struct option k_opts[] = {
      {"sink", required_argument, NULL, 's'},
      {"sink-path", required_argument, NULL, 'p'},
      {"endpoint", required_argument, NULL, 'e'},
      {"api-key", required_argument, NULL, 'k'},
      {"app-name", required_argument, NULL, 'n'},
      {"app-version", required_argument, NULL, 'v'},
      {"threshold-ms", required_argument, NULL, 't'},
      {"log", required_argument, NULL, 'l'},
      {"follow-exec", no_argument, NULL, 'f'},
      {"preload", required_argument, NULL, 'P'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  const char *preload = NULL;
  int opt;
  while ((opt = getopt_long(argc, argv, "+", k_opts, NULL)) != -1) {
    int err = 0;
    switch (opt) {
    case 's':
      if (strcmp(optarg, "none") && strcmp(optarg, "file") && strcmp(optarg, "http"))
        return usage_error("--sink %s: must be none, file or http", optarg);
      err = set_env("PERF_SDK_SINK", optarg);
      break;
    case 'p': err = set_env("PERF_SDK_SINK_PATH", optarg); break;
    case 'e': err = set_env("PERF_SDK_ENDPOINT", optarg); break;
    case 'k': err = set_env("PERF_SDK_API_KEY", optarg); break;
    case 'n': err = set_env("PERF_SDK_APP_NAME", optarg); break;
    case 'v': err = set_env("PERF_SDK_APP_VERSION", optarg); break;
    case 't':
      if (!in_range(optarg, 20, 60000))
        return usage_error("--threshold-ms %s: must be a number of milliseconds, 20..60000",
                           optarg);
      err = set_env("PERF_SDK_HANG_THRESHOLD_MS", optarg);
      break;
    case 'l': err = set_env("PERF_SDK_LOG_FILE", optarg); break;
    case 'f': err = set_env("PERF_SDK_FOLLOW_EXEC", "1"); break;
    case 'P': preload = optarg; break;
    case 'h': fputs(k_usage, stdout); return 0;
    default: fputs(k_usage, stderr); return EXIT_USAGE;
    }
    if (err) return 1;
  }
  if (optind >= argc) return usage_error("no program given%s", " (perf-run ... -- PROGRAM)");
  const char *sink = getenv("PERF_SDK_SINK");
  if (sink && strcmp(sink, "file") == 0 && !getenv("PERF_SDK_SINK_PATH"))
    return usage_error("--sink file needs --sink-path FILE%s", "");
  if (sink && strcmp(sink, "http") == 0 && !getenv("PERF_SDK_ENDPOINT"))
    return usage_error("--sink http needs --endpoint URL%s", "");

  const char *program = argv[optind];
  char path[PATH_MAX], why[512];
  if (perf__run_find(program, path, sizeof path, why, sizeof why) != 0) {
    fprintf(stderr, "perf-run: %s: %s\n", program, why);
    return EXIT_NOT_FOUND;
  }
  if (perf__run_check(path, why, sizeof why) != 0) {
    fprintf(stderr, "perf-run: %s %s\n", path, why);
    return EXIT_REFUSED;
  }
  char library[PATH_MAX];
  if (find_preload(preload, library, sizeof library) != 0) return EXIT_USAGE;
  if (prepend_preload(library) != 0) return 1;
  execv(path, argv + optind);
  fprintf(stderr, "perf-run: %s: %s\n", path, strerror(errno));
  return errno == ENOENT ? EXIT_NOT_FOUND : EXIT_REFUSED;
}

static int usage_error(const char *fmt, const char *arg) {
  fputs("perf-run: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\n(perf-run --help for the options)\n", stderr);
  return EXIT_USAGE;
}

static int set_env(const char *name, const char *value) {
  if (setenv(name, value, 1) == 0) return 0;
  fprintf(stderr, "perf-run: setting %s: %s\n", name, strerror(errno));
  return -1;
}

/* The library as an absolute path: --preload's, else the installed one
   (../<libdir>/ from perf-run's own directory), else the build tree's. */
static int find_preload(const char *given, char *out, size_t out_size) {
  char candidate[PATH_MAX + 64] = "";
  if (given) {
    snprintf(candidate, sizeof candidate, "%s", given);
  } else {
    char self[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
      self[n] = '\0';
      char *slash = strrchr(self, '/');
      if (slash) *slash = '\0';
      snprintf(candidate, sizeof candidate, "%s/../%s/perfsdk/%s", self, PERF_RUN_LIBDIR,
               PRELOAD_NAME);
    }
    if (access(candidate, R_OK) != 0 && PERF_RUN_BUILD_PRELOAD[0])
      snprintf(candidate, sizeof candidate, "%s", PERF_RUN_BUILD_PRELOAD);
  }
  char resolved[PATH_MAX];
  if (!realpath(candidate, resolved) ||
      (size_t)snprintf(out, out_size, "%s", resolved) >= out_size) {
    fprintf(stderr, "perf-run: the preload library %s: %s (give it with --preload LIB)\n",
            candidate[0] ? candidate : PRELOAD_NAME, candidate[0] ? strerror(errno) : "not found");
    return -1;
  }
  return 0;
}

/* LD_PRELOAD=<library>[:<what it was>]. */
static int prepend_preload(const char *library) {
  const char *old = getenv("LD_PRELOAD");
  size_t n = strlen(library) + (old ? strlen(old) + 1 : 0) + 1;
  char *value = malloc(n);
  if (!value) {
    fprintf(stderr, "perf-run: out of memory\n");
    return -1;
  }
  snprintf(value, n, old && *old ? "%s:%s" : "%s", library, old);
  int err = set_env("LD_PRELOAD", value);
  free(value);
  return err;
}

static bool in_range(const char *text, long lo, long hi) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  return errno == 0 && end != text && *end == '\0' && v >= lo && v <= hi;
}
