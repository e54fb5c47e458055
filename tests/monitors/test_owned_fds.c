/*
 * test_owned_fds.c - the registry of the SDK's long-lived descriptors
 * (sdk/base/owned_fds.c) with real files, pipes and sockets: a noted
 * descriptor is the SDK's while it names the file it named when noted; a
 * number closed and reused by another file (as after an app's closefrom
 * and its own opens) is not; close_all closes only what is still the
 * SDK's; the table's capacity; holders (perf__owned_fd_t), each told
 * about its own file only when two of them noted one number. Each case
 * runs in its own process: `test_owned_fds <case>`.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "sdk/base/owned_fds.h"
#include "tempdir.h"

/* A new file in the test's directory, opened for reading and writing. */
static int open_file(const char *name) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", tempdir_make("perf-ownfd"), name);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  CHECKF(fd >= 0, "open %s: %s", path, strerror(errno));
  return fd;
}

/* Whether fd is an open descriptor of this process. */
static bool is_open(int fd) {
  return fcntl(fd, F_GETFD) >= 0;
}

static void case_add_is_mine_remove(void) {
  int fd = open_file("a");
  CHECK(!perf__owned_fd_is_mine(fd)); /* never noted */
  perf__owned_fd_add(fd);
  CHECK_EQ_INT(perf__owned_fds_count(), 1);
  CHECK(perf__owned_fd_is_mine(fd));
  perf__owned_fd_remove(fd);
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
  CHECK(!perf__owned_fd_is_mine(fd));
  CHECK(is_open(fd)); /* remove forgets, it never closes */
  close(fd);
  CHECK(!perf__owned_fd_is_mine(-1));
  perf__owned_fd_add(-1);   /* not a descriptor: nothing noted */
  perf__owned_fd_add(1000); /* closed: fstat fails, nothing noted */
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
}

/* The app closes a noted descriptor and opens a file of its own, which
   takes the same number: that number is not the SDK's any more, for
   files, pipes and sockets alike. */
static void case_reused_number_not_mine(void) {
  int file = open_file("sdk");
  int p[2];
  CHECK(pipe2(p, O_CLOEXEC) == 0);
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  int mine[] = {file, p[0], p[1], sv[0]};
  for (size_t i = 0; i < ARRAY_LEN(mine); i++)
    perf__owned_fd_add(mine[i]);
  CHECK_EQ_INT(perf__owned_fds_count(), 4);
  for (size_t i = 0; i < ARRAY_LEN(mine); i++)
    CHECK(perf__owned_fd_is_mine(mine[i]));

  /* closefrom(3), then the app's own files at the old numbers. */
  CHECK(close_range(3, ~0u, 0) == 0);
  for (size_t i = 0; i < ARRAY_LEN(mine); i++)
    CHECK(!perf__owned_fd_is_mine(mine[i])); /* closed */
  char name[16];
  for (size_t i = 0; i < ARRAY_LEN(mine); i++) {
    snprintf(name, sizeof name, "app%zu", i);
    int fd = open_file(name);
    CHECKF(fd == 3 + (int)i, "the app's file took %d, not %d", fd, 3 + (int)i);
  }
  for (size_t i = 0; i < ARRAY_LEN(mine); i++)
    CHECKF(!perf__owned_fd_is_mine(mine[i]), "%d is the app's file now", mine[i]);
  CHECK_EQ_INT(perf__owned_fds_count(), 4); /* still noted until removed */

  /* A pipe in place of a pipe, a socket in place of a socket: new inodes. */
  CHECK(close_range(3, ~0u, 0) == 0);
  int p2[2], sv2[2];
  CHECK(pipe2(p2, O_CLOEXEC) == 0);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv2) == 0);
  CHECK(p2[0] == 3 && p2[1] == 4 && sv2[0] == 5);
  for (int fd = 3; fd <= 5; fd++)
    CHECKF(!perf__owned_fd_is_mine(fd), "%d is another pipe or socket now", fd);
  for (size_t i = 0; i < ARRAY_LEN(mine); i++)
    perf__owned_fd_remove(mine[i]);
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
}

/* close_all closes what is still the SDK's and leaves the app's files at
   reused numbers open and untouched; the table is empty after. */
static void case_close_all_only_mine(void) {
  int a = open_file("a"), b = open_file("b"), c = open_file("c");
  perf__owned_fd_add(a);
  perf__owned_fd_add(b);
  perf__owned_fd_add(c);
  close(b);
  int app = open_file("app"); /* takes b's number */
  CHECK_EQ_INT(app, b);
  CHECK(write(app, "app", 3) == 3);
  perf__owned_fds_close_all();
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
  CHECK(!is_open(a));
  CHECK(!is_open(c));
  CHECK(is_open(app));
  char got[8] = {0};
  CHECK(pread(app, got, sizeof got, 0) == 3);
  CHECK(strcmp(got, "app") == 0);
  CHECK(!perf__owned_fd_is_mine(app));
}

