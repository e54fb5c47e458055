#!/usr/bin/env bash
# run_fuzz.sh FUZZER CORPUS SECONDS ARTIFACT_DIR - one libFuzzer run for ctest.
#   SECONDS = 0: the regression run, every file of CORPUS once.
#   SECONDS > 0: fuzz that long from a temporary copy of CORPUS (the source
#   tree is never written); new inputs are dropped with the copy.
# Memory is bounded (-rss_limit_mb, -malloc_limit_mb), leaks fail the run
# (LeakSanitizer), and a crashing input is kept as ARTIFACT_DIR/crash-<sha1>.
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3 artifacts=$4
limits=(-rss_limit_mb=1024 -malloc_limit_mb=512 -timeout=20 "-artifact_prefix=$artifacts/")
shopt -s nullglob
inputs=("$corpus"/*)
if [ ${#inputs[@]} -eq 0 ]; then
  echo "run_fuzz.sh: no inputs in $corpus" >&2
  exit 1
fi
if [ "$seconds" -eq 0 ]; then
  exec "$fuzzer" "${limits[@]}" "${inputs[@]}"
fi
work=$(mktemp -d /tmp/fuzz-corpus.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp "${inputs[@]}" "$work/"
"$fuzzer" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 "$work"
