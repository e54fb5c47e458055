# scripts/deps.sh - sourced by test.sh and demo.sh: installs the Debian
# packages the build and the tests need when they are missing (as root), or
# says which ones to install.
PERF_DEBIAN_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libcurl4-openssl-dev libprotobuf-c-dev protobuf-c-compiler libzstd-dev
  libdw-dev libelf-dev
  libiberty-dev   # the demangler (cplus_demangle, as gdb's and c++filt's), linked statically
  elfutils        # eu-stack: the independent unwinder the tests compare against
  libunwind-dev   # the benchmark's comparison with libunwind-in-handler SDKs
  libgoogle-perftools-dev # cpu_sampling_cost_bench: gperftools' SIGPROF profiler on the same workload
  libmicrohttpd-dev # the scriptable HTTP test server of the uploader tests (tests/http_server.c)
  protobuf-compiler # protoc --decode: the independent check of the batch encoding (test_encoder)
  libjansson-dev  # perf-dump --json, and encode_bench's JSON side
  zlib1g-dev      # encode_bench: the same events as JSON + gzip, for comparison
  libsqlite3-dev  # perf-collector's embedded store
  libpq-dev       # perf-collector's PostgreSQL backend (--db postgresql://...)
  postgresql-15   # the tests' own throwaway server (tests/support/pg_server.sh: initdb, pg_ctl)
  curl jq         # scripts/demo.sh talks to the collector's JSON API
  golang-go       # go tool pprof: the independent reader of the collector's pprof export (tests)
  chromium        # the dashboard's browser test (headless, driven by playwright-core)
  nodejs          # runs the dashboard's browser test (tests/dashboard, node >= 18)
  libdebuginfod-dev # perf-collector fetches missing debug files by build-id (DEBUGINFOD_URLS)
  clang           # the fuzz build (tests/fuzz, PERF_FUZZ=ON): libFuzzer needs clang
  libclang-rt-14-dev # the libFuzzer runtime for clang 14
  clang-format    # ctest `format`: the C files against .clang-format (tests/support/check_format.sh)
  g++             # tests/sampler/names_app.cc: the C++ program whose names are checked
  gdb             # test_names compares captured stacks with gdb's frames (its Python API)
  libc6-dbg       # libc's DWARF by build-id: libc frames get inline chains, as in gdb
  lintian dpkg-dev file # ctest debian_packages: cpack -G DEB (dpkg-shlibdeps, file), then lintian
  python3 systemd # debian_packages: a free port; systemd-analyze security on the collector's unit
  libuv1-dev libglib2.0-dev libevent-dev # tests/integrations: the event-loop integrations on the real libraries
  redis-server redis-tools memcached # tests/preload: unmodified servers under perf-run; redis-benchmark (bench/preload_bench.sh)
  nginx-light wrk # tests/preload: nginx's master and workers under perf-run; wrk loads it in bench/preload_bench.sh
  llvm            # llvm-addr2line: test_collector_names checks the collector's inline chains with LLVM's DWARF reader
)

# The aarch64 stage (scripts/test_aarch64.sh): the cross compiler, qemu-user
# and the arm64 libraries through multiarch (dpkg --add-architecture arm64;
# the -dev packages are Multi-Arch: same and install beside the amd64 ones
# when the versions match). protoc-c runs on the host.
PERF_AARCH64_PACKAGES=(
  gcc-aarch64-linux-gnu qemu-user
  libc6:arm64 libc6-dev:arm64
  libdw-dev:arm64 libelf-dev:arm64 libprotobuf-c-dev:arm64 libzstd-dev:arm64 zlib1g-dev:arm64
  libiberty-dev:arm64 libcurl4-openssl-dev:arm64
)

# pkg-config modules of the build (CMake's pkg_check_modules) and the Debian
# package that has each: what to install when configuring says one is missing.
# shellcheck disable=SC2034 # read by demo.sh
declare -gA PERF_PKGCONFIG_DEBIAN=(
  [libdw]=libdw-dev [libelf]=libelf-dev [libzstd]=libzstd-dev [zlib]=zlib1g-dev
  [libprotobuf-c]=libprotobuf-c-dev [libcurl]=libcurl4-openssl-dev [jansson]=libjansson-dev
  [libmicrohttpd]=libmicrohttpd-dev [sqlite3]=libsqlite3-dev [libpq]=libpq-dev
  [libdebuginfod]=libdebuginfod-dev [libunwind]=libunwind-dev
  [libuv]=libuv1-dev [glib-2.0]=libglib2.0-dev [libevent]=libevent-dev
)

# perf_missing_packages PKG... - prints, one a line, the packages of the list
# that are not installed for their architecture: PKG for the host's
# (dpkg --print-architecture) or Architecture: all, PKG:ARCH for ARCH. A
# package installed for another architecture only (libdw-dev:arm64 for the
# aarch64 stage) does not count for the host: the host's build cannot use it.
perf_missing_packages() {
  local host name arch status pkg want
  host=$(dpkg --print-architecture)
  local -A have=()
  while read -r name arch status; do
    if [ "$status" = "install ok installed" ]; then have["$name:$arch"]=1; fi
  done < <(dpkg-query -W -f='${Package} ${Architecture} ${Status}\n' "${@%%:*}" 2>/dev/null)
  for pkg in "$@"; do
    want=$host
    [[ $pkg == *:* ]] && want=${pkg#*:}
    [ -n "${have[${pkg%%:*}:$want]:-}" ] || [ -n "${have[${pkg%%:*}:all]:-}" ] || echo "$pkg"
  done
}

perf_install_aarch64_deps() {
  local missing=()
  mapfile -t missing < <(perf_missing_packages "${PERF_AARCH64_PACKAGES[@]}")
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages (aarch64 stage): ${missing[*]}" >&2
    echo "install them with: sudo dpkg --add-architecture arm64 && sudo apt-get update &&" \
      "sudo apt-get install ${missing[*]}" >&2
    return 1
  fi
  echo "installing (aarch64 stage): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

perf_install_deps() {
  local missing=()
  mapfile -t missing < <(perf_missing_packages "${PERF_DEBIAN_PACKAGES[@]}")
  # npm installs the browser test's playwright-core; Debian ships it apart
  # from nodejs (NodeSource's nodejs package bundles it: no Debian npm then).
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${missing[*]}" >&2
    echo "install them with: sudo apt-get install ${missing[*]}" >&2
    return 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
