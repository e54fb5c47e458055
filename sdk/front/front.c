/*
 * front.c - libperfsdk.so, the library an app links: the public API without
 * the SDK's weight. The SDK itself (sampler, monitors, writer, libdw,
 * libelf, zstd, protobuf-c, ...) is libperfsdk-core.so, loaded from the
 * front's own directory the first time something needs it: perf_sdk_init
 * with the SDK enabled, or a sampler call. An app started with
 * PERF_SDK_DISABLED=1 (or whose config is rejected) maps this library
 * only.
 *
 * Until the core is loaded, every call answers as the SDK does before any
 * perf_sdk_init: the loop marks, capture_now, flush, get_stats and
 * shutdown return PERF_E_NOT_INITIALIZED after the same argument checks;
 * perf_sdk_config_init and the configuration checks of perf_sdk_init are
 * the core's own code (sdk/pipeline/config.c, built into both). Once it is
 * loaded every call goes to the core; the forwarders are tail calls (no
 * frame of the front is ever on a captured stack, and perf_sdk_capture_now
 * sees the app's return address).
 *
 * The core is never unloaded: its handlers (signal, fork, exit) stay
 * installed for the life of the process.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "perf_sdk.h"
#include "sdk/base/log.h"
#include "sdk/pipeline/config.h"

#define CORE_SONAME "libperfsdk-core.so.0"

/* Every public call the core answers: return type, name, parameters. */
#define CORE_CALLS(X)                                                                              \
  X(int, perf_sdk_init, (const perf_sdk_config_t *cfg))                                            \
  X(int, perf_sdk_shutdown, (int timeout_ms))                                                      \
  X(int, perf_sdk_watch_current_thread, (void))                                                    \
  X(int, perf_sdk_loop_register, (const char *name, int threshold_ms))                             \
  X(int, perf_sdk_loop_unregister, (void))                                                         \
  X(int, perf_sdk_loop_threshold_ms, (void))                                                       \
  X(int, perf_sdk_loop_busy, (void))                                                               \
  X(int, perf_sdk_loop_idle, (void))                                                               \
  X(int, perf_sdk_loop_busy_label, (const char *label))                                            \
  X(int, perf_sdk_heartbeat, (void))                                                               \
  X(int, perf_sdk_loop_nested_begin, (void))                                                       \
  X(int, perf_sdk_loop_nested_end, (void))                                                         \
  X(int, perf_sdk_pause, (void))                                                                   \
  X(int, perf_sdk_resume, (void))                                                                  \
  X(int, perf_sdk_capture_now, (const char *reason))                                               \
  X(int, perf_sdk_flush, (int timeout_ms))                                                         \
  X(int, perf_sdk_get_stats_sized, (perf_sdk_stats_t * stats, size_t struct_size))                 \
  X(void, perf_sampler_options_init, (perf_sampler_options_t * opts))                              \
  X(int, perf_sampler_configure, (const perf_sampler_options_t *opts))                             \
  X(int, perf_sampler_signal, (void))                                                              \
  X(int, perf_backtrace_thread, (pid_t tid, uintptr_t * pcs, size_t max, size_t * count))          \
  X(int, perf_backtrace_thread_text, (pid_t tid, char **out_text))                                 \
  X(int, perf_backtrace_all_threads_text, (char **out_text))

#define CORE_FIELD(ret, name, params) ret(*name) params;
static struct { CORE_CALLS(CORE_FIELD) } g_core;

static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;
static atomic_bool g_loaded; /* every g_core pointer is set */
static char g_load_error[PATH_MAX + 256];

/* The core's path: beside this library, as the linker found it. */
static void core_path(char *out, size_t len) {
  Dl_info info;
  const char *self = dladdr((void *)&core_path, &info) ? info.dli_fname : NULL;
  const char *slash = self ? strrchr(self, '/') : NULL;
  if (slash)
    snprintf(out, len, "%.*s/%s", (int)(slash - self), self, CORE_SONAME);
  else
    snprintf(out, len, "%s", CORE_SONAME);
}

static bool core_version_fits(void *h, const char *path);

static void load_core(void) {
  char path[PATH_MAX];
  core_path(path, sizeof path);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    snprintf(g_load_error, sizeof g_load_error, "perf sdk: cannot load %s: %s", path,
             why ? why : "unknown error");
    return;
  }
