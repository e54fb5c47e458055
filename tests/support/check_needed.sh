#!/usr/bin/env bash
# check_needed.sh LIBRARY PATTERN - LIBRARY's dynamic section (readelf -d)
# lists no DT_NEEDED entry matching PATTERN, and neither does ldd's full
# closure of it. Prints what it found and exits 1 otherwise.
set -euo pipefail
lib=$1
pattern=$2
needed=$(readelf -d "$lib" | grep '(NEEDED)' || true)
echo "$needed"
if grep -q -- "$pattern" <<<"$needed"; then
  echo "check_needed: $lib needs $pattern"
  exit 1
fi
if ldd "$lib" | grep -q -- "$pattern"; then
  echo "check_needed: $lib loads $pattern through a dependency:"
  ldd "$lib"
  exit 1
fi
echo "check_needed: $lib loads no $pattern"
