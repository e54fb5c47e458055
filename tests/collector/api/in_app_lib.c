/*
 * in_app_lib.c - a shared library of the test program's own
 * (libinapp_lib.so, in the build tree): its frames are in-app by the
 * collector's default rules (a library outside the system's directories),
 * and a call through it into libc gives test_collector_in_app a stack of
 * executable <- own library <- libc.
 */
#include <sys/types.h>
#include <unistd.h>

#include "check.h"

#if defined(__SANITIZE_ADDRESS__)
#define IN_APP_LIB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IN_APP_LIB_ASAN 1
#endif
#endif

#ifdef IN_APP_LIB_ASAN
#include <dlfcn.h>
#endif

typedef ssize_t (*read_fn_t)(int fd, void *buf, size_t size);

/* Reads the configuration from fd: blocks in libc's read() until it
   arrives. An ASan build puts libasan's read() interceptor between this
   library and libc: there it calls libc's read() itself (the next
   definition after this library), so the stack is the release build's.
   Through the interceptor, the SDK's walk of the blocked thread (only its
   sp and pc known) can take a stale frame record in this -O0 function's
   frame for the real one and name a wrong caller (docs/internals/sampler.md,
   "Threads blocked in a system call"); this test is about the collector,
   not that walk. */
CHAIN ssize_t inapp_lib_read_config(int fd, char *buf, size_t size) {
#ifdef IN_APP_LIB_ASAN
  read_fn_t read_fn = (read_fn_t)dlsym(RTLD_NEXT, "read");
#else
  read_fn_t read_fn = read;
#endif
  ssize_t n = read_fn ? read_fn(fd, buf, size) : -1;
  return n < 0 ? -1 : n; /* used after the call: no tail call */
}