#define CORE_RESOLVE(ret, name, params)                                                            \
  if (!(*(void **)&g_core.name = dlsym(h, #name))) {                                               \
    snprintf(g_load_error, sizeof g_load_error, "perf sdk: %s has no %s", path, #name);            \
    return;                                                                                        \
  }
  CORE_CALLS(CORE_RESOLVE)
  if (!core_version_fits(h, path)) return;
  atomic_store_explicit(&g_loaded, true, memory_order_release);
}

/* The front's calls and the config layout it checks are those of its
   MAJOR.MINOR: a core of another MAJOR.MINOR is refused, one of another
   PATCH is used (noted in the log). An app's init then fails with
   PERF_E_UNSUPPORTED, the message naming both versions. */
static bool core_version_fits(void *h, const char *path) {
  const char *(*version_fn)(void);
  *(void **)&version_fn = dlsym(h, "perf_sdk_version");
  const char *mine = perf_sdk_version(), *its = version_fn ? version_fn() : "before 0.1.0";
  unsigned a[3] = {0}, b[3] = {0};
  bool parsed = sscanf(mine, "%u.%u.%u", &a[0], &a[1], &a[2]) == 3 && version_fn &&
                sscanf(its, "%u.%u.%u", &b[0], &b[1], &b[2]) == 3;
  if (parsed && a[0] == b[0] && a[1] == b[1]) {
    if (a[2] != b[2])
      perf__log(
          PERF__LOG_INFO,
          "perf sdk: libperfsdk.so is version %s, %s is version %s: used (the same major.minor)",
          mine, path, its);
    return true;
  }
  snprintf(g_load_error, sizeof g_load_error,
           "perf sdk: libperfsdk.so is version %s but %s is version %s: the front and its core "
           "must have the same major.minor version; install both from one build",
           mine, path, its);
  return false;
}

static bool loaded(void) {
  return atomic_load_explicit(&g_loaded, memory_order_acquire);
}

/* Load the core once; PERF_E_UNSUPPORTED (logged through the app's log
   callback, when it gave one) when it cannot be. */
static int core(void) {
  pthread_once(&g_load_once, load_core);
  if (loaded()) return PERF_OK;
  perf__log(PERF__LOG_ERROR, "%s", g_load_error);
  return PERF_E_UNSUPPORTED;
}

/* ---- calls that load the core -------------------------------------------- */

int perf_sdk_init(const perf_sdk_config_t *cfg) {
  if (!cfg) return PERF_E_INVALID_ARGUMENT;
  if (!loaded()) {
    /* The core's own checks (same code): a rejected config or a disabled
       SDK does not need it. They log through cfg->log_fn only on error;
       what the environment's names and PERF_SDK_DISABLED's value deserve
       is said by the core's checks, or here when the core is not called. */
    perf__config_t resolved;
    bool disabled = false;
    int err = perf__config_resolve(cfg, &resolved, &disabled, true);
    if (err) {
      perf__config_env_warn(cfg);
      return err;
    }
    if (disabled) {
      perf__log(PERF__LOG_INFO, "perf sdk disabled by PERF_SDK_DISABLED");
      return PERF_OK;
    }
    perf__config_free(&resolved);
    if ((err = core()) != PERF_OK) {
      perf__config_env_warn(cfg);
      return err;
    }
  }
  return g_core.perf_sdk_init(cfg);
}

void perf_sampler_options_init(perf_sampler_options_t *opts) {
  if (core() == PERF_OK)
    g_core.perf_sampler_options_init(opts);
  else if (opts)
    memset(opts, 0, sizeof *opts);
}

#define LOADING_CALL(name, params, args)                                                           \
  int name params {                                                                                \
    int err = core();                                                                              \
    if (err) return err;                                                                           \
    return g_core.name args;                                                                       \
  }
LOADING_CALL(perf_sampler_configure, (const perf_sampler_options_t *opts), (opts))
LOADING_CALL(perf_sampler_signal, (void), ())
LOADING_CALL(perf_backtrace_thread, (pid_t tid, uintptr_t *pcs, size_t max, size_t *count),
             (tid, pcs, max, count))
LOADING_CALL(perf_backtrace_thread_text, (pid_t tid, char **out_text), (tid, out_text))
LOADING_CALL(perf_backtrace_all_threads_text, (char **out_text), (out_text))

/* ---- calls of a running SDK: not initialized until the core is loaded ---- */

#define RUNNING_CALL(name, params, args, check)                                                    \
  int name params {                                                                                \
    if (!loaded()) return (check) ? PERF_E_INVALID_ARGUMENT : PERF_E_NOT_INITIALIZED;              \
    return g_core.name args;                                                                       \
  }
RUNNING_CALL(perf_sdk_shutdown, (int timeout_ms), (timeout_ms), timeout_ms<0 || timeout_ms> 600000)
RUNNING_CALL(perf_sdk_flush, (int timeout_ms), (timeout_ms), timeout_ms<0 || timeout_ms> 600000)
RUNNING_CALL(perf_sdk_get_stats_sized, (perf_sdk_stats_t * stats, size_t struct_size),
             (stats, struct_size), !stats || struct_size < 8 || struct_size % 8)
RUNNING_CALL(perf_sdk_capture_now, (const char *reason), (reason), false)
RUNNING_CALL(perf_sdk_watch_current_thread, (void), (), false)
RUNNING_CALL(perf_sdk_loop_register, (const char *name, int threshold_ms), (name, threshold_ms),
             false)
RUNNING_CALL(perf_sdk_loop_unregister, (void), (), false)
RUNNING_CALL(perf_sdk_loop_threshold_ms, (void), (), false)
RUNNING_CALL(perf_sdk_loop_busy, (void), (), false)
RUNNING_CALL(perf_sdk_loop_idle, (void), (), false)
RUNNING_CALL(perf_sdk_loop_busy_label, (const char *label), (label), false)
RUNNING_CALL(perf_sdk_heartbeat, (void), (), false)
RUNNING_CALL(perf_sdk_loop_nested_begin, (void), (), false)
RUNNING_CALL(perf_sdk_loop_nested_end, (void), (), false)
RUNNING_CALL(perf_sdk_pause, (void), (), false)
RUNNING_CALL(perf_sdk_resume, (void), (), false)

/* ---- answered here -------------------------------------------------------- */

/* perf_strerror and perf_free are sdk/base/error.c's, perf_sdk_version
   sdk/base/version.c's, perf_sdk_config_init is sdk/pipeline/config.c's
   (perf_sdk_config_init_sized): built into this library too. */

pid_t perf_main_thread_id(void) {
  return getpid();
}
