/*
 * test_lazy_fork.c - the app forks while an SDK thread loads or unloads a
 * library (sdk/base/lazy_lib.c): every child's own dlopen returns. glibc
 * takes no loader lock around fork, so without the SDK's fork handlers a
 * child forked inside the thread's dlopen or dlclose inherits the loader's
 * lock held by a thread it does not have, and its dlopen waits forever
 * (46 of 300 children before the handlers existed).
 *
 * One thread loads and unloads libcrypt (a library the SDK does not link) through perf__lazy_enter
 * and perf__lazy_libs_unload_idle as fast as it can; the main thread forks FORKS children, each of
 * which dlopens libm and exits. A child that has not exited CHILD_WAIT_MS after its fork is a hang
 * (killed, counted).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "sdk/base/lazy_lib.h"
#include "test_util.h"

#define FORKS 300
#define CHILD_WAIT_MS 10000 /* a child's dlopen and exit, on a loaded machine */

static const char *const k_names[] = {"crypt"};
static void *g_fns[1];
static perf__lazy_lib_t g_crypt = PERF__LAZY_LIB_INIT("libcrypt.so.1", k_names, g_fns, NULL);
static atomic_bool g_stop;
static atomic_ulong g_cycles;

static void *load_unload(void *arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    CHECK(perf__lazy_enter(&g_crypt, 0) != NULL);
    perf__lazy_leave(&g_crypt);
    perf__lazy_libs_unload_idle();
    atomic_fetch_add(&g_cycles, 1);
  }
  return NULL;
}

/* Whether pid exited 0 within CHILD_WAIT_MS; else it is killed. */
static bool child_done(pid_t pid) {
  long long deadline = now_ms() + CHILD_WAIT_MS;
  int status = 0;
  pid_t got;
  while ((got = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() < deadline)
    sleep_ms(1);
  if (got == pid) {
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %#x", (int)pid, status);
    return true;
  }
  kill(pid, SIGKILL);
  CHECK(waitpid(pid, &status, 0) == pid);
  return false;
}

static void case_children_dlopen(void) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, load_unload, NULL) == 0);
  while (atomic_load(&g_cycles) < 10) /* the thread is loading and unloading */
    sleep_ms(1);
  int hung = 0;
  for (int i = 0; i < FORKS; i++) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      void *h = dlopen("libm.so.6", RTLD_NOW);
      _exit(h ? 0 : 1);
    }
    hung += !child_done(pid);
  }
  atomic_store(&g_stop, true);
  CHECK(pthread_join(t, NULL) == 0);
  unsigned long cycles = atomic_load(&g_cycles);
  fprintf(stderr, "%d forks while libcrypt was loaded and unloaded %lu times: %d children hung\n",
          FORKS, cycles, hung);
  CHECK(cycles >= FORKS); /* the loads overlapped the forks */
  CHECK_EQ_INT(hung, 0);
}

static const test_case_t g_cases[] = {
    TEST_CASE(children_dlopen),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
