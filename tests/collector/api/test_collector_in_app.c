/*
 * test_collector_in_app.c - in-app frames and the headlines that point at
 * the app (collector/model/in_app.h, collector/api/headline.h) in the real
 * perf-collector, fed by this process with the real SDK (sink = http):
 *  - read_hang: the watched thread blocks in libc's read() on a pipe,
 *    called by inapp_lib_read_config (libinapp_lib.so, a library of this
 *    program's own in the build tree) called by reload_config (this
 *    executable). Every frame of the event's stacks (GET
 *    /api/v1/events/<id>) is in_app exactly when its module is this
 *    executable or that library, and "executable" exactly when it is this
 *    executable; the top-stacks group's marks are its frames' marks, and
 *    its headline is inapp_lib_read_config (the library's path), with the
 *    innermost frame, libc's, beside it.
 *  - glib_hang: a GLib timeout callback (on_slow_tick, this executable)
 *    blocks in g_mutex_lock on a mutex another thread holds: libglib's and
 *    libc's frames innermost, GLib's dispatch outside; the headline is
 *    on_slow_tick.
 *  - cpu_stack: a thread burning CPU in libc's memset called by
 *    cpu_fill_buffers: the heaviest CPU stack's headline is
 *    cpu_fill_buffers, its innermost frame a system library's.
 *  - rules: the read hang stored, then the collector restarted on the same
 *    database with --in-app-include / --in-app-exclude: a file name glob
 *    excluding the library, a path including it back (include wins), libc
 *    included, the build directory excluded (a path prefix, over the
 *    executable mark: no frame in-app, the headline the innermost frame):
 *    the stored stack's marks and headline follow each run's rules.
 *  - path_rules: hand-made batches, an older SDK's (no Module.executable)
 *    and a newer one's: the default rules by path, frame by frame (the
 *    vDSO, libc, a GIO module deep under /usr/lib, the SDK's own library,
 *    /usr/local/lib, /opt, a program under /usr/lib unmarked, a module
 *    known by name only, a frame without module), the executable mark on
 *    that program, the headlines of versions/compare's groups (the two
 *    stacks as versions 1.0 and 2.0), then the rules of two restarts
 *    (prefixes, basename globs, '*').
 *  - bad_flags: an empty, relative or too long rule, a 65th rule: exit 2,
 *    the message naming the flag and the value.
 */
#include <dlfcn.h>
#include <glib.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "perf/v1/perf.pb-c.h"
#include "perf_sdk.h"
#include "perf_sdk_glib.h"
#include "sdk_util.h"
#include "tempdir.h"
#include "test_util.h"

#define HANG_SAMPLES 10 /* samples of a hang in its blocking call before it ends */
#define WAIT_MS 20000

ssize_t inapp_lib_read_config(int fd, char *buf, size_t size); /* libinapp_lib.so */

static char g_exe[PATH_MAX], g_lib[PATH_MAX]; /* as the SDK reports them: real paths */

static void find_paths(void) {
  CHECK(realpath("/proc/self/exe", g_exe) != NULL);
  Dl_info di;
  CHECK(dladdr((void *)inapp_lib_read_config, &di) != 0 && di.dli_fname);
  CHECK(realpath(di.dli_fname, g_lib) != NULL);
  CHECKF(strcmp(g_exe, g_lib) != 0 && strstr(g_lib, "libinapp_lib"), "library %s", g_lib);
}

/* ---- the SDK's side ---------------------------------------------------------- */

static void sdk_start(const collector_t *c, bool cpu) {
  perf_sdk_config_t cfg;
  sdk_config_short_hangs(&cfg);
  static char data_dir[160];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", tempdir_make("perf-in-app"));
  sdk_config_upload(&cfg, "in-app-test", c->url, GOOD_KEY, data_dir);
  if (cpu) { /* as test_collector_api's burst: what a loaded machine still gives */
    cfg.cpu_threshold_percent = 5;
    cfg.cpu_window_ms = 1000;
    cfg.cpu_sample_hz = 200;
    cfg.cpu_burst_ms = 300;
    cfg.cpu_cooldown_ms = 0;
  }
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
}

