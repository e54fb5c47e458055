/*
 * lazy_fn.h - the wrappers' shape (see sdk/base/lazy_lib.h): one
 * definition per function of a library loaded at its first call, from an
 * X-macro list of entries
 *
 *   X(kind, return type, name, (parameters), (arguments), value on failure)
 *
 * kind: FN a plain call; NEW a constructor (a non-NULL result is an object
 * made); END a destructor of its first argument `a` (a non-NULL one is an
 * object ended); VFN, VEND the same for functions returning void (the
 * failure value is empty). The first parameter is always named `a`.
 * PERF__LAZY_LIBRARY(soname, list, after_load) makes the library and its
 * functions; after_load (or NULL) runs after each load (lazy_lib.h), and
 * finds a function's address at fns[PERF__LAZY_IDX_<name>].
 */
#ifndef PERF_LAZY_LAZY_FN_H
#define PERF_LAZY_LAZY_FN_H

#include "sdk/base/lazy_lib.h"

#define PERF__LAZY_NAME(kind, ret, name, params, args, fail) #name,
#define PERF__LAZY_INDEX(kind, ret, name, params, args, fail) PERF__LAZY_IDX_##name,

#define PERF__LAZY_CALL(ret, name, params, args, fail, after)                                      \
  ret name params {                                                                                \
    ret(*fn_) params = (ret(*) params)perf__lazy_enter(&g_lazy_lib, PERF__LAZY_IDX_##name);        \
    if (!fn_) return fail;                                                                         \
    ret r = fn_ args;                                                                              \
    after;                                                                                         \
    perf__lazy_leave(&g_lazy_lib);                                                                 \
    return r;                                                                                      \
  }
#define PERF__LAZY_VCALL(name, params, args, after)                                                \
  void name params {                                                                               \
    void(*fn_) params = (void(*) params)perf__lazy_enter(&g_lazy_lib, PERF__LAZY_IDX_##name);      \
    if (!fn_) return;                                                                              \
    fn_ args;                                                                                      \
    after;                                                                                         \
    perf__lazy_leave(&g_lazy_lib);                                                                 \
  }

#define PERF__LAZY_DEF_FN(ret, name, params, args, fail)                                           \
  PERF__LAZY_CALL(ret, name, params, args, fail, (void)0)
#define PERF__LAZY_DEF_NEW(ret, name, params, args, fail)                                          \
  PERF__LAZY_CALL(ret, name, params, args, fail, if (r) perf__lazy_object_made(&g_lazy_lib))
#define PERF__LAZY_DEF_END(ret, name, params, args, fail)                                          \
  PERF__LAZY_CALL(ret, name, params, args, fail, if (a) perf__lazy_object_ended(&g_lazy_lib))
#define PERF__LAZY_DEF_VFN(ret, name, params, args, fail)                                          \
  PERF__LAZY_VCALL(name, params, args, (void)0)
#define PERF__LAZY_DEF_VEND(ret, name, params, args, fail)                                         \
  PERF__LAZY_VCALL(name, params, args, if (a) perf__lazy_object_ended(&g_lazy_lib))

#define PERF__LAZY_DEFINE(kind, ret, name, params, args, fail)                                     \
  PERF__LAZY_DEF_##kind(ret, name, params, args, fail)

/* The library `soname` with the functions of the X-macro list FNS: its
   table (g_lazy_lib, one per file) and a definition of each function. */
#define PERF__LAZY_LIBRARY(soname, FNS, after_load)                                                \
  enum { FNS(PERF__LAZY_INDEX) PERF__LAZY_N_FNS };                                                 \
  static const char *const k_lazy_names[] = {FNS(PERF__LAZY_NAME)};                                \
  static void *g_lazy_fns[PERF__LAZY_N_FNS];                                                       \
  static perf__lazy_lib_t g_lazy_lib =                                                             \
      PERF__LAZY_LIB_INIT(soname, k_lazy_names, g_lazy_fns, after_load);                           \
  FNS(PERF__LAZY_DEFINE)

#endif
