#!/usr/bin/env bash
# check_includes.sh [SOURCE_DIR] - the dependency rule between folders of
# sdk/README.md and collector/README.md, checked on every `#include "..."` of sdk/, uploader/,
# collector/, tools/ and include/ (ctest `include_rule`).
#
# An include resolves like the compiler's search here: relative to the
# including file's folder first ("clock.h", "../base/clock.h"), then to the
# repository root ("sdk/base/clock.h"), then to include/ ("perf_sdk.h").
# A subfolder counts as the folder of the rule above it (sdk/sampler/arch/
# x86_64 is sdk/sampler), except under sdk/ and collector/ themselves.
# The code protoc-c generates at build time is named by its path:
# "perf/v1/perf.pb-c.h" (the perf.v1 schema, with sdk/wire) and
# "pprof/profile.pb-c.h" (the collector's pprof export).
#
# Prints each include the rule forbids as
#   <file>: includes <path> (folder <A> may not include folder <B>)
# and each cycle in the folder graph the includes make (which the rule
# itself excludes; checked anyway), then exits 1. Files come from
# `git ls-files` in a git checkout, else from find.
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd -P)
cd "$root"

# What each folder may include besides its own files: the tables of
# sdk/README.md and collector/README.md. "include" is the public header, "proto/perf" the generated
# perf.v1 schema (wherever sdk/wire is allowed), "proto/pprof" the
# generated pprof schema.
RULE='
include       -
sdk/base      include
sdk/lazy      include sdk/base
sdk/symbols   include sdk/base
sdk/sampler   include sdk/base sdk/symbols
sdk/wire      include sdk/base proto/perf
uploader      include sdk/base sdk/wire proto/perf
sdk/pipeline  include sdk/base sdk/symbols sdk/sampler sdk/wire proto/perf uploader
sdk/monitors  include sdk/base sdk/sampler sdk/pipeline
sdk/front     include sdk/base sdk/pipeline
sdk/preload   include
sdk           include sdk/base sdk/symbols sdk/sampler sdk/wire proto/perf uploader sdk/pipeline sdk/monitors
collector/base         include
collector/model        include sdk/base sdk/symbols
collector/store        include sdk/base collector/base collector/model
collector/store/sqlite include sdk/base collector/base collector/model collector/store
collector/store/pg     include sdk/base collector/base collector/model collector/store
collector/symbols      include sdk/base sdk/symbols collector/base collector/model collector/store
collector/ingest       include sdk/base sdk/wire proto/perf collector/base collector/model collector/store collector/symbols
collector/api          include sdk/base collector/base collector/model collector/store proto/pprof
collector/alerts       include sdk/base collector/base collector/model collector/store collector/api
collector/http         include sdk/base collector/base collector/model collector/store collector/symbols collector/ingest collector/api collector/alerts
collector              include sdk/base collector/base collector/model collector/store collector/symbols collector/ingest collector/api collector/alerts collector/http
tools         include sdk/base sdk/wire sdk/symbols proto/perf
'
CHECKED_DIRS=(sdk uploader collector tools include)

if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$root" ]; then
  all_files=$(git ls-files)
else
  all_files=$(find . \( -name .git -o -name node_modules \) -prune -o -type f -print | sed 's|^\./||')
fi
sources=$(printf '%s\n' "$all_files" | grep -E "^($(
  IFS='|'
  echo "${CHECKED_DIRS[*]}"
))/.*\.[ch]\$" | sort)
if [ -z "$sources" ]; then
  echo "check_includes: no C file under ${CHECKED_DIRS[*]} in $root"
  exit 1
fi

