#!/usr/bin/env bash
# check_debs.sh BUILD_DIR SOURCE_DIR LIBDIR VERSION - the Debian packages
# (cmake/packaging.cmake) as a user gets them: cpack -G DEB from the build,
# lintian on each .deb (any error fails), each one extracted into a
# scratch root (dpkg-deb -x: the machine's /usr is never touched), their
# file lists and control fields checked, then
#  - perf-collector started without systemd from its unit's ExecStart (the
#    conf file sourced by sh, its variables expanded as systemd does, the
#    absolute paths moved into the scratch root, the listen address
#    127.0.0.1 and a free port, no state directory made for it): /healthz
#    must answer 200, /var/lib/perf-collector made (0750), the keys file
#    read, SIGTERM must stop it (0);
#  - the consumer app (tests/install/consumer) built against the extracted
#    libperfsdk-dev with pkg-config (shared and static) and run.
set -euo pipefail
build=$1 src=$2 libdir=$3 version=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/perf-debs.XXXXXX")
collector_pid=
cleanup() {
  [ -z "$collector_pid" ] || kill -9 "$collector_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
root=$work/root
debs=$work/debs
packages=(libperfsdk0 libperfsdk-dev perf-collector perf-tools)

# ---- build and lint ----------------------------------------------------------
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$debs" >"$work/cpack.log" 2>&1 ||
  fail "cpack failed: $(cat "$work/cpack.log")"
deb_of() { echo "$debs/${1}_${version}_amd64.deb"; }
for p in "${packages[@]}"; do
  [ -f "$(deb_of "$p")" ] || fail "$(deb_of "$p") was not made: $(ls "$debs")"
done
command -v lintian >/dev/null || fail "lintian is not installed (scripts/deps.sh)"
lint=$(lintian --allow-root --tag-display-limit 0 "${debs}"/*.deb 2>&1) || true
echo "lintian:"
echo "${lint:-  (nothing to say)}"
! grep -q '^E: ' <<<"$lint" || fail "lintian found errors (above)"
! grep -q '^W: ' <<<"$lint" || fail "lintian warnings not accepted in packaging/debian/*/lintian-overrides"

# ---- file lists and control fields ---------------------------------------------
files_of() { dpkg-deb -c "$(deb_of "$1")" | awk '$1 !~ /^d/ {print $6}' | sed 's|^\./||' | sort; }
expect_files() { # package file...: exactly these files and links
  local p=$1 want got
  shift
  want=$(printf '%s\n' "$@" usr/share/doc/"$p"/copyright usr/share/doc/"$p"/changelog.gz | sort)
  got=$(files_of "$p")
  [ "$got" = "$want" ] || fail "$p: files differ (- wanted, + packaged):
$(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | sed 's/^</-/; s/^>/+/')"
}
L=usr/$libdir
expect_files libperfsdk0 "$L/libperfsdk.so.0" "$L/libperfsdk.so.$version" \
  "$L/libperfsdk-core.so.0" "$L/libperfsdk-core.so.$version" "$L/perfsdk/perf-upload" \
  "$L/perfsdk/libperfsdk-preload.so" \
  usr/share/lintian/overrides/libperfsdk0
expect_files libperfsdk-dev usr/include/perf_sdk.h usr/include/perf_sdk_uv.h \
  usr/include/perf_sdk_glib.h usr/include/perf_sdk_libevent.h "$L/libperfsdk.so" "$L/libperfsdk.a" \
  "$L/cmake/PerfSDK/PerfSDKConfig.cmake" "$L/cmake/PerfSDK/PerfSDKConfigVersion.cmake" \
  "$L/cmake/PerfSDK/PerfSDKTargets.cmake" "$L/cmake/PerfSDK/PerfSDKTargets-relwithdebinfo.cmake" \
  "$L/pkgconfig/perfsdk.pc" "$L/pkgconfig/perfsdk-static.pc"
expect_files perf-collector usr/bin/perf-collector lib/systemd/system/perf-collector.service \
  etc/perf-collector/perf-collector.conf usr/share/doc/perf-collector/README.md \
  usr/share/lintian/overrides/perf-collector
expect_files perf-tools usr/bin/perf-dump usr/bin/perf-symbols usr/bin/perf-run \
  usr/share/lintian/overrides/perf-tools

control() { dpkg-deb -f "$(deb_of "$1")" "$2"; }
ctrl_file() { dpkg-deb --ctrl-tarfile "$(deb_of "$1")" | tar -xO "./$2"; }
expect() { # what text pattern
  grep -Eq -- "$3" <<<"$2" || fail "$1: '$2' does not match '$3'"
}
for dep in libdw1 libelf1 libzstd1 zlib1g libprotobuf-c1 libc6; do # dlopen'd ones too
  expect "libperfsdk0 Depends" "$(control libperfsdk0 Depends)" "$dep \\(>= [^)]+\\)"
done
expect "libperfsdk0 Recommends" "$(control libperfsdk0 Recommends)" '^libcurl4 \| libcurl3-gnutls$'
expect "libperfsdk0 shlibs" "$(ctrl_file libperfsdk0 shlibs)" "^libperfsdk 0 libperfsdk0 \(>= $version\)"
expect "libperfsdk0 shlibs" "$(ctrl_file libperfsdk0 shlibs)" "libperfsdk-core 0 libperfsdk0"
expect "libperfsdk0 triggers" "$(ctrl_file libperfsdk0 triggers)" '^activate-noawait ldconfig$'
! ctrl_file libperfsdk0 postinst | grep -v "^#" | grep -q ldconfig || fail "libperfsdk0 postinst calls ldconfig"
expect "libperfsdk-dev Depends" "$(control libperfsdk-dev Depends)" "^libperfsdk0 \(= $version\)"
for dev in libdw-dev libelf-dev libprotobuf-c-dev libzstd-dev zlib1g-dev libiberty-dev; do
  expect "libperfsdk-dev Depends" "$(control libperfsdk-dev Depends)" "$dev"
done
expect "perf-collector Depends" "$(control perf-collector Depends)" 'adduser.*libmicrohttpd12'
expect "perf-collector conffiles" "$(ctrl_file perf-collector conffiles)" \
  '^/etc/perf-collector/perf-collector.conf$'
expect "perf-collector postinst" "$(ctrl_file perf-collector postinst)" 'adduser --system'
expect "perf-tools Depends" "$(control perf-tools Depends)" 'libcurl4'
for p in "${packages[@]}"; do dpkg-deb -x "$(deb_of "$p")" "$root"; done

# ---- the collector from its unit ----------------------------------------------
unit=$root/lib/systemd/system/perf-collector.service
for line in User=perf-collector StateDirectory=perf-collector \
  EnvironmentFile=/etc/perf-collector/perf-collector.conf NoNewPrivileges=yes \
  ProtectSystem=strict WantedBy=multi-user.target; do
  grep -qx "$line" "$unit" || fail "$unit: no line $line"
done
# systemd's own reading of the unit's sandbox: exposure at most 2.0 of 10
# ("OK"; the score of each setting is in the output on failure).
if command -v systemd-analyze >/dev/null; then
  exposure=$(systemd-analyze security --offline=yes --root="$root" --threshold=20 --no-pager \
    "$unit" 2>&1) || fail "systemd-analyze security: exposure above 2.0:
$exposure"
  echo "systemd-analyze security: $(grep 'Overall exposure' <<<"$exposure")"
fi
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
[ -n "$exec_start" ] || fail "$unit: no ExecStart"
# The conf file is the unit's EnvironmentFile and a shell file: read here as
# a shell reads it (set -a; . file), as a start without systemd does.
conf=$root/etc/perf-collector/perf-collector.conf
sh -n "$conf" || fail "perf-collector.conf is not a valid shell file"
declare -A env=()
for var in PERF_COLLECTOR_LISTEN PERF_COLLECTOR_OPTIONS DEBUGINFOD_URLS; do
  env[$var]=$(env -i sh -c 'set -a; . "$1" || exit 1; eval "printf %s \"\${$2:-}\""' sh "$conf" \
    "$var" 2>&1) || fail "set -a; . perf-collector.conf: ${env[$var]}"
done
[ -n "${env[PERF_COLLECTOR_LISTEN]}" ] || fail "perf-collector.conf sets no PERF_COLLECTOR_LISTEN"
[ "${env[PERF_COLLECTOR_OPTIONS]}" = "--retention-days 30" ] ||
  fail "perf-collector.conf: PERF_COLLECTOR_OPTIONS is '${env[PERF_COLLECTOR_OPTIONS]}'"
# Its comment says the keys the postinst makes: their number and scopes.
mapfile -t scopes < <(ctrl_file perf-collector postinst | sed -nE 's/.*echo "\$\(new_key\) ([a-z,]+)".*/\1/p')
numbers=(zero one two three four five)
said="the package made ${numbers[${#scopes[@]}]} keys at its first install: $(printf 'one %s, ' "${scopes[@]}" |
  sed -E 's/, $//')"
tr '\n' ' ' <"$conf" | sed 's/# //g; s/  */ /g' | grep -qF "$said." ||
  fail "perf-collector.conf does not say what the postinst makes: '$said.'"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
env[PERF_COLLECTOR_LISTEN]=127.0.0.1:$port
args=() # systemd's rules: ${VAR} is one word, a bare $VAR is split at spaces
for word in $exec_start; do
  if [[ $word =~ ^\$([A-Za-z_][A-Za-z0-9_]*)$ ]]; then
    # shellcheck disable=SC2206
    args+=(${env[${BASH_REMATCH[1]}]:-})
    continue
  fi
  while [[ $word =~ \$\{([A-Za-z_][A-Za-z0-9_]*)\} ]]; do
    word=${word//"${BASH_REMATCH[0]}"/${env[${BASH_REMATCH[1]}]:-}}
  done
  [[ $word == /* ]] && word=$root$word # every path into the scratch root
  args+=("$word")
done
echo "ExecStart, in the scratch root: ${args[*]}"
[ "${args[0]}" = "$root/usr/bin/perf-collector" ] || fail "ExecStart runs ${args[0]}"
mkdir -p "$root/var/lib" # the system's; the collector makes its state directory in it
key=packaged-test-key
printf '%s ingest,read,symbols\n' "$key" >"$root/etc/perf-collector/api-keys" # postinst's job
"${args[@]}" 2>"$work/collector.log" &
collector_pid=$!
deadline=$((SECONDS + 60))
status=000
while [ "$SECONDS" -lt "$deadline" ]; do
  status=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz") || true
  [ "$status" = 200 ] && break
  kill -0 "$collector_pid" 2>/dev/null || fail "perf-collector exited: $(cat "$work/collector.log")"
  sleep 0.2
done
[ "$status" = 200 ] || fail "GET /healthz: $status after 60 s: $(cat "$work/collector.log")"
status=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $key" \
  "http://127.0.0.1:$port/v1/symbols/0011")
[ "$status" = 404 ] || fail "GET /v1/symbols/0011 with the keys file's key: $status (want 404)"
status=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer nope" \
  "http://127.0.0.1:$port/v1/symbols/0011")
[ "$status" = 401 ] || fail "GET /v1/symbols/0011 with an unknown key: $status (want 401)"
[ -f "$root/var/lib/perf-collector/perf-collector.db" ] || fail "no database in /var/lib/perf-collector"
[ "$(stat -c %a "$root/var/lib/perf-collector")" = 750 ] ||
  fail "/var/lib/perf-collector made with mode $(stat -c %a "$root/var/lib/perf-collector")"
kill -TERM "$collector_pid"
rc=0
wait "$collector_pid" || rc=$?
collector_pid=
[ "$rc" = 0 ] || fail "perf-collector exited $rc on SIGTERM: $(cat "$work/collector.log")"
echo "perf-collector: /healthz 200, keys file read, stopped cleanly"

# ---- the dev package: the consumer with pkg-config -----------------------------------
export PKG_CONFIG_PATH=$root/$L/pkgconfig XDG_STATE_HOME=$work/state
[ "$(pkg-config --variable=includedir perfsdk)" -ef "$root/usr/include" ] ||
  fail "perfsdk.pc: includedir $(pkg-config --variable=includedir perfsdk)"
run_consumer() { # app how
  local report=$work/report-$2.txt
  "$1" "$report" || fail "$2: the consumer failed"
  grep -q consumer_checkpoint "$report" || fail "$2: consumer_checkpoint not in $(cat "$report")"
  echo "consumer ($2): ok"
}
# shellcheck disable=SC2046
cc -O2 -o "$work/shared" "$src/tests/install/consumer/main.c" $(pkg-config --cflags --libs perfsdk) \
  -Wl,-rpath,"$root/$L"
readelf -d "$work/shared" | grep -q 'NEEDED.*libperfsdk.so.0' || fail "shared: no libperfsdk.so.0"
run_consumer "$work/shared" pkgconfig-shared
# shellcheck disable=SC2046
cc -O2 -o "$work/static" "$src/tests/install/consumer/main.c" \
  $(pkg-config --cflags --libs perfsdk-static)
run_consumer "$work/static" pkgconfig-static
