/*
 * test_blocking_call.c - the C library's blocking calls by name
 * (collector/model/blocking_call.c): the names glibc's symbol tables give
 * the waiting frames of real stacks (its aliases, internal names, symbol
 * versions, 64-bit time variants, inline frames), and names that are not
 * calls or only look like one.
 */
#include "check.h"
#include "collector/model/blocking_call.h"

static const char *const WAITING[] = {
    "read",
    "__GI___libc_read",
    "__libc_read",
    "read@GLIBC_2.2.5",
    "__read_nocancel",
    "pread64",
    "__pread64_nocancel",
    "epoll_wait",
    "__GI_epoll_pwait",
    "poll",
    "__GI___poll",
    "__poll",
    "ppoll",
    "__select",
    "__pselect64",
    "__futex_abstimed_wait_common64",
    "__futex_abstimed_wait_common",
    "__GI___futex_abstimed_wait_cancelable64",
    "futex_wait [inline]",
    "__lll_lock_wait",
    "__lll_lock_wait_private",
    "___pthread_cond_wait",
    "pthread_cond_wait@@GLIBC_2.3.2",
    "__pthread_cond_timedwait64",
    "__GI___nanosleep",
    "__clock_nanosleep_time64",
    "clock_nanosleep@GLIBC_2.2.5",
    "__GI___clock_nanosleep",
    "usleep",
    "__libc_recv",
    "__libc_recvmsg",
    "accept4",
    "__libc_sendto",
    "__GI___wait4",
    "__new_sem_wait",
    "sem_wait",
    "__libc_write",
};

static const char *const NOT_WAITING[] = {
    "",
    "all",
    "memcpy",
    "__memset_avx2_unaligned_erms",
    "malloc",
    "readdir",
    "reader_thread",
    "read_config",
    "pthread_mutex_lock",
    "__libc_start_main",
    "__libc_start_call_main",
    "start_thread",
    "clone3",
    "__GI_",
    "____",
    "64",
    "_cancelable",
    "epoll_create1",
    "writev_all",
    "readahead",
    "poll_loop",
    "@GLIBC_2.2.5",
    "a_function_name_far_longer_than_any_call_of_the_c_library_that_waits_read",
};

static void case_waiting(void) {
  for (size_t i = 0; i < ARRAY_LEN(WAITING); i++)
    CHECKF(blocking_call_is(WAITING[i]), "%s is a blocking call", WAITING[i]);
}

static void case_not_waiting(void) {
  for (size_t i = 0; i < ARRAY_LEN(NOT_WAITING); i++)
    CHECKF(!blocking_call_is(NOT_WAITING[i]), "%s is not a blocking call", NOT_WAITING[i]);
  CHECK(!blocking_call_is(NULL));
}

static const test_case_t g_cases[] = {
    TEST_CASE(waiting),
    TEST_CASE(not_waiting),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