/* Once the monitor has recorded the event(s) (a hang is recorded when
   the monitor sees its unit end, after perf_sdk_loop_idle returned),
   everything sent and acknowledged, then shut down. */
static void sdk_stop(void) {
  perf_sdk_stats_t st;
  SDK_WAIT_FOR_STATS(st, st.events_recorded >= 1, WAIT_MS, 1);
  CHECK_EQ_INT(perf_sdk_flush(30000), PERF_OK);
  st = sdk_stats();
  CHECK(st.batches_written >= 1);
  CHECK_EQ_INT(st.batches_sent, st.batches_written);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

/* Until the SDK has taken `more` samples from now on. */
static void wait_samples(uint64_t more) {
  long long end = now_ms() + WAIT_MS;
  uint64_t from = sdk_stats().samples_taken, n;
  while ((n = sdk_stats().samples_taken) < from + more) {
    CHECKF(now_ms() < end, "%llu samples in %d ms", (unsigned long long)(n - from), WAIT_MS);
    sleep_ms(1);
  }
}

/* The thread blocked in system call nr (HANG_SAMPLES samples of it), then
   released by release(arg). */
typedef struct unblocker_s {
  pid_t tid;
  long nr;
  void (*release)(void *arg);
  void *arg;
} unblocker_t;

static void *unblock(void *arg) {
  unblocker_t *u = arg;
  wait_in_syscall(u->tid, u->nr, WAIT_MS);
  wait_samples(HANG_SAMPLES);
  u->release(u->arg);
  return NULL;
}

static void write_byte(void *arg) {
  CHECK(write(*(int *)arg, "x", 1) == 1);
}

/* The app's function reading its configuration through its own library. */
static CHAIN void reload_config(int fd) {
  char buf[8];
  CHECK_EQ_INT(inapp_lib_read_config(fd, buf, sizeof buf), 1);
}

static CHAIN void run_read_hang(void) {
  int p[2];
  CHECK(pipe(p) == 0);
  unblocker_t u = {(pid_t)syscall(SYS_gettid), SYS_read, write_byte, &p[1]};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, unblock, &u) == 0);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  reload_config(p[0]);
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
  pthread_join(t, NULL);
  close(p[0]);
  close(p[1]);
}

static GMutex g_tick_lock;

static void unlock_tick(void *arg) {
  (void)arg;
  g_mutex_unlock(&g_tick_lock);
}

/* A GLib callback stuck on a lock: GLib's dispatch called it. */
static CHAIN gboolean on_slow_tick(gpointer loop) {
  g_mutex_lock(&g_tick_lock);
  g_mutex_unlock(&g_tick_lock);
  g_main_loop_quit(loop);
  return G_SOURCE_REMOVE;
}

typedef struct holder_s {
  unblocker_t u;
  atomic_int held;
} holder_t;

/* Holds the tick's lock until the callback has waited HANG_SAMPLES
   samples for it in a futex. */
static void *hold_tick(void *arg) {
  holder_t *h = arg;
  g_mutex_lock(&g_tick_lock); /* GLib's mutex: unlocked by this thread */
  atomic_store(&h->held, 1);
  return unblock(&h->u);
}

static CHAIN void run_glib_hang(void) {
  holder_t h = {{(pid_t)syscall(SYS_gettid), SYS_futex, unlock_tick, NULL}, 0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, hold_tick, &h) == 0);
  while (!atomic_load(&h.held))
    sleep_ms(1);
  GMainLoop *loop = g_main_loop_new(NULL, FALSE);
  CHECK_EQ_INT(perf_sdk_glib_watch(NULL), 0);
  g_timeout_add(10, on_slow_tick, loop);
  g_main_loop_run(loop);
  CHECK_EQ_INT(perf_sdk_glib_unwatch(NULL), 0);
  g_main_loop_unref(loop);
  pthread_join(t, NULL);
}

