/*
 * lazy_lib.c - shared libraries loaded at their first call, unloaded when
 * idle (see lazy_lib.h).
 */
#include "sdk/base/lazy_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sdk/base/log.h"
#include "sdk/base/proc_files.h"

#define MAX_LIBS 4

static pthread_mutex_t g_registry_lock = PTHREAD_MUTEX_INITIALIZER;
static perf__lazy_lib_t *g_libs[MAX_LIBS];
static atomic_size_t g_nlibs;

static pthread_rwlock_t g_hook_lock = PTHREAD_RWLOCK_INITIALIZER;
static perf__lazy_load_hook_fn g_hook;
static void *g_hook_arg;

/* Held around every dlopen, dlsym and dlclose of the libraries, and by
   fork's prepare handler until the fork is done: glibc (2.36) does not
   take its own loader lock around fork, so a child forked while an SDK
   thread was inside dlopen or dlclose would inherit that lock held by a
   thread it does not have, and its first dlopen (the app's, or the SDK's
   own in the restarted child) would wait forever. The wait in prepare is
   bounded: past FORK_WAIT_NS the fork goes on without the lock. */
static pthread_mutex_t g_dl_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_dl_held_for_fork; /* by the forking thread, between prepare and parent */
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;

#define FORK_WAIT_NS (2 * 1000000000LL)

static void dl_fork_prepare(void) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += FORK_WAIT_NS / 1000000000LL;
  g_dl_held_for_fork = pthread_mutex_timedlock(&g_dl_lock, &until) == 0;
}

static void dl_fork_parent(void) {
  if (g_dl_held_for_fork) pthread_mutex_unlock(&g_dl_lock);
  g_dl_held_for_fork = false;
}

static void dl_fork_child(void) {
  g_dl_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
  g_dl_held_for_fork = false;
}

static void install_fork_handlers(void) {
  pthread_atfork(dl_fork_prepare, dl_fork_parent, dl_fork_child);
}

static void register_lib(perf__lazy_lib_t *lib) {
  pthread_mutex_lock(&g_registry_lock);
  size_t n = atomic_load(&g_nlibs);
  if (n < MAX_LIBS) {
    g_libs[n] = lib;
    atomic_store(&g_nlibs, n + 1);
    lib->registered = true;
  }
  pthread_mutex_unlock(&g_registry_lock);
}

static void *load_locked(perf__lazy_lib_t *lib, char *why, size_t cap);

/* Under lib->lock: dlopen and resolve every function, or mark it failed
   (logged once the loader's lock is given back: the app's log callback
   never runs under it, nor makes a fork wait for it). */
static void load(perf__lazy_lib_t *lib) {
  if (!lib->registered) register_lib(lib);
  pthread_once(&g_fork_once, install_fork_handlers);
  char why[512];
  pthread_mutex_lock(&g_dl_lock);
  void *h = load_locked(lib, why, sizeof why);
  pthread_mutex_unlock(&g_dl_lock);
  if (!h) {
    lib->failed = true;
    perf__log(PERF__LOG_ERROR, "%s", why);
    return;
  }
  lib->handle = h;
  if (lib->after_load) lib->after_load(lib->fns);
}

/* Under g_dl_lock: lib's dlopen and every dlsym; the handle, or NULL with
   what failed in why. */
static void *load_locked(perf__lazy_lib_t *lib, char *why, size_t cap) {
  void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *err = dlerror();
    snprintf(why, cap, "%s could not be loaded: %s%s", lib->soname, err ? err : "?",
             perf__root_changed()
                 ? "; the app changed its root directory (chroot) since init, so the SDK's "
                   "libraries cannot be loaded again: frames stay unnamed and stacks may end "
                   "early"
                 : "");
    return NULL;
  }
  for (size_t i = 0; i < lib->n; i++) {
    if (!(lib->fns[i] = dlsym(h, lib->names[i]))) {
      snprintf(why, cap, "%s has no %s", lib->soname, lib->names[i]);
      dlclose(h);
      return NULL;
    }
  }
  return h;
}

void *perf__lazy_enter(perf__lazy_lib_t *lib, size_t idx) {
  atomic_fetch_add(&lib->inside, 1);
  if (atomic_load(&lib->loaded)) return lib->fns[idx];
  atomic_fetch_sub(&lib->inside, 1);
  pthread_mutex_lock(&lib->lock);
  bool loaded_here = false;
  if (!lib->handle && !lib->failed) {
    load(lib);
    loaded_here = lib->handle != NULL;
  }
  bool ok = lib->handle != NULL;
  if (ok) {
    atomic_fetch_add(&lib->inside, 1);
    atomic_store(&lib->loaded, true);
  }
  pthread_mutex_unlock(&lib->lock);
  if (loaded_here) {
    pthread_rwlock_rdlock(&g_hook_lock);
    if (g_hook) g_hook(g_hook_arg);
    pthread_rwlock_unlock(&g_hook_lock);
  }
  return ok ? lib->fns[idx] : NULL;
}

void perf__lazy_leave(perf__lazy_lib_t *lib) {
  atomic_fetch_sub(&lib->inside, 1);
}

void perf__lazy_object_made(perf__lazy_lib_t *lib) {
  atomic_fetch_add(&lib->objects, 1);
}

void perf__lazy_object_ended(perf__lazy_lib_t *lib) {
  atomic_fetch_sub(&lib->objects, 1);
}

/* Unload lib if no caller is inside and no object is alive. */
static bool unload_if_idle(perf__lazy_lib_t *lib) {
  bool done = false;
  pthread_mutex_lock(&lib->lock);
  if (lib->handle && atomic_load(&lib->objects) == 0) {
    atomic_store(&lib->loaded, false);
    if (atomic_load(&lib->inside) == 0) {
      pthread_mutex_lock(&g_dl_lock);
      dlclose(lib->handle);
      pthread_mutex_unlock(&g_dl_lock);
      lib->handle = NULL;
      memset(lib->fns, 0, lib->n * sizeof lib->fns[0]);
      done = true;
    } else {
      atomic_store(&lib->loaded, true); /* a caller is inside: next time */
    }
  }
  pthread_mutex_unlock(&lib->lock);
  return done;
}

int perf__lazy_libs_unload_idle(void) {
  /* After a chroot they could not be loaded again: they stay. */
  if (perf__root_changed()) return 0;
  int n = 0;
  size_t libs = atomic_load(&g_nlibs);
  for (size_t i = 0; i < libs; i++)
    n += unload_if_idle(g_libs[i]);
  return n;
}

void perf__lazy_libs_set_load_hook(perf__lazy_load_hook_fn fn, void *arg) {
  pthread_rwlock_wrlock(&g_hook_lock);
  g_hook = fn;
  g_hook_arg = arg;
  pthread_rwlock_unlock(&g_hook_lock);
}

void perf__lazy_libs_fork_child(void) {
  g_registry_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
  g_hook_lock = (pthread_rwlock_t)PTHREAD_RWLOCK_INITIALIZER;
  g_hook = NULL; /* the parent's writer: the child starts its own */
  size_t libs = atomic_load(&g_nlibs);
  for (size_t i = 0; i < libs; i++) {
    g_libs[i]->lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    atomic_store(&g_libs[i]->inside, 0);
  }
}
