/*
 * lazy_lib.h - a shared library loaded at its first call and unloaded when
 * idle.
 *
 * libperfsdk-core.so does not link libdw, libelf, zlib nor zstd: they are
 * needed only to name frames, compile unwind rules and compress a batch,
 * which an app between events never does. sdk/lazy/ defines their
 * functions under their own names; each definition enters the library
 * (loading it on the first call), calls the real function and leaves.
 * perf__lazy_libs_unload_idle (the writer's idle release) unloads a library
 * that no thread is calling and that holds none of the objects its
 * constructors made (counted by the wrappers: made, ended), so its pages
 * leave the app's resident set until the next event.
 *
 * Enter and leave are two atomic operations each; a library is unloaded
 * only under its mutex, after clearing `loaded` and seeing no caller
 * inside (a caller counts itself in before it reads `loaded`: one of the
 * two always sees the other).
 *
 * Every dlopen, dlsym and dlclose here runs under one lock that fork's
 * prepare handler also takes (waiting at most 2 s): glibc takes no loader
 * lock around fork, and a child forked while an SDK thread was inside
 * dlopen would inherit the loader's lock held and never dlopen again.
 *
 * The static library links the real libraries: nothing here is used there.
 */
#ifndef PERF_BASE_LAZY_LIB_H
#define PERF_BASE_LAZY_LIB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct perf__lazy_lib_s {
  const char *soname;       /* what dlopen is given */
  const char *const *names; /* the functions, in the wrappers' order */
  void **fns;               /* their addresses while loaded */
  size_t n;
  /* Called under the lock right after each load, with fns resolved: a
     library's global state starts afresh in every copy loaded (libelf's
     version), so what the SDK set in the previous copy is set again here.
     NULL: nothing to set. */
  void (*after_load)(void *const *fns);
  pthread_mutex_t lock; /* loading and unloading */
  void *handle;
  atomic_bool loaded;  /* fns may be called */
  atomic_long inside;  /* callers between enter and leave */
  atomic_long objects; /* objects made and not yet ended */
  bool failed;         /* dlopen or dlsym failed: every call fails */
  bool registered;
  unsigned long loads; /* times loaded (tests, logs) */
} perf__lazy_lib_t;

#define PERF__LAZY_LIB_INIT(so, fn_names, fn_table, after)                                         \
  {                                                                                                \
    .soname = (so), .names = (fn_names), .fns = (fn_table),                                        \
    .n = sizeof(fn_table) / sizeof(fn_table)[0], .after_load = (after),                            \
    .lock = PTHREAD_MUTEX_INITIALIZER                                                              \
  }

/* Function `idx` of the library, loaded if need be, with the caller counted
   inside until perf__lazy_leave; NULL (and not inside) when the library
   cannot be loaded (logged once). */
void *perf__lazy_enter(perf__lazy_lib_t *lib, size_t idx);
void perf__lazy_leave(perf__lazy_lib_t *lib);

/* A constructor returned an object / a destructor was given one. */
void perf__lazy_object_made(perf__lazy_lib_t *lib);
void perf__lazy_object_ended(perf__lazy_lib_t *lib);

/* Unload every loaded library that is idle (no caller inside, no object
   alive); returns how many were unloaded. None once the app chrooted
   after init (sdk/base/proc_files.h: perf__root_changed): they could not
   be loaded again from the new root. */
int perf__lazy_libs_unload_idle(void);

/* Called (outside the library's lock) on the thread that loaded a library,
   after it loaded: the writer schedules its idle release. One hook; NULL
   clears it, and waits for a call of the old one to return. */
typedef void (*perf__lazy_load_hook_fn)(void *arg);
void perf__lazy_libs_set_load_hook(perf__lazy_load_hook_fn fn, void *arg);

/* In a forked child (its only thread): the parent's other threads, which
   may have held a lock or been inside a call, are gone. */
void perf__lazy_libs_fork_child(void);

#endif
