#!/usr/bin/env bash
# check_bind_now.sh LIBRARY - LIBRARY was linked with -z now (DT_FLAGS
# BIND_NOW or DT_FLAGS_1 NOW): the dynamic linker binds every symbol at
# load, so no call made in a signal handler resolves a symbol lazily on the
# interrupted thread's stack. Prints the flags; exits 1 otherwise.
set -euo pipefail
lib=$1
flags=$(readelf -d "$lib" | grep -E '\((FLAGS|FLAGS_1)\)' || true)
echo "$flags"
if grep -qE 'BIND_NOW|Flags:.* NOW' <<<"$flags"; then
  echo "check_bind_now: $lib binds every symbol at load"
  exit 0
fi
echo "check_bind_now: $lib binds lazily"
exit 1
