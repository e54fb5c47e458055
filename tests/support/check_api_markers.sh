#!/usr/bin/env bash
# check_api_markers.sh CC INCLUDE_DIR - the public header's markers do what
# its comments say, as an app's compiler sees them (each file compiled
# with -Werror=deprecated-declarations):
#   PERF_DEPRECATED(msg): a call of such a function fails with msg; the
#     declaration alone compiles;
#   PERF_EXPERIMENTAL_API: calls compile; with PERF_SDK_WARN_EXPERIMENTAL
#     defined, a call fails naming it experimental;
#   the header compiles as C11 and C++ with -Wall -Wextra -Werror.
set -euo pipefail
cc=$1 inc=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
compile() { "$cc" -std=c11 -Wall -Wextra -Werror=deprecated-declarations -I"$inc" -fsyntax-only "$@"; }

cat > "$dir/deprecated.c" <<'C'
#include "perf_sdk.h"
PERF_API PERF_DEPRECATED("use perf_sdk_flush instead") int perf_test_old(void);
int main(void) {
#ifdef CALL
  return perf_test_old();
#else
  return 0;
#endif
}
C
compile "$dir/deprecated.c" 2>"$dir/out" || fail "a PERF_DEPRECATED declaration alone: $(cat "$dir/out")"
if compile -DCALL "$dir/deprecated.c" 2>"$dir/out"; then
  fail "a call of a PERF_DEPRECATED function compiled under -Werror=deprecated-declarations"
fi
grep -q "use perf_sdk_flush instead" "$dir/out" || fail "the error does not say the message: $(cat "$dir/out")"

cat > "$dir/experimental.c" <<'C'
#include "perf_sdk.h"
int main(void) { return perf_sdk_loop_register("worker-1", 0); }
C
compile "$dir/experimental.c" 2>"$dir/out" || fail "a call of an experimental function: $(cat "$dir/out")"
if compile -DPERF_SDK_WARN_EXPERIMENTAL "$dir/experimental.c" 2>"$dir/out"; then
  fail "PERF_SDK_WARN_EXPERIMENTAL: a call of perf_sdk_loop_register compiled without a warning"
fi
grep -q "experimental perf sdk API" "$dir/out" || fail "the error does not say experimental: $(cat "$dir/out")"

echo '#include "perf_sdk.h"' > "$dir/header.cc"
"$cc" -x c++ -Wall -Wextra -Werror -DPERF_SDK_WARN_EXPERIMENTAL -I"$inc" -fsyntax-only "$dir/header.cc" 2>"$dir/out" ||
  fail "the header as C++: $(cat "$dir/out")"
echo "PERF_DEPRECATED and PERF_EXPERIMENTAL_API behave as documented"