# awk gets the rule, every file of the project on its standard input (what
# exists), and the sources to read.
mapfile -t source_list <<<"$sources"
awk -v rule="$RULE" '
function dirname(p) { return p ~ /\// ? substr(p, 1, match(p, /\/[^\/]*$/) - 1) : "." }
# a/b/../c/./d -> a/c/d
function normalize(p,   n, parts, out, k, i) {
  n = split(p, parts, "/")
  k = 0
  for (i = 1; i <= n; i++) {
    if (parts[i] == "." || parts[i] == "") continue
    if (parts[i] == ".." && k > 0 && out[k] != "..") { k--; continue }
    out[++k] = parts[i]
  }
  p = ""
  for (i = 1; i <= k; i++) p = p (i > 1 ? "/" : "") out[i]
  return p
}
# The included file (root-relative, or a generated path); "" when unknown.
function resolve(from_dir, inc,   p) {
  if (inc == "perf/v1/perf.pb-c.h" || inc == "pprof/profile.pb-c.h") return inc
  p = normalize(from_dir "/" inc)
  if (p in exists) return p
  p = normalize(inc)
  if (p in exists) return p
  p = "include/" inc
  if (p in exists) return p
  return ""
}
# The folder of the rule a directory belongs to: itself, or the nearest one
# above it (sdk/sampler/arch/x86_64 is sdk/sampler), but not sdk/ or
# collector/, each its own files only: a new folder under them needs its row.
function stage_of(dir,   d) {
  if (dir in ruled) return dir
  for (d = dir; d ~ /\//;) {
    d = dirname(d)
    if ((d in ruled) && d != "sdk" && d != "collector") return d
  }
  return dir
}
function folder_of(path) {
  if (path == "perf/v1/perf.pb-c.h") return "proto/perf"
  if (path == "pprof/profile.pb-c.h") return "proto/pprof"
  return stage_of(dirname(path))
}
function add_edge(a, b) {
  if ((a, b) in edge) return
  edge[a, b] = 1
  adj[a, ++nadj[a]] = b
  if (!(a in node)) { node[a] = 1; nodes[++nnodes] = a }
}
function dfs(u,   i, v) {
  color[u] = 1
  stack[++sp] = u
  for (i = 1; i <= nadj[u]; i++) {
    v = adj[u, i]
    if (color[v] == 1) report_cycle(v)
    else if (color[v] == 0) dfs(v)
  }
  sp--
  color[u] = 2
}
# The cycle on the stack from v to its top, back to v; each once, named
# from its smallest folder.
function report_cycle(v,   k, i, n, ring, start, text) {
  for (k = sp; k > 0 && stack[k] != v; k--) {}
  n = 0
  for (i = k; i <= sp; i++) ring[++n] = stack[i]
  start = 1
  for (i = 2; i <= n; i++) if (ring[i] < ring[start]) start = i
  text = ""
  for (i = 0; i < n; i++) text = text ring[(start - 1 + i) % n + 1] " -> "
  text = text ring[start]
  if (text in cycle_seen) return
  cycle_seen[text] = 1
  print "cycle between folders: " text
  bad++
}
BEGIN {
  n = split(rule, lines, "\n")
  for (i = 1; i <= n; i++) {
    if (split(lines[i], w, " ") == 0) continue
    ruled[w[1]] = 1
    for (j = 2; j in w; j++) if (w[j] != "-") may[w[1], w[j]] = 1
    delete w
  }
  while ((getline line < "/dev/stdin") > 0) exists[line] = 1
}
FNR == 1 { files++ }
/^[ \t]*#[ \t]*include[ \t]*"/ {
  inc = $0
  sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", inc)
  sub(/".*/, "", inc)
  includes++
  target = resolve(dirname(FILENAME), inc)
  if (target == "") {
    printf "%s: includes %s (no file of the project)\n", FILENAME, inc
    bad++
    next
  }
  from = stage_of(dirname(FILENAME))
  to = folder_of(target)
  if (to == from) next
  add_edge(from, to)
  if (!(from in ruled)) {
    printf "%s: includes %s (folder %s is not in the rule, sdk/README.md)\n", FILENAME, target, from
    bad++
  } else if (!((from, to) in may)) {
    printf "%s: includes %s (folder %s may not include folder %s)\n", FILENAME, target, from, to
    bad++
  }
}
END {
  for (i = 1; i <= nnodes; i++) if (color[nodes[i]] == 0) dfs(nodes[i])
  if (bad) exit 1
  printf "%d includes in %d files follow the rules of sdk/README.md and collector/README.md\n", includes, files
}
' "${source_list[@]}" < <(printf '%s\n' "$all_files")
