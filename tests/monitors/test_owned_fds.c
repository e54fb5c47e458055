/*
 * test_owned_fds.c - the registry of the SDK's long-lived descriptors
 * (sdk/base/owned_fds.c) with real files, pipes and sockets: a holder
 * (perf__owned_fd_t) holds its descriptor while it names the file it
 * named when held; a number closed and reused by another file (as after
 * an app's closefrom and its own opens) is not held; close_all closes
 * only what is still the SDK's; the table's capacity; two holders of one
 * number, in either slot order, each told about its own file only. Each
 * case runs in its own process: `test_owned_fds <case>`.
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

static void case_hold_held_forget(void) {
  perf__owned_fd_t o;
  int fd = open_file("a");
  perf__owned_fd_hold(&o, fd);
  CHECK_EQ_INT(o.fd, fd);
  CHECK_EQ_INT(perf__owned_fds_count(), 1);
  CHECK(perf__owned_fd_held(&o));
  perf__owned_fd_forget(&o);
  CHECK_EQ_INT(o.fd, -1);
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
  CHECK(!perf__owned_fd_held(&o));
  CHECK(is_open(fd)); /* forget never closes */
  perf__owned_fd_hold(&o, fd);
  perf__owned_fd_release(&o);
  CHECK(!is_open(fd)); /* release closes what is still held */
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
  perf__owned_fd_hold(&o, -1); /* not a descriptor: nothing noted */
  CHECK(!perf__owned_fd_held(&o));
  perf__owned_fd_hold(&o, 1000); /* closed: fstat fails, nothing noted */
  CHECK(!perf__owned_fd_held(&o));
  perf__owned_fd_forget(&o);
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
}

/* The app closes a held descriptor and opens a file of its own, which
   takes the same number: the holder no longer holds it, for files, pipes
   and sockets alike, and releasing it closes nothing. */
static void case_reused_number_not_held(void) {
  int file = open_file("sdk");
  int p[2];
  CHECK(pipe2(p, O_CLOEXEC) == 0);
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  int mine[] = {file, p[0], p[1], sv[0]};
  perf__owned_fd_t held[ARRAY_LEN(mine)];
  for (size_t i = 0; i < ARRAY_LEN(mine); i++)
    perf__owned_fd_hold(&held[i], mine[i]);
  CHECK_EQ_INT(perf__owned_fds_count(), 4);
  for (size_t i = 0; i < ARRAY_LEN(mine); i++)
    CHECK(perf__owned_fd_held(&held[i]));

  /* closefrom(3), then the app's own files at the old numbers. */
  CHECK(close_range(3, ~0u, 0) == 0);
  for (size_t i = 0; i < ARRAY_LEN(mine); i++)
    CHECK(!perf__owned_fd_held(&held[i])); /* closed */
  char name[16];
  for (size_t i = 0; i < ARRAY_LEN(mine); i++) {
    snprintf(name, sizeof name, "app%zu", i);
    int fd = open_file(name);
    CHECKF(fd == 3 + (int)i, "the app's file took %d, not %d", fd, 3 + (int)i);
  }
  for (size_t i = 0; i < ARRAY_LEN(mine); i++)
    CHECKF(!perf__owned_fd_held(&held[i]), "%d is the app's file now", mine[i]);
  CHECK_EQ_INT(perf__owned_fds_count(), 4); /* still noted until forgotten */

  /* A pipe in place of a pipe, a socket in place of a socket: new inodes. */
  CHECK(close_range(3, ~0u, 0) == 0);
  int p2[2], sv2[2];
  CHECK(pipe2(p2, O_CLOEXEC) == 0);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv2) == 0);
  CHECK(p2[0] == 3 && p2[1] == 4 && sv2[0] == 5);
  for (size_t i = 0; i < ARRAY_LEN(mine); i++)
    CHECKF(!perf__owned_fd_held(&held[i]), "%d is another pipe or socket now", mine[i]);
  for (size_t i = 0; i < ARRAY_LEN(mine); i++)
    perf__owned_fd_release(&held[i]);
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
  for (int fd = 3; fd <= 6; fd++)
    CHECKF(is_open(fd), "the app's descriptor %d was closed", fd);
}

