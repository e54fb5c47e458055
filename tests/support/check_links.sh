#!/usr/bin/env bash
# check_links.sh [+curl] BINARY... - the collector and the tools read batches with
# perfwire alone: none of them may load libcurl (ldd) or carry the SDK's
# sampler, monitors or pipeline (nm: no perf__sampler_, perf__unwind_,
# perf__modules_, perf__hang_monitor, perf__writer_ or perf__uploader_
# symbols). A binary written +curl:BINARY may load libcurl (perf-collector:
# its alerts' webhooks, collector/alerts/alert_send.c), never the rest.
# Names every offence; exits 1 if there is one.
set -euo pipefail
status=0
for arg in "$@"; do
  bin=${arg#+curl:}
  if ! libs=$(ldd "$bin"); then
    echo "$bin: ldd failed" >&2
    status=1
    continue
  fi
  if [ "$bin" = "$arg" ] && grep -q 'libcurl' <<<"$libs"; then
    echo "$bin: loads libcurl: $(grep libcurl <<<"$libs" | awk '{print $1}' | tr '\n' ' ')" >&2
    status=1
  fi
  all=$(nm "$bin" | awk '{print $NF}')
  syms=$(grep -E '^perf__(sampler_|unwind_|modules_|hang_monitor|cpu_monitor|writer_|uploader_)' \
    <<<"$all" || true)
  if [ -n "$syms" ]; then
    echo "$bin: carries SDK internals beyond perfwire: $(head -5 <<<"$syms" | tr '\n' ' ')" >&2
    status=1
  fi
  grep -qx 'perf__batch_decode' <<<"$all" ||
    { echo "$bin: has no perf__batch_decode (not linked with perfwire?)" >&2; status=1; }
done
exit $status
