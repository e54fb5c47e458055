/*
 * names_app.cc - the C++ program (-O2 -g) whose names the tests check.
 * test_symbols reads it as a file (its symbol table and DWARF against
 * addr2line and nm); test_names runs it: three threads park where names
 * are hard (inline chains of the standard library, templates, lambdas), it
 * captures them with perf_backtrace_all_threads_text and with the file
 * sink, and the test compares each stack with gdb's `thread apply all bt`
 * of the same, still parked, threads.
 *
 * What is in it, on purpose:
 *  - namespaces and class templates (shop::orders::Queue<long>,
 *    shop::pricing::Engine<long>);
 *  - functions gcc clones: Engine<long>::total() const and cart_weight
 *    become ".isra.0" clones, fill_cart a ".constprop.0" (test_symbols
 *    checks with nm that they exist);
 *  - inlining: Queue::pop (std::condition_variable::wait with a lambda
 *    predicate), Ledger::record (std::lock_guard, std::mutex::lock) and
 *    Mixer::mix_until (the hot loop) are inlined into noinline callers;
 *    deep<40> is an inline chain deeper than the symbolizer keeps;
 *  - lambdas: the threads' bodies, std::sort's comparator.
 *
 * Usage: names_app <dir> [--no-sdk]. It writes <dir>/text.txt (the
 * all-threads text) and, unless --no-sdk, <dir>/report.txt (the file
 * sink, one manual event), prints "ready <pid> <cv tid> <mutex tid> <hot
 * tid>", waits for a line on stdin, lets the threads go and exits 0.
 *
 * names_app <dir> --http <url> <key> <symbolize 0|1> (the collector's
 * tests): sink = http to the collector at url, on-device names on or off;
 * waits for one CPU event of the hot thread (its inlined loop), records a
 * manual event of every parked thread, flushes, and exits 0 without
 * waiting for stdin.
 */
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "names_app_threads.h"
#include "perf_sdk.h"

#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE inline __attribute__((always_inline))

std::atomic<long> g_sink{0};

namespace shop {
namespace orders {

/* Orders wait here for work: pop() is inlined into its caller, and with it
   std::condition_variable::wait's predicate loop. */
template <typename T> class Queue {
public:
  void push(T v) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      items_.push_back(v);
    }
    cv_.notify_one();
  }
  ALWAYS_INLINE T pop() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [this] { return !items_.empty(); });
    T v = items_.back();
    items_.pop_back();
    return v;
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<T> items_;
};

NOINLINE void consume_orders(Queue<long> &q) {
  g_sink += q.pop();
}

} // namespace orders

namespace pricing {

/* The books: record() takes the lock (inlined: lock_guard, mutex::lock). */
class Ledger {
public:
  std::mutex mu;
  ALWAYS_INLINE void record(long amount) {
    std::lock_guard<std::mutex> lk(mu);
    total_ += amount;
  }

private:
  long total_ = 0;
};

NOINLINE void post_price(Ledger &ledger, long amount) {
  ledger.record(amount);
  g_sink += amount;
}

/* The hot loop lives entirely in the inlined mix_until: every instruction
   of it names the same chain and line, wherever a sample (or gdb)
   interrupts it. */
template <typename T> struct Mixer {
  static ALWAYS_INLINE T mix_until(const int *stop, T seed) {
    T h = seed * 1099511628211ULL + 0x9e3779b97f4a7c15ULL;
    /* One source line: a sample anywhere in the loop reads the same line. */
    // clang-format off
    do h = (h ^ (h >> 7)) * 1099511628211ULL; while (!__atomic_load_n(stop, __ATOMIC_RELAXED));
    // clang-format on
    return h;
  }
};

NOINLINE unsigned long spin_prices(const int *stop, unsigned long seed) {
  return Mixer<unsigned long>::mix_until(stop, seed);
}

/* Clones: only some of the object is used, so gcc passes the parts
   (".isra"); a constant argument makes ".constprop". */
template <typename T> struct Engine {
  T base, rate;
  T history[16];
  NOINLINE T total() const {
    return base * rate;
  }
};

struct Cart {
  long items[8];
  int n;
  int reserved[32];
};

NOINLINE static long cart_weight(const Cart &c, long k) {
  return c.n * k + c.items[3];
}

NOINLINE static void fill_cart(Cart &c, int n, long scale) {
  for (int i = 0; i < 8; i++)
    c.items[i] = i * scale + n;
  c.n = n;
}

/* An inline chain deeper than the symbolizer keeps (PERF__SYM_MAX_LINES). */
NOINLINE long deep_leaf(long x) {
  g_sink += x;
  return x + 1;
}
template <int N> ALWAYS_INLINE long deep(long x) {
  return deep<N - 1>(x ^ N) + N;
}
template <> ALWAYS_INLINE long deep<0>(long x) {
  return deep_leaf(x);
}
NOINLINE long deep_entry(long x) {
  return deep<40>(x);
}

} // namespace pricing