/* close_all closes what is still the SDK's and leaves the app's files at
   reused numbers open and untouched; the table is empty after. */
static void case_close_all_only_mine(void) {
  perf__owned_fd_t oa, ob, oc;
  int a = open_file("a"), b = open_file("b"), c = open_file("c");
  perf__owned_fd_hold(&oa, a);
  perf__owned_fd_hold(&ob, b);
  perf__owned_fd_hold(&oc, c);
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
  CHECK(!perf__owned_fd_held(&ob));
}

/* PERF__OWNED_FDS_MAX noted at most; one more is held but left unnoted (a
   forked child keeps it), a forgotten one makes room again. */
static void case_full_table(void) {
  int fds[PERF__OWNED_FDS_MAX + 1];
  perf__owned_fd_t held[PERF__OWNED_FDS_MAX + 1];
  for (int i = 0; i <= PERF__OWNED_FDS_MAX; i++) {
    char name[16];
    snprintf(name, sizeof name, "f%d", i);
    fds[i] = open_file(name);
    perf__owned_fd_hold(&held[i], fds[i]);
  }
  CHECK_EQ_INT(perf__owned_fds_count(), PERF__OWNED_FDS_MAX);
  for (int i = 0; i <= PERF__OWNED_FDS_MAX; i++)
    CHECK(perf__owned_fd_held(&held[i]));            /* the last one too: the holder knows it */
  perf__owned_fd_forget(&held[PERF__OWNED_FDS_MAX]); /* it has no slot: nothing removed */
  CHECK_EQ_INT(perf__owned_fds_count(), PERF__OWNED_FDS_MAX);
  perf__owned_fd_forget(&held[0]);
  CHECK_EQ_INT(perf__owned_fds_count(), PERF__OWNED_FDS_MAX - 1);
  perf__owned_fd_hold(&held[PERF__OWNED_FDS_MAX], fds[PERF__OWNED_FDS_MAX]);
  CHECK_EQ_INT(perf__owned_fds_count(), PERF__OWNED_FDS_MAX);
  perf__owned_fds_close_all();
  CHECK_EQ_INT(perf__owned_fds_count(), 0);
  CHECK(is_open(fds[0])); /* forgotten before close_all: not the SDK's to close */
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

/* The order that would confuse a question by number alone: the part
   that notices the app's closefrom first opens again and gets the other
   part's old number, noted in an earlier slot than the other part's stale
   one. The stale part is not told it holds the new file, and its release
   neither closes it nor takes its slot. */
static void case_new_holder_in_an_earlier_slot(void) {
  perf__owned_fd_t first, second;
  int fa = open_file("a"), fb = open_file("b");
  perf__owned_fd_hold(&first, fa);         /* slot 0 */
  perf__owned_fd_hold(&second, fb);        /* slot 1 */
  CHECK(close(fa) == 0 && close(fb) == 0); /* the app closes both */
  int app = open_file("app");              /* and takes fa's number */
  CHECK_EQ_INT(app, fa);
  CHECK(!perf__owned_fd_held(&first));
  perf__owned_fd_forget(&first);
  int again = open_file("a2"); /* the first part again: fb's number, slot 0 */
  CHECK_EQ_INT(again, fb);
  perf__owned_fd_hold(&first, again);
  CHECK_EQ_INT(perf__owned_fds_count(), 2);
  CHECK(perf__owned_fd_held(&first));
  CHECK(!perf__owned_fd_held(&second)); /* same number, the other part's file */
  perf__owned_fd_release(&second);
  CHECK(is_open(again));
  CHECK_EQ_INT(perf__owned_fds_count(), 1);
  CHECK(perf__owned_fd_held(&first));
  perf__owned_fds_close_all(); /* the slot left is the first part's */
  CHECK(!is_open(again));
  CHECK(is_open(app));
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
    TEST_CASE(hold_held_forget),
    TEST_CASE(reused_number_not_held),
    TEST_CASE(close_all_only_mine),
    TEST_CASE(full_table),
    TEST_CASE(holders_of_one_number),
    TEST_CASE(new_holder_in_an_earlier_slot),
    TEST_CASE(release_closes_only_its_own),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