static atomic_int g_cpu_stop;
static volatile size_t g_buf_size = 1 << 20; /* volatile: memset stays a call into libc */
static volatile unsigned char g_cpu_sink;

static CHAIN void cpu_fill_buffers(unsigned char *buf) {
  for (unsigned i = 0; !atomic_load_explicit(&g_cpu_stop, memory_order_relaxed); i++) {
    size_t n = g_buf_size;
    memset(buf, (int)i, n);
    g_cpu_sink = buf[i % n];
  }
}

static void *cpu_thread(void *arg) {
  (void)arg;
  unsigned char *buf = malloc(g_buf_size);
  CHECK(buf != NULL);
  cpu_fill_buffers(buf);
  free(buf);
  return NULL;
}

/* A CPU burst of one thread in cpu_fill_buffers, until one is recorded. */
static void run_cpu_burst(void) {
  uint64_t before = sdk_stats().events_recorded;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, cpu_thread, NULL) == 0);
  long long end = now_ms() + 60000;
  while (sdk_stats().events_recorded == before) {
    CHECKF(now_ms() < end, "no CPU burst recorded in 60 s");
    sleep_ms(20);
  }
  atomic_store(&g_cpu_stop, 1);
  pthread_join(t, NULL);
}

/* ---- the API's side ---------------------------------------------------------- */

