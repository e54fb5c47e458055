/*
 * owned_fds.h - the registry of the file descriptors the SDK keeps open
 * for a long time (the spool's LOCK and directory, this process's hang
 * marker, the file sink's report, the uploader's sockets). A child forked
 * from the app closes its copies of them (perf__owned_fds_close_all), so
 * that it never holds the parent's flocks alive nor writes into the
 * parent's files.
 *
 * Lock-free: a fixed table of atomic descriptors. Register after open,
 * unregister before close: the table never names a descriptor that is
 * closed (and could be reused by the app), at worst it misses one (the
 * child then keeps that copy open, as without the registry).
 */
#ifndef PERF_OWNED_FDS_H
#define PERF_OWNED_FDS_H

#define PERF__OWNED_FDS_MAX 64

/* Note `fd` (>= 0) as the SDK's; a full table leaves it unnoted. */
void perf__owned_fd_add(int fd);

/* Forget `fd`, just before closing it. */
void perf__owned_fd_remove(int fd);

/* In a forked child, single-threaded: close every noted descriptor and
   empty the table. Async-signal-safe (close only). */
void perf__owned_fds_close_all(void);

/* How many descriptors are noted now (tests). */
int perf__owned_fds_count(void);

#endif
