#!/usr/bin/env bash
# check_install.sh BUILD_DIR SOURCE_DIR - `cmake --install` of the build into
# a scratch prefix (not the one it was configured for: the packages must be
# relocatable), then apps built against that prefix only, as users build
# them: a CMake project (find_package(PerfSDK), shared and static, also
# installed into a prefix of its own and run from there without
# LD_LIBRARY_PATH: the front and the core it loads must be the prefix's) and
# plain cc with pkg-config (perfsdk.pc, perfsdk-static.pc). Each app must
# run and write its event, named from inside consumer_checkpoint, to its
# report. The collector's component installed under the same prefix must
# put every file (its conf file and systemd unit too) under it.
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/perf-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" --component runtime >/dev/null
cmake --install "$build" --prefix "$prefix" --component dev >/dev/null
front=$(find "$prefix" -name libperfsdk.so.0) || true
[ -n "$front" ] || fail "libperfsdk.so.0 not installed"
libdir=$(dirname "$front")
for f in libperfsdk-core.so.0 libperfsdk.so libperfsdk.a cmake/PerfSDK/PerfSDKConfig.cmake \
  cmake/PerfSDK/PerfSDKConfigVersion.cmake cmake/PerfSDK/PerfSDKTargets.cmake \
  pkgconfig/perfsdk.pc pkgconfig/perfsdk-static.pc; do
  [ -e "$libdir/$f" ] || fail "$libdir/$f not installed"
done
for h in perf_sdk.h perf_sdk_uv.h perf_sdk_glib.h perf_sdk_libevent.h; do
  [ -e "$prefix/include/$h" ] || fail "include/$h not installed"
done
[ ! -e "$libdir/libperfsdk-core.so" ] || fail "libperfsdk-core.so: the core is never linked by name"
echo "installed: $(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')"

# The collector's component under the same prefix: every file in it (its
# conf file and unit too), nothing outside. Staged with DESTDIR, so a file
# bound elsewhere lands in the stage (never in this machine's /etc) and is
# seen there (the build's install manifest is shared with cpack's runs).
DESTDIR=$work/stage cmake --install "$build" --prefix "$prefix" --component collector >/dev/null
outside=$(cd "$work/stage" && find . ! -type d | sed 's|^\.||' | grep -v "^$prefix/" || true)
[ -z "$outside" ] || fail "cmake --install --component collector --prefix P wrote outside P: $outside"
for f in bin/perf-collector etc/perf-collector/perf-collector.conf \
  lib/systemd/system/perf-collector.service; do
  [ -f "$work/stage$prefix/$f" ] || fail "component collector: no $f under the prefix"
done
echo "collector: $(cd "$work/stage" && find . ! -type d | wc -l) files, all under the prefix"

export XDG_STATE_HOME=$work/state # the SDK's default data_dir stays in here
check_app() { # app name: runs it, checks its report and what it links
  local app=$1 how=$2 report=$work/report-$2.txt
  "$app" "$report" || fail "$how: the app failed (status $?)"
  grep -q 'installed' "$report" || fail "$how: no event in $report"
  grep -q 'consumer_checkpoint' "$report" || fail "$how: consumer_checkpoint not in the stack:
$(cat "$report")"
  local needed
  needed=$(readelf -d "$app" | awk '/NEEDED/ {print $5}' | tr -d '[]' | tr '\n' ' ')
  case $how in
    *shared) [[ $needed == *libperfsdk.so.0* && $needed != *core* ]] ||
      fail "$how: links $needed (want libperfsdk.so.0, never the core)" ;;
    *static) [[ $needed != *perfsdk* ]] || fail "$how: links $needed (want no libperfsdk)"
      # The handler's calls are bound at load in the app too (-z now).
      readelf -d "$app" | grep -Eq 'BIND_NOW|FLAGS_1.*NOW' || fail "$how: linked without -z now" ;;
  esac
  echo "$how: ok (NEEDED: $needed)"
}

# CMake: find_package(PerfSDK) with the prefix on CMAKE_PREFIX_PATH.
cmake -S "$src/tests/install/consumer" -B "$work/cmake" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$work/cmake" >/dev/null
check_app "$work/cmake/consumer_shared" cmake-shared
check_app "$work/cmake/consumer_static" cmake-static

# The app installed into a prefix of its own runs without LD_LIBRARY_PATH:
# PerfSDK::perfsdk gave it a RUNPATH to this prefix's libdir, and ld.so's
# own account (LD_DEBUG=files) shows the front and the core it loads are
# this prefix's, not another install's.
cmake --install "$work/cmake" --prefix "$work/app" >/dev/null
installed=$work/app/bin/consumer_shared
runpath=$(readelf -d "$installed" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
[[ ":$runpath:" == *":$(realpath "$libdir"):"* ]] ||
  fail "installed consumer_shared: RUNPATH '$runpath' lacks $libdir"
check_app "$installed" installed-shared
loaded=$(env -u LD_LIBRARY_PATH LD_DEBUG=files "$installed" "$work/report-loaded.txt" 2>&1 >/dev/null |
  sed -nE 's/.*calling init: (.*libperfsdk(-core)?\.so\.0)$/\1/p' | sort -u)
want=$(printf '%s\n' "$(realpath "$libdir")/libperfsdk-core.so.0" "$(realpath "$libdir")/libperfsdk.so.0")
[ "$loaded" = "$want" ] || fail "installed consumer_shared loaded:
$loaded
(want, from the prefix:
$want)"
echo "installed-shared: loads $(tr '\n' ' ' <<<"$loaded")"

# pkg-config, the prefix found from the .pc file's own place.
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --variable=includedir perfsdk)" -ef "$prefix/include" ] ||
  fail "perfsdk.pc: includedir $(pkg-config --variable=includedir perfsdk) is not $prefix/include"
static_libs=$(pkg-config --static --libs perfsdk)
for want in -lperfsdk -ldw -lelf -lprotobuf-c -lzstd -liberty; do
  [[ " $static_libs " == *" $want "* ]] || fail "pkg-config --static --libs perfsdk lacks $want: $static_libs"
done
# shellcheck disable=SC2046
cc -O2 -o "$work/pc_shared" "$src/tests/install/consumer/main.c" $(pkg-config --cflags --libs perfsdk) \
  -Wl,-rpath,"$libdir"
check_app "$work/pc_shared" pkgconfig-shared
# shellcheck disable=SC2046
cc -O2 -o "$work/pc_static" "$src/tests/install/consumer/main.c" \
  $(pkg-config --cflags --libs perfsdk-static)
check_app "$work/pc_static" pkgconfig-static
