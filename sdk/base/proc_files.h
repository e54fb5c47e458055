/*
 * proc_files.h - this process's files under /proc, also after the app
 * chroots (a daemon does, as root, after init): /proc itself is opened
 * once (perf__proc_open, at init and at the first use) and every file
 * under it is opened relative to that directory, "self/maps" or
 * "self/task/<tid>/stat" ("self" is resolved at each open: a forked
 * child reads its own). A /proc directory the app closed (closefrom) is
 * opened again by its path when it can be. Under an emulator that
 * rewrites "/proc/self/..." by path (qemu-user shows the guest's maps and
 * executable by path, its own through a directory) files are opened by
 * path: the emulated process runs in no chroot.
 *
 * Also the files the process maps (its executable and libraries), which a
 * chroot hides: opened by their path, else through
 * /proc/self/map_files/<range> (root, or CAP_SYS_ADMIN).
 *
 * Any thread, never the signal handler.
 */
#ifndef PERF_PROC_FILES_H
#define PERF_PROC_FILES_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Open /proc now, if it is not open yet, and note which directory is the
   root: init calls it, before the app can chroot. Returns 0 or
   PERF_E_SYSTEM. */
int perf__proc_open(void);

/* True when the root directory is no longer the one perf__proc_open saw
   (the app chrooted since): files outside the new root, such as the
   libraries the SDK loads when needed, cannot be opened by path. */
bool perf__root_changed(void);

/* Whether /proc can be reached (its directory kept, or opened now): what
   tells "no such file under /proc" (a thread gone) from "no /proc at all"
   when an open below fails with ENOENT. */
bool perf__proc_reachable(void);

/* open, fopen ("re"), opendir, readlink and stat of `rel` under /proc
   ("self/maps"): as the calls they are named after (-1 / NULL with errno
   set on failure; ENOENT when /proc cannot be reached at all). */
int perf__proc_openat(const char *rel, int flags);
FILE *perf__proc_fopen(const char *rel);
DIR *perf__proc_opendir(const char *rel);
ssize_t perf__proc_readlink(const char *rel, char *buf, size_t cap);
int perf__proc_stat(const char *rel, struct stat *st);
int perf__proc_statx(const char *rel, int flags, unsigned mask, struct statx *sx);

/* Open a file this process maps, read-only: by `path`, else (the path is
   gone from this root, after a chroot) through /proc/self/map_files of a
   mapping of that path. -1 with errno set when neither works: the path's
   error, or the map_files one (EPERM without CAP_SYS_ADMIN). */
int perf__mapped_file_open(const char *path, int flags);

/* The path of the file mapped at `addr` (as /proc/self/maps names it,
   symbolic links resolved) into out: 0, or -1 when no file is mapped
   there or /proc cannot be read. */
int perf__mapped_file_path(uintptr_t addr, char *out, size_t cap);

#endif