/* PERF__OWNED_FDS_MAX noted at most; one more is left unnoted, a removal
   makes room again. */
static void case_full_table(void) {
  int fds[PERF__OWNED_FDS_MAX + 1];
  for (int i = 0; i <= PERF__OWNED_FDS_MAX; i++) {
    char name[16];
    snprintf(name, sizeof name, "f%d", i);
    fds[i] = open_file(name);
    perf__owned_fd_add(fds[i]);
  }
  CHECK_EQ_INT(perf__owned_fds_count(), PERF__OWNED_FDS_MAX);
  for (int i = 0; i < PERF__OWNED_FDS_MAX; i++)
    CHECK(perf__owned_fd_is_mine(fds[i]));
  CHECK(!perf__owned_fd_is_mine(fds[PERF__OWNED_FDS_MAX])); /* no room was left */
  perf__owned_fd_remove(fds[0]);
  perf__owned_fd_add(fds[PERF__OWNED_FDS_MAX]);
  CHECK(perf__owned_fd_is_mine(fds[PERF__OWNED_FDS_MAX]));
  CHECK_EQ_INT(perf__owned_fds_count(), PERF__OWNED_FDS_MAX);
  perf__owned_fds_close_all();
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
  CHECK(is_open(fds[0])); /* removed before close_all: not the SDK's to close */
  for (int i = 1; i <= PERF__OWNED_FDS_MAX; i++)
    CHECKF(!is_open(fds[i]), "noted descriptor %d left open", fds[i]);
}

/* Two parts of the SDK and one number: a holder whose descriptor the app
   closed (not told yet) and a holder that has just opened a new file and
   got the same number. Each is told about its own file only: the stale one
   forgets without closing, and never takes the new holder's slot. */
static void case_holders_of_one_number(void) {
  perf__owned_fd_t stale, fresh;
  int fd = open_file("old");
  perf__owned_fd_hold(&stale, fd);
  CHECK(perf__owned_fd_held(&stale));
  CHECK_EQ_INT(perf__owned_fds_count(), 1);
  CHECK(!perf__owned_fd_is_mine(fd)); /* number-only calls never see a holder's slot */
  perf__owned_fd_remove(fd);
  CHECK_EQ_INT(perf__owned_fds_count(), 1);

  close(fd); /* the app's closefrom */
  int p[2];
  CHECK(pipe2(p, O_CLOEXEC) == 0); /* another part's new pipe takes the number */
  CHECK_EQ_INT(p[0], fd);
  perf__owned_fd_hold(&fresh, p[0]);
  CHECK_EQ_INT(perf__owned_fds_count(), 2);
  CHECK(perf__owned_fd_held(&fresh));
  CHECK(!perf__owned_fd_held(&stale));

  perf__owned_fd_release(&stale); /* not held: forgotten, not closed */
  CHECK_EQ_INT(stale.fd, -1);
  CHECK(is_open(p[0]));
  CHECK(perf__owned_fd_held(&fresh));
  CHECK_EQ_INT(perf__owned_fds_count(), 1); /* its own slot went, the new holder's stayed */
  CHECK(write(p[1], "x", 1) == 1);

  perf__owned_fds_close_all(); /* a fork child: holders' slots are closed too */
  CHECK(!is_open(p[0]));
  CHECK(is_open(p[1])); /* never noted */
  CHECK_EQ_INT(perf__owned_fds_count(), 0);

  perf__owned_fd_t none = PERF__OWNED_FD_NONE;
  CHECK(!perf__owned_fd_held(&none));
  perf__owned_fd_release(&none);
  perf__owned_fd_hold(&none, 1000); /* not open: holds nothing */
  CHECK(!perf__owned_fd_held(&none));
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
}

/* A holder releasing its own file closes it; one whose number the app
   reused closes nothing. */
static void case_release_closes_only_its_own(void) {
  perf__owned_fd_t a, b;
  int fa = open_file("a"), fb = open_file("b");
  perf__owned_fd_hold(&a, fa);
  perf__owned_fd_hold(&b, fb);
  perf__owned_fd_release(&a);
  CHECK(!is_open(fa));
  close(fb);
  int app = open_file("app");
  CHECK_EQ_INT(app, fa); /* lowest free */
  int app2 = open_file("app2");
  CHECK_EQ_INT(app2, fb);
  perf__owned_fd_release(&b);
  CHECK(is_open(app2));
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
}

static const test_case_t g_cases[] = {
    TEST_CASE(add_is_mine_remove),    TEST_CASE(reused_number_not_mine),
    TEST_CASE(close_all_only_mine),   TEST_CASE(full_table),
    TEST_CASE(holders_of_one_number), TEST_CASE(release_closes_only_its_own),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
