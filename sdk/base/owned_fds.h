/*
 * owned_fds.h - the registry of the file descriptors the SDK keeps open
 * for a long time (the spool's LOCK and directory, this process's hang
 * marker, the file sink's report, the uploader's sockets), each with the
 * identity of the file it named when it was noted: the device and inode
 * that fstat reported.
 *
 * Two uses:
 * - A child forked from the app closes its copies of them
 *   (perf__owned_fds_close_all), so that it never holds the parent's
 *   flocks alive nor writes into the parent's files.
 * - An app may close descriptors it did not open (a daemon's
 *   closefrom(3) after init) and open its own files, which then get the
 *   same numbers. Before it uses a long-lived descriptor, the SDK asks
 *   perf__owned_fd_is_mine: a descriptor whose identity changed is the
 *   app's now. The SDK forgets it (without closing it) and opens its own
 *   again; it never reads, writes or closes a descriptor it cannot prove
 *   is its own.
 *
 * An identity is only as unique as the inode behind it: pipes, sockets
 * and files each have their own, while eventfds, epoll and timerfds share
 * one anonymous inode. Descriptors that must be checked are pipes,
 * sockets or files.
 *
 * Lock-free: a fixed table of atomic slots. Register after open,
 * unregister before close: the table never names a descriptor that is
 * closed by the SDK (and could be reused by the app), at worst it misses
 * one (the child then keeps that copy open, as without the registry).
 */
#ifndef PERF_OWNED_FDS_H
#define PERF_OWNED_FDS_H

#include <stdbool.h>

#define PERF__OWNED_FDS_MAX 64

/* Note `fd` (>= 0) as the SDK's, with the identity fstat gives it now; a
   full table or a failed fstat leaves it unnoted. */
void perf__owned_fd_add(int fd);

/* Forget `fd`, just before closing it, or once it is found to be the
   app's. */
void perf__owned_fd_remove(int fd);

/* True when `fd` is noted and still names the file it named when noted
   (same device and inode, by fstat). False when it is closed, replaced by
   another file, or was never noted. Async-signal-safe (fstat only). */
bool perf__owned_fd_is_mine(int fd);

/* In a forked child, single-threaded: close every noted descriptor that
   is still the SDK's and empty the table. Async-signal-safe (fstat and
   close only). */
void perf__owned_fds_close_all(void);

/* How many descriptors are noted now (tests). */
int perf__owned_fds_count(void);

#endif
