/*
 * fileio.h - small POSIX file helpers shared by the writer and the hang
 * marker. Not for signal handlers.
 */
#ifndef PERF_FILEIO_H
#define PERF_FILEIO_H

#include <stddef.h>

/* Write all of data, retrying on EINTR and short writes. 0, or -1 with
   errno set. */
int perf__write_all(int fd, const void *data, size_t len);

/* mkdir -p with mode 0700 for the directories it creates. 0, or -1 with
   errno set. */
int perf__mkdir_p(const char *path);

#endif
