/*
 * owned_fds.h - the registry of the file descriptors the SDK keeps open
 * for a long time (the spool's directories and LOCK, the open batch's
 * journal, this process's hang marker, the file sink's report and
 * directories, the uploader's sockets and pipes), each with the identity
 * of the file it named when it was noted: the device and inode that fstat
 * reported.
 *
 * Two uses:
 * - A child forked from the app closes its copies of them
 *   (perf__owned_fds_close_all), so that it never holds the parent's
 *   flocks alive nor writes into the parent's files.
 * - An app may close descriptors it did not open (a daemon's
 *   closefrom(3) after init) and open its own files, which then get the
 *   same numbers. Before it uses a long-lived descriptor, the part of the
 *   SDK that holds it asks perf__owned_fd_held: a descriptor whose
 *   identity changed is the app's now. The part forgets it (without
 *   closing it) and opens its own again; it never reads, writes or closes
 *   a descriptor it cannot prove is its own.
 *
 * Each part keeps its descriptor in a holder (perf__owned_fd_t) that
 * remembers the identity it noted, and every question is about that
 * identity, never about a number alone. After the app closed the SDK's
 * descriptors, one number can be noted twice: by the part that held it
 * before (not told yet) and by the part that has just opened a new file
 * and got the same number. perf__owned_fd_held is true only for the part
 * whose file the number names, and forget and release remove only the
 * asking holder's slot: the stale part never uses, unnotes or closes the
 * other part's new descriptor.
 *
 * An identity is only as unique as the inode behind it: pipes, sockets
 * and files each have their own, while eventfds, epoll and timerfds share
 * one anonymous inode. Descriptors that must be checked are pipes,
 * sockets, files or directories. Two holders of one file (a directory
 * opened twice) cannot be told apart by identity: after a reopen one of
 * them may use the other's descriptor of that same file, which is
 * harmless, and a release closes it only while it still names that file.
 *
 * Lock-free: a fixed table of atomic slots. Hold after open, release (or
 * forget) instead of close: the table never names a descriptor that is
 * closed by the SDK (and could be reused by the app), at worst it misses
 * one (the child then keeps that copy open, as without the registry).
 */
#ifndef PERF_OWNED_FDS_H
#define PERF_OWNED_FDS_H

#include <stdbool.h>
#include <stdint.h>

#define PERF__OWNED_FDS_MAX 64

/* A descriptor held by one part of the SDK, with the identity it was
   noted with. {-1}: none. A plain value: a copy moves the holding to the
   copy (the original is then set to PERF__OWNED_FD_NONE). */
typedef struct {
  int fd;
  uint64_t dev, ino;
} perf__owned_fd_t;

#define PERF__OWNED_FD_NONE                                                                        \
  { -1, 0, 0 }

/* Hold `fd` (>= 0): note it with the identity fstat gives it now, kept in
   *o too. A full table leaves it unnoted (a forked child then keeps its
   copy), but *o still knows it; a failed fstat leaves *o holding nothing
   (its identity all 0: never held). */
void perf__owned_fd_hold(perf__owned_fd_t *o, int fd);

/* True while o->fd still names the file *o noted (same device and inode,
   by fstat). Async-signal-safe. */
bool perf__owned_fd_held(const perf__owned_fd_t *o);

/* Remove *o's slot (the one with its number and identity), never closing:
   for a descriptor the app took. *o then holds nothing. */
void perf__owned_fd_forget(perf__owned_fd_t *o);

/* Forget *o, closing its descriptor when it is still held (a descriptor
   the app took is left open). */
void perf__owned_fd_release(perf__owned_fd_t *o);

/* In a forked child, single-threaded: close every noted descriptor that
   is still the SDK's and empty the table. Async-signal-safe (fstat and
   close only). */
void perf__owned_fds_close_all(void);

/* How many descriptors are noted now (tests). */
int perf__owned_fds_count(void);

#endif
