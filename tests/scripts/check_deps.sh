#!/usr/bin/env bash
# check_deps.sh SOURCE_DIR - scripts/deps.sh counts a package installed only
# when it is installed for the architecture asked: libdw-dev:arm64 alone
# (the aarch64 stage's) leaves the host's libdw-dev missing. A fake dpkg,
# dpkg-query, id and apt-get on PATH (fake_dpkg.sh): no real package is
# looked up, installed or removed.
set -euo pipefail
src=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/perf-deps.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/fake_dpkg.sh"
source "$src/scripts/deps.sh"

# Every package of the list installed for amd64, but libdw-dev for arm64
# only; jq as an Architecture: all package.
db=$work/db
for p in "${PERF_DEBIAN_PACKAGES[@]}"; do
  case $p in
  libdw-dev) echo "libdw-dev arm64 install ok installed" ;;
  jq) echo "jq all install ok installed" ;;
  *) echo "$p amd64 install ok installed" ;;
  esac
done >"$db"
echo "libelf-dev arm64 deinstall ok config-files" >>"$db"
fake_dpkg "$work/bin" "$db"
export PATH=$work/bin:$PATH

# Not root: the missing package named, with the command that installs it.
rc=0
out=$(FAKE_UID=1000 perf_install_deps 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "perf_install_deps as a user: exit $rc (want 1): $out"
[ "$out" = $'missing Debian packages: libdw-dev\ninstall them with: sudo apt-get install libdw-dev' ] ||
  fail "perf_install_deps as a user said: '$out'"
# Root: apt-get installs exactly it.
out=$(FAKE_UID=0 perf_install_deps 2>&1) || fail "perf_install_deps as root failed: $out"
[ "$out" = "installing: libdw-dev" ] || fail "perf_install_deps as root said: '$out'"
[ "$(cat "$work/bin/apt-get.log")" = $'update -qq\ninstall -y -qq --no-install-recommends libdw-dev' ] ||
  fail "apt-get ran as: $(cat "$work/bin/apt-get.log")"
echo "perf_install_deps: names and installs the host's libdw-dev: ok"

got=$(perf_missing_packages "${PERF_DEBIAN_PACKAGES[@]}")
[ "$got" = libdw-dev ] || fail "missing: '$got' (want libdw-dev: only libdw-dev:arm64 is installed)"
got=$(perf_missing_packages libdw-dev:arm64 libelf-dev:arm64 libdw-dev jq zlib1g-dev:arm64)
[ "$got" = $'libelf-dev:arm64\nlibdw-dev\nzlib1g-dev:arm64' ] ||
  fail "missing: '$got' (want libelf-dev:arm64 (config-files only), libdw-dev, zlib1g-dev:arm64)"
echo "perf_missing_packages: per architecture: ok"