namespace catalog {

NOINLINE void sort_prices(std::vector<long> &prices) {
  std::sort(prices.begin(), prices.end(), [](long a, long b) { return a > b; });
}

} // namespace catalog
} // namespace shop

/* ------------------------------------------------------------------------ */
/* The run                                                                   */
/* ------------------------------------------------------------------------ */

static pid_t gettid_() {
  return (pid_t)syscall(SYS_gettid);
}

static void pause_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, nullptr);
}

static bool write_file(const std::string &path, const char *text) {
  FILE *f = fopen(path.c_str(), "w");
  if (!f) return false;
  bool ok = fputs(text, f) >= 0;
  return fclose(f) == 0 && ok;
}

static int capture_with_sdk(const std::string &dir) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  std::string report = dir + "/report.txt";
  cfg.app_name = "names_app";
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = report.c_str();
  cfg.data_dir = dir.c_str();
  cfg.cpu_threshold_percent = 25600; /* only the manual event */
  int err = perf_sdk_init(&cfg);
  /* A thread may not answer within the sampler's timeout on a loaded
     machine: that capture fails (counted); ask again. */
  perf_sdk_stats_t st = {};
  for (int attempt = 0; attempt < 20 && !err; attempt++) {
    uint64_t failed = st.samples_failed;
    err = perf_sdk_capture_now("names");
    if (!err) err = perf_sdk_get_stats(&st);
    if (!err && st.samples_failed == failed) break;
  }
  int stop = perf_sdk_shutdown(10000);
  return err ? err : stop;
}

/* The collector's tests: a CPU event of the hot thread (threshold 10% of a
   core over 200 ms: the spinning thread gets that much on 2 busy cores),
   then a manual one of every thread, sent. */
static int send_with_sdk(const std::string &dir, const char *url, const char *key,
                         unsigned symbolize) {
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.app_name = "names_app";
  cfg.sink = PERF_SINK_HTTP;
  cfg.endpoint = url;
  cfg.api_key = key;
  cfg.data_dir = dir.c_str();
  cfg.symbolize = symbolize;
  cfg.cpu_threshold_percent = 10;
  cfg.cpu_window_ms = 200;
  cfg.cpu_burst_ms = 300;
  cfg.cpu_top_threads = 1;
  cfg.batch_max_delay_ms = 100;
  int err = perf_sdk_init(&cfg);
  perf_sdk_stats_t st = {};
  for (int waited = 0; !err && waited < 120000; waited += 10) {
    if ((err = perf_sdk_get_stats(&st)) || st.events_recorded >= 1) break;
    pause_ms(10);
  }
  if (!err && st.events_recorded == 0) err = PERF_E_TIMEOUT;
  uint64_t failed = st.samples_failed;
  for (int attempt = 0; attempt < 20 && !err; attempt++) {
    failed = st.samples_failed;
    err = perf_sdk_capture_now("names");
    if (!err) err = perf_sdk_get_stats(&st);
    if (!err && st.samples_failed == failed) break;
  }
  if (!err) err = perf_sdk_flush(60000);
  int stop = perf_sdk_shutdown(10000);
  return err ? err : stop;
}

