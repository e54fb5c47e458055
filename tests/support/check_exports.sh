#!/usr/bin/env bash
# check_exports.sh LIB HEADER - the shared library exports exactly the
# functions the public header declares (all perf_ names), nothing internal.
set -euo pipefail
lib=$1 header=$2
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
declared=$(grep -oE '^PERF_API [^(]*\b(perf_[a-z0-9_]+)\(' "$header" | grep -oE 'perf_[a-z0-9_]+\($' | tr -d '(' | sort)
if [ "$exported" != "$declared" ]; then
  echo "exported symbols differ from the header's PERF_API functions:"
  diff <(echo "$declared") <(echo "$exported") || true
  exit 1
fi
echo "exports match the header: $(echo "$exported" | wc -l) perf_ functions"
