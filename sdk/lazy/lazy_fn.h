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
 */
#ifndef PERF_LAZY_LAZY_FN_H
#define PERF_LAZY_LAZY_FN_H

#include "sdk/base/lazy_lib.h"

#define PERF__LAZY_NAME(kind, ret, name, params, args, fail) #name,
#define PERF__LAZY_INDEX(kind, ret, name, params, args, fail) PERF__LAZY_IDX_##name,

#define PERF__LAZY_CALL(lib, ret, name, params, args, fail, after)                                 \
  ret name params {                                                                                \
    ret(*fn_) params = (ret(*) params)perf__lazy_enter(&(lib), PERF__LAZY_IDX_##name);             \
    if (!fn_) return fail;                                                                         \
    ret r = fn_ args;                                                                              \
    after;                                                                                         \
    perf__lazy_leave(&(lib));                                                                      \
    return r;                                                                                      \
  }
#define PERF__LAZY_VCALL(lib, name, params, args, after)                                           \
  void name params {                                                                               \
    void(*fn_) params = (void(*) params)perf__lazy_enter(&(lib), PERF__LAZY_IDX_##name);           \
    if (!fn_) return;                                                                              \
    fn_ args;                                                                                      \
    after;                                                                                         \
    perf__lazy_leave(&(lib));                                                                      \
  }

#define PERF__LAZY_DEF_FN(lib, ret, name, params, args, fail)                                      \
  PERF__LAZY_CALL(lib, ret, name, params, args, fail, (void)0)
#define PERF__LAZY_DEF_NEW(lib, ret, name, params, args, fail)                                     \
  PERF__LAZY_CALL(lib, ret, name, params, args, fail, if (r) perf__lazy_object_made(&(lib)))
#define PERF__LAZY_DEF_END(lib, ret, name, params, args, fail)                                     \
  PERF__LAZY_CALL(lib, ret, name, params, args, fail, if (a) perf__lazy_object_ended(&(lib)))
#define PERF__LAZY_DEF_VFN(lib, ret, name, params, args, fail)                                     \
  PERF__LAZY_VCALL(lib, name, params, args, (void)0)
#define PERF__LAZY_DEF_VEND(lib, ret, name, params, args, fail)                                    \
  PERF__LAZY_VCALL(lib, name, params, args, if (a) perf__lazy_object_ended(&(lib)))

#endif