/* Every thread's text, asked again while a thread did not answer. */
static int capture_text(char **text) {
  int err = 0;
  for (int attempt = 0; attempt < 20; attempt++) {
    err = perf_backtrace_all_threads_text(text);
    /* The last answer is kept whatever it says (freed, it was written as
       NULL: a crash under load). */
    if (err || !strstr(*text, "\nerror: ") || attempt == 19) break;
    perf_free(*text);
    *text = nullptr;
  }
  return err;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: names_app <dir> [--no-sdk]\n");
    return 2;
  }
  std::string dir = argv[1];
  bool sdk = !(argc > 2 && strcmp(argv[2], "--no-sdk") == 0);
  bool http = argc > 5 && strcmp(argv[2], "--http") == 0;
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* the test's gdb is not our parent */

  /* Run the cloned and sorted code once, so none of it is dead. */
  std::vector<long> prices = {5, 3, 9, 1, argc};
  shop::catalog::sort_prices(prices);
  shop::pricing::Cart cart{};
  shop::pricing::fill_cart(cart, argc, 3);
  shop::pricing::Engine<long> engine{argc, argc + 1, {}};
  volatile long k = 5;
  g_sink += shop::pricing::cart_weight(cart, k) + shop::pricing::cart_weight(cart, k + 1) +
            engine.total() + prices[0] + shop::pricing::deep_entry(argc);

  shop::orders::Queue<long> queue;
  shop::pricing::Ledger ledger;
  static int stop_hot = 0;
  std::atomic<pid_t> cv_tid{0}, mutex_tid{0}, hot_tid{0};
  std::unique_lock<std::mutex> held(ledger.mu); /* the mutex thread parks on it */
  std::thread cv_thread([&] {
    pthread_setname_np(pthread_self(), "orders");
    cv_tid = gettid_();
    shop::orders::consume_orders(queue);
  });
  std::thread mutex_thread([&] {
    pthread_setname_np(pthread_self(), "ledger");
    mutex_tid = gettid_();
    shop::pricing::post_price(ledger, 7);
  });
  std::thread hot_thread([&] {
    pthread_setname_np(pthread_self(), "pricing");
    hot_tid = gettid_();
    g_sink += (long)shop::pricing::spin_prices(&stop_hot, 42);
  });
  /* Parked: the two waiters in futex(2), the hot one past 50 ms of CPU
     (it can burn CPU only in its loop). */
  while (!cv_tid || !mutex_tid || !hot_tid || !in_futex(cv_tid) || !in_futex(mutex_tid) ||
         thread_cpu_s(hot_thread.native_handle()) < 0.05)
    pause_ms(2);

  int err = http  ? send_with_sdk(dir, argv[3], argv[4], (unsigned)atoi(argv[5]))
            : sdk ? capture_with_sdk(dir)
                  : 0;
  char *text = nullptr;
  if (!err && !http) err = capture_text(&text);
  if (!err && !http && !write_file(dir + "/text.txt", text)) err = PERF_E_SYSTEM;
  perf_free(text);
  if (err) {
    fprintf(stderr, "names_app: %s\n", perf_strerror(err));
    return 1;
  }
  printf("ready %d %d %d %d\n", (int)getpid(), (int)cv_tid, (int)mutex_tid, (int)hot_tid);
  fflush(stdout);
  char line[16];
  if (!http && !fgets(line, sizeof line, stdin)) { /* the test went away: finish anyway */
  }

  __atomic_store_n(&stop_hot, 1, __ATOMIC_RELAXED);
  held.unlock();
  queue.push(1);
  cv_thread.join();
  mutex_thread.join();
  hot_thread.join();
  return 0;
}
