#!/usr/bin/env bash
# make_http_corpus.sh DIR - (re)write fuzz_http's seed corpus into DIR: one
# file per connection's bytes, the first byte choosing the server (\x00
# with keys: fuzz-key has every scope, read-key read; \x01 open mode).
# See README.md. The batch bodies are corpus/ingest/hang.zst.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$1
mkdir -p "$dir"
H='Host: 127.0.0.1:4318'
K='Authorization: Bearer fuzz-key'
R='Authorization: Bearer read-key'
seed() { # seed NAME SERVER(0|1) TEXT  (TEXT with \r\n escapes, printf %b)
  { printf "\\x0$2"; printf '%b' "$3"; } >"$dir/$1"
}
seed healthz 0 "GET /healthz HTTP/1.1\r\n$H\r\n\r\n"
seed metrics 0 "GET /metrics HTTP/1.1\r\n$H\r\n$R\r\n\r\n"
seed metrics_no_key 0 "GET /metrics HTTP/1.1\r\n$H\r\n\r\n"
seed top_stacks 0 "GET /api/v1/top-stacks?kind=hang&from=0&to=9223372036854&limit=20 HTTP/1.1\r\n$H\r\n$R\r\n\r\n"
seed flame 0 "GET /api/v1/flame?kind=cpu&app=demo&version=1.0&environment=prod HTTP/1.1\r\n$H\r\n$K\r\n\r\n"
seed events 0 "GET /api/v1/events?limit=5&kind=hang HTTP/1.1\r\n$H\r\n$R\r\n\r\n"
seed event_detail 0 "GET /api/v1/events/1 HTTP/1.1\r\n$H\r\n$R\r\n\r\n"
seed folded 0 "GET /api/v1/export/folded?kind=hang HTTP/1.1\r\n$H\r\n$R\r\n\r\n"
seed pprof 0 "GET /api/v1/export/pprof?kind=cpu HTTP/1.1\r\n$H\r\n$R\r\n\r\n"
seed drops 0 "GET /api/v1/drops?app=demo&host=h1&tag=team:pay&tag=region:eu:west&from=0 HTTP/1.1\r\n$H\r\n$R\r\n\r\n"
seed tag_filters 0 "GET /api/v1/events?tag=team:pay&tag=&tag=nocolon HTTP/1.1\r\n$H\r\n$R\r\n\r\nGET /api/v1/top-stacks?kind=hang&tag=a:1&tag=b:2&tag=c:3&tag=d:4&tag=e:5 HTTP/1.1\r\n$H\r\n$R\r\n\r\n"
seed dashboard 0 "GET / HTTP/1.1\r\n$H\r\n\r\nGET /dashboard/app.js HTTP/1.1\r\n$H\r\n\r\n"
seed wrong_scope 0 "POST /v1/symbols/00ff HTTP/1.1\r\n$H\r\n$R\r\nContent-Type: application/octet-stream\r\nContent-Length: 4\r\n\r\n\x7fELF"
seed symbols 0 "POST /v1/symbols/0a1b2c3d HTTP/1.1\r\n$H\r\n$K\r\nContent-Type: application/octet-stream\r\nContent-Length: 8\r\n\r\n\x7fELF\x02\x01\x01\x00"
seed symbols_chunked 0 "POST /v1/symbols/0a1b HTTP/1.1\r\n$H\r\n$K\r\nTransfer-Encoding: chunked\r\nContent-Type: application/octet-stream\r\n\r\n4\r\n\x7fELF\r\n0\r\n\r\n"
seed nul_target 0 "GET /v1/symbols/ab%00cd HTTP/1.1\r\n$H\r\n$K\r\n\r\n"
seed bad_escape 0 "GET /api/v1/flame?kind=%zz HTTP/1.1\r\n$H\r\n$K\r\n\r\n"
seed many_args 0 "GET /api/v1/events?$(printf 'a=1&%.0s' $(seq 40))a=1 HTTP/1.1\r\n$H\r\n$K\r\n\r\n"
seed basic_auth 0 "GET /api/v1/events HTTP/1.1\r\n$H\r\nAuthorization: Basic Zm9vOmJhcg==\r\n\r\n"
seed head_options 0 "HEAD /healthz HTTP/1.1\r\n$H\r\n\r\nOPTIONS /v1/batches HTTP/1.1\r\n$H\r\n\r\n"
seed http10 0 "GET /healthz HTTP/1.0\r\n\r\n"
seed open_foreign_host 1 "GET /api/v1/events HTTP/1.1\r\nHost: evil.example\r\n\r\n"
seed open_origin 1 "GET /metrics HTTP/1.1\r\n$H\r\nOrigin: http://evil.example\r\nSec-Fetch-Site: cross-site\r\n\r\n"
seed open_csrf 1 "POST /v1/symbols/0a1b HTTP/1.1\r\n$H\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\n\x7fELF"
seed open_localhost 1 "GET /api/v1/top-stacks?kind=cpu HTTP/1.1\r\nHost: localhost:4318\r\nOrigin: http://localhost:4318\r\n\r\n"
# Batches: the SDK-made hang batch, its id from the payload (make_seeds).
batch() { # batch NAME SERVER KEYLINE
  local body=$here/corpus/ingest/hang.zst
  { printf "\\x0$2"
    printf '%b' "POST /v1/batches HTTP/1.1\r\n$H\r\n$3Content-Type: application/x-protobuf\r\n"
    printf '%b' "Content-Encoding: zstd\r\nX-Perf-Batch-Id: 000102030405060708090a0b0c0d0e0f\r\n"
    printf '%b' "Content-Length: $(stat -c %s "$body")\r\n\r\n"
    cat "$body"
    printf '%b' "GET /api/v1/top-stacks?kind=hang HTTP/1.1\r\n$H\r\n$R\r\n\r\n"
  } >"$dir/$1"
}
batch batch_keys 0 "$K\r\n"
batch batch_open 1 ""
