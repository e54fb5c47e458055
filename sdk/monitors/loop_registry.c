/*
 * loop_registry.c - the watched loops' table (see loop_registry.h). Runs
 * on app threads (register, unregister, pause, resume, their exit), and on
 * the hang monitor thread (dropping loops whose thread is gone).
 *
 * A free slot has watched_tid 0; a thread claims one with a compare and
 * swap of its tid, then sets the loop up between two increments of gen
 * (odd meanwhile: the monitor leaves it alone). Freeing does its work
 * between two increments too (the thread-local references and the
 * monitor see a new generation) and clears watched_tid last. Every change
 * of generation notes the unit counts at that moment (take_base): the
 * monitor splits the counts between the old and the new name there.
 */
#include "sdk/monitors/loop_registry.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sdk/base/clock.h"
#include "sdk/base/log.h"
#include "sdk/base/threads.h"
#include "sdk/pipeline/config.h"

_Thread_local perf__loop_ref_t perf__t_loop __attribute__((tls_model("initial-exec")));

static perf__loop_t g_loops[PERF_SDK_MAX_LOOPS];
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static bool g_key_ok;
static atomic_bool g_refusal_logged; /* once per run */

static void make_key(void);
static void thread_exits(void *slot);
static bool valid_name(const char *name);
static int check_registration(const char *name, int threshold_ms);
static perf__loop_t *claim_slot(const char *name, perf__stats_t *stats);
static void set_identity(perf__loop_t *l, const char *name, int threshold_ms, unsigned cfg_ms,
                         bool fresh);
static void free_slot(perf__loop_t *l);
static void reset_units(perf__loop_t *l);
static void take_base(perf__loop_t *l);

perf__loop_t *perf__loops(void) {
  return g_loops;
}

void perf__loop_watch_current_thread(void) {
  perf__loop_t *main_loop = &g_loops[0];
  perf__loop_t *mine = perf__loop_of_caller();
  if (mine && mine != main_loop) {
    free_slot(mine);
    if (g_key_ok) pthread_setspecific(g_key, NULL);
  }
  char name[16] = "";
  prctl(PR_GET_NAME, name, 0, 0, 0);
  memcpy(main_loop->watched_name, name, sizeof name);
  pid_t tid = perf__gettid();
  /* Another thread's loop from now on: a new generation (the old thread's
     marks find no loop, the monitor ends a hang of the old thread). */
  if (atomic_load(&main_loop->watched_tid) != tid) {
    atomic_fetch_add(&main_loop->gen, 1);
    take_base(main_loop);
    atomic_store(&main_loop->watched_tid, tid);
    atomic_fetch_add(&main_loop->gen, 1);
  }
  perf__t_loop = (perf__loop_ref_t){main_loop, atomic_load(&main_loop->gen)};
}

int perf__loop_register(const char *name, int threshold_ms, unsigned cfg_threshold_ms,
                        perf__stats_t *stats) {
  int err = check_registration(name, threshold_ms);
  if (err) return err;
  perf__loop_t *l = perf__loop_of_caller();
  if (l) { /* registered again: the same loop, renamed */
    set_identity(l, name, threshold_ms, cfg_threshold_ms, false);
    return PERF_OK;
  }
  if (!(l = claim_slot(name, stats))) return PERF_E_NO_MEMORY;
  prctl(PR_GET_NAME, l->watched_name, 0, 0, 0);
  pthread_once(&g_key_once, make_key);
  if (g_key_ok) pthread_setspecific(g_key, l);
  set_identity(l, name, threshold_ms, cfg_threshold_ms, true);
  return PERF_OK;
}

int perf__loop_unregister(unsigned cfg_threshold_ms) {
  perf__loop_t *l = perf__loop_of_caller();
  if (!l) return PERF_E_NO_THREAD;
  if (l == &g_loops[0]) { /* the watched thread's: back to its defaults */
    set_identity(l, "main", 0, cfg_threshold_ms, false);
    return PERF_OK;
  }
  free_slot(l);
  if (g_key_ok) pthread_setspecific(g_key, NULL);
  return PERF_OK;
}

