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

/* Reads the configuration from fd: blocks in libc's read() until it
   arrives. */
CHAIN ssize_t inapp_lib_read_config(int fd, char *buf, size_t size) {
  ssize_t n = read(fd, buf, size);
  return n < 0 ? -1 : n; /* used after the call: no tail call */
}
