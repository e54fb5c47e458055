#!/usr/bin/env bash
# check_exports.sh LIB HEADER - the shared library exports exactly the
# functions the public header declares (all perf_ names, PERF_API or
# PERF_EXPERIMENTAL_API), nothing internal,
# each with a version node of sdk/perfsdk.map (perf_sdk_init@@PERFSDK_0.1).
set -euo pipefail
lib=$1 header=$2
symbols=$(nm -D --defined-only "$lib" | awk '$2 != "A" {print $3}')
unversioned=$(echo "$symbols" | grep -v '@@PERFSDK_[0-9.]*$' || true)
if [ -n "$unversioned" ]; then
  echo "exported without a PERFSDK_ version node:"
  echo "$unversioned"
  exit 1
fi
exported=$(echo "$symbols" | sed 's/@@.*//' | sort)
declared=$(grep -oE '^PERF_(EXPERIMENTAL_)?API [^(]*\b(perf_[a-z0-9_]+)\(' "$header" | grep -oE 'perf_[a-z0-9_]+\($' | tr -d '(' | sort)
if [ "$exported" != "$declared" ]; then
  echo "exported symbols differ from the header's PERF_API functions:"
  diff <(echo "$declared") <(echo "$exported") || true
  exit 1
fi
echo "exports match the header: $(echo "$exported" | wc -l) perf_ functions, versioned"