void perf__loops_start(unsigned cfg_threshold_ms, bool fresh_main) {
  atomic_store(&g_refusal_logged, false);
  perf__loop_t *main_loop = &g_loops[0];
  if (fresh_main) {
    perf__loop_watch_current_thread();
    atomic_store(&main_loop->word, 0);
    atomic_store(&main_loop->nested, 0);
    set_identity(main_loop, "main", 0, cfg_threshold_ms, false);
    for (size_t i = 0; i < PERF_SDK_MAX_LOOPS; i++)
      atomic_store(&g_loops[i].paused, 0);
  }
  for (size_t i = 0; i < PERF_SDK_MAX_LOOPS; i++) {
    perf__loop_t *l = &g_loops[i];
    int asked = atomic_load(&l->threshold_ms_asked);
    unsigned ms = asked ? (unsigned)asked : cfg_threshold_ms;
    atomic_store(&l->threshold_ns, (int64_t)ms * 1000000);
  }
}

void perf__loops_pause(void) {
  for (size_t i = 0; i < PERF_SDK_MAX_LOOPS; i++)
    atomic_store(&g_loops[i].paused, 1);
}

void perf__loops_resume(void) {
  /* Work that began while paused does not count from its start. */
  int64_t now = perf__now_ns();
  for (size_t i = 0; i < PERF_SDK_MAX_LOOPS; i++) {
    atomic_store_explicit(&g_loops[i].busy_since_ns, now, memory_order_relaxed);
    atomic_store_explicit(&g_loops[i].paused, 0, memory_order_release);
  }
}

void perf__loops_fork_child(void) {
  for (size_t i = 1; i < PERF_SDK_MAX_LOOPS; i++)
    if (atomic_load(&g_loops[i].watched_tid)) free_slot(&g_loops[i]);
}

bool perf__loop_read_name(const perf__loop_t *loop, unsigned gen, char *out) {
  size_t i = 0;
  for (; i < PERF_SDK_MAX_LOOP_NAME_BYTES; i++) {
    out[i] = atomic_load_explicit(&loop->name[i], memory_order_relaxed);
    if (!out[i]) break;
  }
  out[i] = '\0';
  atomic_thread_fence(memory_order_acquire);
  return atomic_load_explicit(&loop->gen, memory_order_relaxed) == gen;
}

void perf__loop_drop_if_gone(size_t i) {
  perf__loop_t *l = &g_loops[i];
  pid_t tid = atomic_load(&l->watched_tid);
  if (i == 0 || tid <= 0) return;
  if (syscall(SYS_tgkill, getpid(), tid, 0) == 0 || errno != ESRCH) return;
  unsigned gen = atomic_load(&l->gen);
  if (gen & 1) return; /* being changed: by a live thread after all */
  if (atomic_compare_exchange_strong(&l->gen, &gen, gen + 1)) {
    take_base(l);
    atomic_store(&l->word, 0);
    atomic_fetch_add(&l->gen, 1);
    atomic_store(&l->watched_tid, 0);
  }
}

/* ---- helpers -------------------------------------------------------------- */

/* The name and threshold are valid, or PERF_E_INVALID_ARGUMENT, logged
   naming them (the name's bytes shown printable, cut past the longest). */
static int check_registration(const char *name, int threshold_ms) {
  if (!valid_name(name)) {
    char shown[PERF_SDK_MAX_LOOP_NAME_BYTES + 8] = "(null)";
    size_t i = 0;
    for (; name && name[i] && i < sizeof shown - 1; i++)
      shown[i] = name[i] > 32 && name[i] < 127 ? name[i] : '?';
    if (name) shown[i] = '\0';
    perf__log(PERF__LOG_ERROR,
              "perf_sdk_loop_register: name \"%s\": must be 1..%d bytes of A-Z a-z 0-9 . _ -",
              shown, PERF_SDK_MAX_LOOP_NAME_BYTES);
    return PERF_E_INVALID_ARGUMENT;
  }
  if (threshold_ms != 0 &&
      (threshold_ms < PERF__HANG_THRESHOLD_MIN_MS || threshold_ms > PERF__HANG_THRESHOLD_MAX_MS)) {
    perf__log(PERF__LOG_ERROR,
              "perf_sdk_loop_register: loop %s: threshold_ms = %d: must be 0 (the config's) or "
              "%d..%d",
              name, threshold_ms, PERF__HANG_THRESHOLD_MIN_MS, PERF__HANG_THRESHOLD_MAX_MS);
    return PERF_E_INVALID_ARGUMENT;
  }
  return PERF_OK;
}

