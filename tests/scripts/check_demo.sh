#!/usr/bin/env bash
# check_demo.sh SOURCE_DIR - scripts/demo.sh says what failed: a copy of
# scripts/ in a scratch tree, run with every package installed (fake dpkg,
# fake_dpkg.sh) and a fake cmake that fails (1) configuring, as
# pkg_check_modules does for a missing libmicrohttpd, then (2) building:
# exit 1, the step's log kept in build/demo-logs/, its last 15 lines
# printed (not the first ones) and what to do, word for word.
set -euo pipefail
src=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/perf-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/fake_dpkg.sh"
source "$src/scripts/deps.sh"

tree=$work/tree
mkdir -p "$tree/scripts"
cp "$src/scripts/demo.sh" "$src/scripts/deps.sh" "$tree/scripts/"
for p in "${PERF_DEBIAN_PACKAGES[@]}"; do echo "$p amd64 install ok installed"; done >"$work/db"
fake_dpkg "$work/bin" "$work/db"
# cmake: configuring prints 30 lines, then pkgconf's and CMake's words for
# a missing module (FAKE_CMAKE=configure); building fails at a compiler
# error (FAKE_CMAKE=build).
cat >"$work/bin/cmake" <<'EOS'
#!/usr/bin/env bash
if [ "$1" = --build ]; then
  echo "[1/9] Building C object collector/main.c.o"
  echo "FAILED: collector/CMakeFiles/perf-collector.dir/main.c.o"
  echo "main.c:12:10: fatal error: microhttpd.h: No such file or directory"
  exit 1
fi
[ "$FAKE_CMAKE" = configure ] || exit 0
for i in $(seq 30); do echo "-- configure line $i"; done
echo "-- Checking for module 'libmicrohttpd'"
echo "--   Package 'libmicrohttpd', required by 'virtual:world', not found"
echo "CMake Error at /usr/share/cmake-3.25/Modules/FindPkgConfig.cmake:607 (message):"
echo "  A required package was not found"
exit 1
EOS
chmod +x "$work/bin/cmake"
export PATH=$work/bin:$PATH FAKE_UID=1000
logs=$tree/build/demo-logs

rc=0
FAKE_CMAKE=configure bash "$tree/scripts/demo.sh" >"$work/out" 2>&1 || rc=$?
cat "$work/out"
[ "$rc" = 1 ] || fail "demo.sh with a failing configure: exit $rc (want 1)"
want="demo.sh: step 'configure' failed (exit 1). The last lines of $logs/configure.log:
$(for i in $(seq 20 30); do echo "  | -- configure line $i"; done)
  | -- Checking for module 'libmicrohttpd'
  | --   Package 'libmicrohttpd', required by 'virtual:world', not found
  | CMake Error at /usr/share/cmake-3.25/Modules/FindPkgConfig.cmake:607 (message):
  |   A required package was not found
what to do: install libmicrohttpd-dev (sudo apt-get install libmicrohttpd-dev), then run scripts/demo.sh again"
[ "$(cat "$work/out")" = $'\n'"$want" ] || fail "demo.sh said (above), not:
$want"
[ "$(wc -l <"$logs/configure.log")" = 34 ] || fail "configure.log does not hold the whole output"
echo "demo.sh: a failed configure: its log's tail and the package to install: ok"

rc=0
FAKE_CMAKE=ok bash "$tree/scripts/demo.sh" >"$work/out" 2>&1 || rc=$?
cat "$work/out"
[ "$rc" = 1 ] || fail "demo.sh with a failing build: exit $rc (want 1)"
grep -qxF "what to do: the build's first error: main.c:12:10: fatal error: microhttpd.h: No such file or directory; after installing a package, reconfigure: rm -rf build && scripts/demo.sh" \
  "$work/out" || fail "demo.sh's advice for a failed build (above)"
grep -qxF "  | FAILED: collector/CMakeFiles/perf-collector.dir/main.c.o" "$work/out" ||
  fail "demo.sh did not show the build log's tail"
echo "demo.sh: a failed build: its log's tail and its first error: ok"
