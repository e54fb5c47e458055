/*
 * db_dir.h - the directory of the SQLite database, ready before SQLite
 * opens the file: made when it is missing and its parent exists (the
 * collector makes its own state directory, with or without systemd's
 * StateDirectory=), and checked writable (SQLite writes its -wal and -shm
 * beside the database), through collector_dir_prepare (base/dir.h). What
 * is wrong is said with the directory's path and the system's reason, not
 * SQLite's "unable to open database file". Called once, at open, by the
 * main thread.
 */
#ifndef PERF_COLLECTOR_DB_DIR_H
#define PERF_COLLECTOR_DB_DIR_H

#include <stddef.h>

/* 0 when db_path's directory exists (or was made, mode 0750) and this
   process may create files in it; -1 otherwise, *why (size bytes) reading
   "database directory DIR: cannot create it: No such file or directory",
   "database directory DIR: not writable: Permission denied" or
   "database directory DIR: not a directory". In-memory databases
   (":memory:", "", "file:" URIs) pass untouched. */
int db_dir_prepare(const char *db_path, char *why, size_t size);

#endif