/* A free slot for the calling thread (its tid swapped in), or NULL with
   every slot taken: the refusal counted, logged once per run. */
static perf__loop_t *claim_slot(const char *name, perf__stats_t *stats) {
  pid_t tid = perf__gettid();
  for (size_t i = 1; i < PERF_SDK_MAX_LOOPS; i++) {
    int free_tid = 0;
    if (atomic_compare_exchange_strong(&g_loops[i].watched_tid, &free_tid, tid)) return &g_loops[i];
  }
  PERF__COUNT(stats, loops_refused, 1);
  if (!atomic_exchange(&g_refusal_logged, true))
    perf__log(PERF__LOG_WARN,
              "perf_sdk_loop_register: loop %s refused: %d loops are watched already "
              "(PERF_SDK_MAX_LOOPS; counted in loops_refused)",
              name, PERF_SDK_MAX_LOOPS);
  return NULL;
}

static void make_key(void) {
  g_key_ok = pthread_key_create(&g_key, thread_exits) == 0;
}

/* The thread's destructor: it exits, its loop is forgotten. */
static void thread_exits(void *slot) {
  perf__loop_t *l = slot;
  if (l && perf__loop_of_caller() == l) free_slot(l);
}

static bool valid_name(const char *name) {
  if (!name || !name[0]) return false;
  size_t n = 0;
  for (; name[n]; n++) {
    char c = name[n];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok || n >= PERF_SDK_MAX_LOOP_NAME_BYTES) return false;
  }
  return true;
}

/* Name and threshold of the caller's loop l (fresh: a slot just claimed,
   whose loop starts as one that never ran), between two increments of its
   gen; the caller's reference follows. */
static void set_identity(perf__loop_t *l, const char *name, int threshold_ms, unsigned cfg_ms,
                         bool fresh) {
  atomic_fetch_add(&l->gen, 1);
  take_base(l);
  if (fresh) reset_units(l);
  size_t n = strlen(name);
  for (size_t i = 0; i <= n; i++)
    atomic_store_explicit(&l->name[i], name[i], memory_order_relaxed);
  atomic_store(&l->threshold_ms_asked, threshold_ms);
  unsigned ms = threshold_ms ? (unsigned)threshold_ms : cfg_ms;
  atomic_store(&l->threshold_ns, (int64_t)ms * 1000000);
  unsigned gen = atomic_fetch_add(&l->gen, 1) + 1;
  perf__t_loop = (perf__loop_ref_t){l, gen};
}

/* Cleared last: a thread may claim the slot only once it is stable. */
static void free_slot(perf__loop_t *l) {
  atomic_fetch_add(&l->gen, 1);
  take_base(l);
  atomic_store(&l->word, 0);
  atomic_fetch_add(&l->gen, 1);
  atomic_store(&l->watched_tid, 0);
}

/* The counts as of this change of generation (gen odd). */
static void take_base(perf__loop_t *l) {
  for (size_t i = 0; i < PERF__LOOP_STATS_BUCKETS; i++)
    atomic_store_explicit(&l->base_units[i], atomic_load(&l->units[i]), memory_order_relaxed);
  atomic_store_explicit(&l->base_busy_ns, atomic_load(&l->busy_total_ns), memory_order_relaxed);
}

/* A claimed slot starts as a loop that never ran: idle, epoch 0, no
   label, not nested. Its unit counts go on from the previous owner's (the
   monitor sends what they grow by from the base). */
static void reset_units(perf__loop_t *l) {
  atomic_store(&l->word, 0);
  atomic_store(&l->nested, 0);
  atomic_store(&l->long_unit_end, 0);
  atomic_store(&l->label_epoch, 0);
}
