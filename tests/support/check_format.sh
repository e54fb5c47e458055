#!/usr/bin/env bash
# check_format.sh [SOURCE_DIR [CLANG_FORMAT]] - every C source and header of
# the project is laid out as the root .clang-format says (ctest `format`).
# The files are git's (`git ls-files`) in a git checkout, else found under
# SOURCE_DIR, leaving out build directories (those with a CMakeCache.txt),
# node_modules, tests/fuzz/corpus and generated code (*.pb-c.[ch]). Names
# each file that clang-format would change, with the start of its diff, and
# exits 1; a missing clang-format fails too. The layout is clang-format 14's
# (Debian 12); another version may disagree on a few constructs.
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd -P)
clang_format=${2:-clang-format}
cd "$root"

if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "check_format: $clang_format not found: install Debian's clang-format (scripts/deps.sh)"
  exit 1
fi
if [ ! -f .clang-format ]; then
  echo "check_format: no .clang-format in $root"
  exit 1
fi

# Paths relative to $root, one a line.
list_sources() {
  if [ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$root" ]; then
    git ls-files -- '*.c' '*.h'
  else
    local prune=(-name .git -o -name node_modules -o -path ./tests/fuzz/corpus)
    local dir
    while IFS= read -r dir; do
      prune+=(-o -path "$dir")
    done < <(find . -name node_modules -prune -o -name CMakeCache.txt -printf '%h\n')
    find . \( "${prune[@]}" \) -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print |
      sed 's|^\./||' | sort
  fi
}

files=()
while IFS= read -r file; do
  case "$file" in
  tests/fuzz/corpus/* | *.pb-c.c | *.pb-c.h) continue ;;
  esac
  [ -f "$file" ] && files+=("$file")
done < <(list_sources)
if [ ${#files[@]} -eq 0 ]; then
  echo "check_format: no C file found under $root"
  exit 1
fi

# One run over all of them; each difference is reported as
# "<file>:<line>:<col>: error: code should be clang-formatted".
version=$("$clang_format" --version)
status=0
report=$("$clang_format" --style=file --dry-run --Werror "${files[@]}" 2>&1) || status=$?
mapfile -t bad < <(printf '%s\n' "$report" |
  sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ "$status" -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
  echo "check_format: $clang_format failed ($status):"
  printf '%s\n' "$report" | head -20
  exit 1
fi
if [ ${#bad[@]} -gt 0 ]; then
  for file in "${bad[@]}"; do
    echo "$file: not clang-formatted (clang-format -i $file)"
    "$clang_format" --style=file "$file" | diff -u "$file" - | sed -n '3,12p' || true
  done
  echo "${#bad[@]} of ${#files[@]} C files differ from .clang-format ($version)"
  exit 1
fi
echo "${#files[@]} C files match .clang-format ($version)"
