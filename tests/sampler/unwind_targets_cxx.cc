/*
 * unwind_targets_cxx.cc - C++ for the unwind validator (see
 * unwind_targets.h): what a C++ program spends its time in, most of it in
 * libstdc++ (strings, the red-black tree, streams, exceptions through
 * libgcc_s). Built in the flavour of the program that links it. Runs in
 * the validator's forked child.
 */
#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" {
#include "unwind_targets.h"
}

static volatile unsigned long g_cxx_sink;
static volatile int g_cxx_size = 24;

static void sort_and_format(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; i++)
    v[static_cast<size_t>(i)] = (i * 7919) % 1009;
  std::sort(v.begin(), v.end(), [](int a, int b) { return a > b; });
  std::string s = "unwind";
  for (int i = 0; i < 8; i++)
    s += std::to_string(v[static_cast<size_t>(i)]);
  s.insert(0, "x");
  s.replace(1, 3, "validator");
  std::map<std::string, int> m;
  for (int i = 0; i < n / 2; i++)
    m[std::to_string(i * 37)] = i;
  m.erase(m.begin());
  std::ostringstream os;
  os << s << ' ' << 3.25 * n << ' ' << m.size() << ' ' << m.find("74")->second;
  g_cxx_sink = g_cxx_sink + os.str().size() + s.find('9');
}

static void throw_and_catch(void) {
  try {
    throw std::runtime_error("unwind validator");
  } catch (const std::exception &e) {
    g_cxx_sink = g_cxx_sink + std::strlen(e.what());
  }
}

extern "C" void targets_run_libstdcxx(void) {
  for (int round = 1; round <= 3; round++)
    sort_and_format(g_cxx_size * round);
  throw_and_catch();
}
