#!/usr/bin/env bash
# make_corpus.sh MAKE_SEEDS DIR - (re)write fuzz_ingest's seed corpus into DIR:
# the SDK-made batches of make_seeds, plus the hand-written text-format
# batches here (protoc --encode, zstd). See README.md. Inputs the fuzzer once
# broke on (bad_utf8_string.zst) are kept as they were found, not remade.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
make_seeds=$1 dir=$2
"$make_seeds" "$dir"
name="ab$(printf 'é%.0s' $(seq 300))"
sed "s/\"NAME\"/\"$name\"/" "$here/long_utf8_name.txtpb" |
  protoc --encode=perf.v1.Batch -I "$here/../../proto" "$here/../../proto/perf/v1/perf.proto" |
  zstd -q -c >"$dir/long_utf8_name.zst"