static const char *str(const json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

static const char *base_of(const char *path) {
  const char *slash = path ? strrchr(path, '/') : NULL;
  return slash ? slash + 1 : path ? path : "";
}

static bool has_frame(const json_t *names, const char *fn) {
  size_t i;
  json_t *n;
  json_array_foreach(names, i, n) if (strcmp(json_string_value(n), fn) == 0) return true;
  return false;
}

/* The top-stacks group of kind whose frames hold fn (a new reference). */
static json_t *group_with(const collector_t *c, const char *kind, const char *fn) {
  char path[96];
  snprintf(path, sizeof path, "/api/v1/top-stacks?kind=%s&limit=1000", kind);
  long status;
  json_t *top = get_json(c, path, &status);
  CHECK_EQ_INT(status, 200);
  json_t *found = NULL, *s;
  size_t i;
  json_array_foreach(json_object_get(top, "stacks"), i, s) {
    if (!found && has_frame(json_object_get(s, "frames"), fn)) found = json_incref(s);
  }
  char *text = json_dumps(top, JSON_COMPACT);
  CHECKF(found != NULL, "no %s group with %s in %.2000s", kind, fn, text);
  free(text);
  json_decref(top);
  return found;
}

/* Which modules the collector should count in-app in a case. */
typedef bool (*expect_fn)(const char *module);

static bool exe_or_lib(const char *module) {
  return strcmp(module, g_exe) == 0 || strcmp(module, g_lib) == 0;
}

/* Every frame of every stack of the events of group sig: in_app as
   expected from its module, executable exactly on this executable's. */
static void check_event_frames(const collector_t *c, const char *sig, expect_fn expected) {
  long status;
  json_t *list = get_json(c, "/api/v1/events?kind=hang&limit=1000", &status);
  CHECK_EQ_INT(status, 200);
  size_t i, k, f, checked = 0;
  json_t *e, *s, *fr;
  json_array_foreach(json_object_get(list, "events"), i, e) {
    if (!str(e, "group") || strcmp(str(e, "group"), sig) != 0) continue;
    char path[64];
    snprintf(path, sizeof path, "/api/v1/events/%lld",
             (long long)json_integer_value(json_object_get(e, "id")));
    json_t *d = get_json(c, path, &status);
    CHECK_EQ_INT(status, 200);
    json_array_foreach(json_object_get(d, "stacks"), k, s) {
      json_array_foreach(json_object_get(s, "frames"), f, fr) {
        const char *module = str(fr, "module") ? str(fr, "module") : "";
        json_t *in_app = json_object_get(fr, "in_app");
        CHECKF(json_is_boolean(in_app) && json_is_true(in_app) == expected(module),
               "frame %zu %s of %s: in_app %s", f, str(fr, "function"), module,
               json_is_true(in_app) ? "true" : "false");
        bool exe = json_is_true(json_object_get(fr, "executable"));
        CHECKF(exe == (strcmp(module, g_exe) == 0), "frame %zu of %s: executable %d", f, module,
               exe);
        checked++;
      }
    }
    json_decref(d);
  }
  CHECKF(checked > 0, "no frames of group %s", sig);
  json_decref(list);
}

/* The group's marks are those of its frames (expected from the modules of
   an event's stack ending in its frames), its headline the innermost in-app
   one (want; NULL: none in-app, the innermost frame). */
static void check_headline(const json_t *g, const char *want, const char *want_module) {
  json_t *frames = json_object_get(g, "frames"), *marks = json_object_get(g, "in_app");
  json_t *h = json_object_get(g, "headline");
  char *text = json_dumps(g, JSON_COMPACT);
  size_t n = json_array_size(frames);
  CHECKF(n > 0 && json_array_size(marks) == n && json_is_object(h), "%s", text);
  size_t first = n;
  for (size_t k = 0; k < n && first == n; k++)
    if (json_is_true(json_array_get(marks, k))) first = k;
  json_t *at = json_object_get(h, "in_app_index");
  const char *fn = str(h, "function");
  if (want) {
    CHECKF(first < n && strcmp(json_string_value(json_array_get(frames, first)), want) == 0,
           "the first in-app frame is not %s: %s", want, text);
    CHECKF(json_is_integer(at) && (size_t)json_integer_value(at) == first, "%s", text);
    CHECKF(fn && strcmp(fn, want) == 0, "headline %s, want %s: %s", fn, want, text);
    CHECKF(str(h, "module") && strcmp(str(h, "module"), want_module) == 0, "module: %s", text);
  } else {
    CHECKF(first == n && json_is_null(at), "a frame in-app: %s", text);
    CHECKF(fn && strcmp(fn, json_string_value(json_array_get(frames, 0))) == 0, "%s", text);
  }
  json_t *inner = json_object_get(h, "innermost");
  CHECKF(str(inner, "function") &&
             strcmp(str(inner, "function"), json_string_value(json_array_get(frames, 0))) == 0,
         "innermost: %s", text);
  free(text);
}

/* The group's marks equal those of the frames of one of its events'
   stacks whose names end in the group's frames. */
static void check_group_marks(const collector_t *c, const json_t *g) {
  const char *sig = str(g, "signature");
  json_t *frames = json_object_get(g, "frames"), *marks = json_object_get(g, "in_app");
  size_t n = json_array_size(frames);
  long status;
  json_t *list = get_json(c, "/api/v1/events?kind=hang&limit=1000", &status);
  bool matched = false;
  size_t i, k;
  json_t *e, *s;
  json_array_foreach(json_object_get(list, "events"), i, e) {
    if (matched || !str(e, "group") || strcmp(str(e, "group"), sig) != 0) continue;
    char path[64];
    snprintf(path, sizeof path, "/api/v1/events/%lld",
             (long long)json_integer_value(json_object_get(e, "id")));
    json_t *d = get_json(c, path, &status);
    json_array_foreach(json_object_get(d, "stacks"), k, s) {
      json_t *names = json_object_get(s, "names"), *fr = json_object_get(s, "frames");
      size_t m = json_array_size(names);
      bool ends = m >= n;
      for (size_t j = 0; ends && j < n; j++)
        ends = json_equal(json_array_get(names, m - n + j), json_array_get(frames, j));
      for (size_t j = 0; ends && !matched && j < n; j++)
        CHECKF(json_equal(json_array_get(marks, j),
                          json_object_get(json_array_get(fr, m - n + j), "in_app")),
               "mark %zu of %s", j, json_string_value(json_array_get(frames, j)));
      matched |= ends;
    }
    json_decref(d);
  }
  CHECKF(matched, "no stack of group %s ends in its frames", sig);
  json_decref(list);
}

/* ---- cases ------------------------------------------------------------------- */

static void case_read_hang(void) {
  find_paths();
  collector_t c;
  collector_start(&c, NULL);
  sdk_start(&c, false);
  run_read_hang();
  sdk_stop();
  json_t *g = group_with(&c, "hang", "reload_config");
  check_event_frames(&c, str(g, "signature"), exe_or_lib);
  check_group_marks(&c, g);
  check_headline(g, "inapp_lib_read_config", g_lib);
  json_t *inner = json_object_get(json_object_get(g, "headline"), "innermost");
  CHECKF(strncmp(base_of(str(inner, "module")), "libc.so", 7) == 0, "innermost in %s",
         str(inner, "module"));
  fprintf(stderr, "read hang: in %s <- %s\n", str(inner, "function"),
          str(json_object_get(g, "headline"), "function"));
  json_decref(g);
  collector_stop_healthy(&c);
}

static void case_glib_hang(void) {
  find_paths();
  collector_t c;
  collector_start(&c, NULL);
  sdk_start(&c, false);
  run_glib_hang();
  sdk_stop();
  json_t *g = group_with(&c, "hang", "on_slow_tick");
  check_event_frames(&c, str(g, "signature"), exe_or_lib);
  check_group_marks(&c, g);
  check_headline(g, "on_slow_tick", g_exe);
  /* GLib's dispatch called it; libglib's and libc's frames are inside. */
  json_t *frames = json_object_get(g, "frames");
  size_t at =
      (size_t)json_integer_value(json_object_get(json_object_get(g, "headline"), "in_app_index"));
  CHECKF(at >= 1 && at + 1 < json_array_size(frames), "on_slow_tick at %zu", at);
  json_t *inner = json_object_get(json_object_get(g, "headline"), "innermost");
  const char *lib = base_of(str(inner, "module"));
  CHECKF(strncmp(lib, "libc.so", 7) == 0 || strncmp(lib, "libglib-2.0.so", 14) == 0,
         "innermost in %s", lib);
  fprintf(stderr, "glib hang: in %s <- on_slow_tick <- %s\n", str(inner, "function"),
          json_string_value(json_array_get(frames, at + 1)));
  json_decref(g);
  collector_stop_healthy(&c);
}

static void case_cpu_stack(void) {
  find_paths();
  collector_t c;
  collector_start(&c, NULL);
  sdk_start(&c, true);
  run_cpu_burst();
  sdk_stop();
  long status;
  json_t *top = get_json(&c, "/api/v1/top-stacks?kind=cpu&limit=1", &status);
  CHECK_EQ_INT(status, 200);
  json_t *g = json_array_get(json_object_get(top, "stacks"), 0);
  char *text = json_dumps(g, JSON_COMPACT);
  CHECKF(g && has_frame(json_object_get(g, "frames"), "cpu_fill_buffers"), "%s", text);
  check_headline(g, "cpu_fill_buffers", g_exe);
  /* Its innermost frame is memset's, a system library's (libc; libasan's
     interceptor under ASan). */
  json_t *inner = json_object_get(json_object_get(g, "headline"), "innermost");
  const char *module = str(inner, "module");
  CHECKF(module && (strncmp(module, "/lib/", 5) == 0 || strncmp(module, "/usr/lib/", 9) == 0) &&
             json_is_false(json_array_get(json_object_get(g, "in_app"), 0)),
         "%s", text);
  fprintf(stderr, "cpu stack: in %s (%s) <- cpu_fill_buffers\n", str(inner, "function"), module);
  free(text);
  json_decref(top);
  collector_stop_healthy(&c);
}

/* The rules of each restart, and what they make in-app. */
static char g_dir[PATH_MAX];
static bool exe_only(const char *m) {
  return strcmp(m, g_exe) == 0;
}
static bool with_libc(const char *m) {
  return exe_or_lib(m) || strncmp(base_of(m), "libc.so", 7) == 0;
}
static bool nothing(const char *m) {
  (void)m;
  return false;
}

static void case_rules(void) {
  find_paths();
  snprintf(g_dir, sizeof g_dir, "%s", g_lib);
  dirname(g_dir); /* the build directory: this executable's too */
  CHECKF(strncmp(g_exe, g_dir, strlen(g_dir)) == 0, "%s not in %s", g_exe, g_dir);
  collector_t c;
  collector_start(&c, NULL);
  sdk_start(&c, false);
  run_read_hang();
  sdk_stop();
  json_t *g = group_with(&c, "hang", "reload_config");
  check_headline(g, "inapp_lib_read_config", g_lib);
  const char *innermost = json_string_value(json_array_get(json_object_get(g, "frames"), 0));
  char *first = strdup(innermost);
  json_decref(g);
  const struct {
    const char *args[5];
    expect_fn expected;
    const char *headline, *module;
  } runs[] = {
      {{"--in-app-exclude", "libinapp_lib*", NULL}, exe_only, "reload_config", g_exe},
      {{"--in-app-exclude", "libinapp_lib*", "--in-app-include", g_lib, NULL},
       exe_or_lib,
       "inapp_lib_read_config",
       g_lib},
      {{"--in-app-include", "libc.so*", NULL}, with_libc, first, NULL},
      {{"--in-app-exclude", g_dir, NULL}, nothing, NULL, NULL},
  };
  for (size_t i = 0; i < ARRAY_LEN(runs); i++) {
    collector_stop_healthy(&c);
    collector_restart(&c, runs[i].args);
    g = group_with(&c, "hang", "reload_config");
    check_event_frames(&c, str(g, "signature"), runs[i].expected);
    check_group_marks(&c, g);
    const char *module = runs[i].module;
    if (runs[i].expected == with_libc)
      module = str(json_object_get(json_object_get(g, "headline"), "innermost"), "module");
    check_headline(g, runs[i].headline, module);
    json_decref(g);
  }
  free(first);
  collector_stop_healthy(&c);
}

/* ---- hand-made batches ------------------------------------------------------- */

typedef struct hand_frame_s {
  const char *function, *module; /* module NULL: none */
  bool executable, only_basename;
} hand_frame_t;

#define MAX_HAND 12

/* A batch of app "shop" at version with one hang whose one stack is
   frames[0..n) (innermost first), each its own function and module. */
static void post_hang(const collector_t *c, const char *version, const hand_frame_t *frames,
                      size_t n, unsigned seed) {
  CHECK(n <= MAX_HAND);
  char *strings[MAX_HAND + 1] = {""};
  Perf__V1__Function fn[MAX_HAND], *fns[MAX_HAND];
  Perf__V1__Module mod[MAX_HAND], *mods[MAX_HAND];
  Perf__V1__Frame fr[MAX_HAND], *frs[MAX_HAND];
  uint32_t ids[MAX_HAND];
  size_t n_mods = 0;
  for (size_t i = 0; i < n; i++) {
    strings[i + 1] = (char *)frames[i].function;
    perf__v1__function__init(&fn[i]);
    fn[i].name = (uint32_t)i + 1;
    fns[i] = &fn[i];
    perf__v1__frame__init(&fr[i]);
    fr[i].function = (uint32_t)i + 1;
    fr[i].address = 0x1000 + 0x10 * i;
    if (frames[i].module) {
      perf__v1__module__init(&mod[n_mods]);
      mod[n_mods].path = (char *)frames[i].module;
      mod[n_mods].executable = frames[i].executable;
      mod[n_mods].only_basename = frames[i].only_basename;
      mods[n_mods] = &mod[n_mods];
      fr[i].module = (uint32_t)++n_mods;
    }
    frs[i] = &fr[i];
    ids[i] = (uint32_t)i + 1;
  }
  Perf__V1__Stack st = PERF__V1__STACK__INIT, *sts[] = {&st};
  st.n_frames = n, st.frames = ids;
  st.end = PERF__V1__STACK_END__STACK_END_COMPLETE;
  Perf__V1__StackCount sc = PERF__V1__STACK_COUNT__INIT, *scs[] = {&sc};
  sc.stack = 1, sc.tid = 7, sc.samples = 5;
  Perf__V1__Event ev = PERF__V1__EVENT__INIT, *evs[] = {&ev};
  ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
  ev.start_unix_nanos = now_ns() - 1000000000LL + seed;
  ev.duration_nanos = 300000000;
  ev.tid = 7;
  ev.n_stack_counts = 1, ev.stack_counts = scs;
  ev.dominant_stack = 1;
  Perf__V1__Resource res;
  Perf__V1__Batch b;
  batch_begin(&b, &res, "shop", version, "prod", "h1");
  b.n_strings = n + 1, b.strings = strings;
  b.n_modules = n_mods, b.modules = mods;
  b.n_functions = n, b.functions = fns;
  b.n_frames = n, b.frames = frs;
  b.n_stacks = 1, b.stacks = sts;
  b.n_events = 1, b.events = evs;
  batch_post(c, &b, seed);
}

/* An older SDK's stack (no executable mark) through every kind of module. */
static const hand_frame_t OLD_STACK[] = {
    {"__vdso_clock_gettime", "[vdso]", false, false},
    {"clock_gettime", "/lib/x86_64-linux-gnu/libc.so.6", false, false},
    {"g_vfs_poll", "/usr/lib/x86_64-linux-gnu/gio/modules/libgvfsdbus.so", false, false},
    {"perf_sdk_helper", "/srv/build/sdk/libperfsdk-core.so.0", false, false},
    {"foo_wait", "/usr/local/lib/libfoo.so.1", false, false},
    {"shop_fetch", "/opt/shop/lib/libshop.so", false, false},
    {"shop_main", "/usr/lib/shop/shop", false, false},
    {"shop_recovered", "shop", false, true},
    {"lost_frame", NULL, false, false},
};
/* A newer SDK's: the program under /usr/lib marked the executable. */
static const hand_frame_t NEW_STACK[] = {
    {"read", "/lib/x86_64-linux-gnu/libc.so.6", false, false},
    {"shop_run", "/usr/lib/shop/shop", true, false},
    {"shop_start", "/usr/lib/shop/shop", true, false},
};

/* The marks of the frames of the group holding fn (events/<id> and
   top-stacks), innermost first, against want ('1' in-app, '0' not). */
static void check_marks(const collector_t *c, const char *fn, const char *want,
                        const char *headline) {
  json_t *g = group_with(c, "hang", fn);
  char got[MAX_HAND + 1] = "";
  json_t *m;
  size_t i;
  json_array_foreach(json_object_get(g, "in_app"), i, m) got[i] = json_is_true(m) ? '1' : '0';
  CHECKF(strcmp(got, want) == 0, "group of %s: marks %s, want %s", fn, got, want);
  check_group_marks(c, g);
  json_t *h = json_object_get(g, "headline");
  CHECKF(strcmp(str(h, "function"), headline) == 0, "group of %s: headline %s, want %s", fn,
         str(h, "function"), headline);
  json_decref(g);
}

static void case_path_rules(void) {
  collector_t c;
  collector_start(&c, NULL);
  post_hang(&c, "1.0", OLD_STACK, ARRAY_LEN(OLD_STACK), 1);
  post_hang(&c, "2.0", NEW_STACK, ARRAY_LEN(NEW_STACK), 2);
  check_marks(&c, "foo_wait", "000011000", "foo_wait");
  check_marks(&c, "shop_run", "011", "shop_run");
  /* versions/compare: 2.0's group grew, 1.0's shrank, each headed alike. */
  long status;
  json_t *cmp = get_json(&c, "/api/v1/versions/compare?app=shop&a=1.0&b=2.0", &status);
  CHECK_EQ_INT(status, 200);
  json_t *grew = json_array_get(json_object_get(json_object_get(cmp, "stacks"), "grew"), 0);
  json_t *shrank = json_array_get(json_object_get(json_object_get(cmp, "stacks"), "shrank"), 0);
  char *text = json_dumps(cmp, JSON_COMPACT);
  CHECKF(grew && shrank, "%s", text);
  check_headline(grew, "shop_run", "/usr/lib/shop/shop");
  check_headline(shrank, "foo_wait", "/usr/local/lib/libfoo.so.1");
  free(text);
  json_decref(cmp);
  /* Prefixes and basename globs; an exclude of /usr/local/lib. */
  const char *prefixes[] = {
      "--in-app-include", "/usr/lib/shop/",   "--in-app-include", "shop", "--in-app-exclude",
      "/usr/local/lib",   "--in-app-include", "[vdso]",           NULL};
  collector_stop_healthy(&c);
  collector_restart(&c, prefixes);
  check_marks(&c, "foo_wait", "000001110", "shop_fetch");
  check_marks(&c, "shop_run", "011", "shop_run");
  /* Everything with a module file: system directories and the SDK's own
     library too, never the vDSO or a frame without module. */
  const char *all[] = {"--in-app-include", "*", NULL};
  collector_stop_healthy(&c);
  collector_restart(&c, all);
  check_marks(&c, "foo_wait", "011111110", "clock_gettime");
  check_marks(&c, "shop_run", "111", "read");
  collector_stop_healthy(&c);
}

/* perf-collector with args: its exit status, its stderr in out. */
static int run_collector(const char *const *args, size_t n, char *out, size_t size) {
  char *argv[160];
  CHECK(n + 2 <= ARRAY_LEN(argv));
  argv[0] = PERF_COLLECTOR_PATH;
  for (size_t i = 0; i < n; i++)
    argv[i + 1] = (char *)args[i];
  argv[n + 1] = NULL;
  char log[PATH_MAX];
  snprintf(log, sizeof log, "%s/stderr", tempdir_make("perf-in-app-flags"));
  int status = spawn_wait(spawn(argv, log), 10);
  char *text = read_text(log);
  snprintf(out, size, "%s", text ? text : "");
  free(text);
  return status;
}

static void case_bad_flags(void) {
  static char long_rule[1100];
  memset(long_rule, 'a', sizeof long_rule - 1);
  long_rule[0] = '/';
  const struct {
    const char *args[2];
    const char *message;
  } bad[] = {
      {{"--in-app-include", ""}, "--in-app-include: '': empty"},
      {{"--in-app-exclude", "lib/libshop.so"}, "--in-app-exclude: 'lib/libshop.so': a path must"},
      {{"--in-app-include", long_rule}, "--in-app-include: '/aaa"},
  };
  char out[8192];
  for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
    CHECKF(run_collector(bad[i].args, 2, out, sizeof out) == 2, "case %zu: %s", i, out);
    CHECKF(strstr(out, bad[i].message) != NULL, "case %zu: %s", i, out);
  }
  CHECK(strstr(out, "longer than 1024 bytes") != NULL);
  /* 64 rules of each kind are fine (--help then exits 0), a 65th is not. */
  const char *many[2 * 65 + 1];
  for (size_t i = 0; i < 64; i++)
    many[2 * i] = "--in-app-exclude", many[2 * i + 1] = "libx*.so";
  many[128] = "--help";
  CHECKF(run_collector(many, 129, out, sizeof out) == 0, "64 rules: %s", out);
  CHECKF(strstr(out, "--in-app-include RULE") && strstr(out, "--in-app-exclude RULE"), "%s", out);
  many[128] = "--in-app-exclude", many[129] = "liby*.so";
  CHECKF(run_collector(many, 130, out, sizeof out) == 2, "65 rules: %s", out);
  CHECKF(strstr(out, "--in-app-exclude: 'liby*.so': more than 64 rules"), "%s", out);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {
      TEST_CASE(read_hang), TEST_CASE(glib_hang),  TEST_CASE(cpu_stack),
      TEST_CASE(rules),     TEST_CASE(path_rules), TEST_CASE(bad_flags),
  };
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
