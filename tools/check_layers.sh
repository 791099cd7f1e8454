#!/usr/bin/env bash
# Checks the include graph between folders against the allow-list in tools/layers.txt:
#   - every #include "folder/..." of every C, C++ and CUDA file under the root (tests too) goes to
#     its own unit or to one the list allows for that unit;
#   - neither the allowed nor the actual unit graph has a cycle.
# A unit is a folder named in the list; a file (or an included path) belongs to the longest unit
# that contains it. Includes that name no unit (system, Abseil, gRPC, ...) are not checked, and
# "pagellm/v1/..." is the generated code of proto/.
#
#   tools/check_layers.sh [--root DIR] [--rules FILE]
# Exit status 0 when the tree keeps the layering; 1 with one line per violation otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
root=.
rules=tools/layers.txt
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root=$2; shift 2 ;;
    --rules) rules=$2; shift 2 ;;
    *) echo "usage: $0 [--root DIR] [--rules FILE]" >&2; exit 2 ;;
  esac
done

edges=$(mktemp)
pairs=$(mktemp)
trap 'rm -f "$edges" "$pairs"' EXIT

# One line per include: "file<TAB>included path".
(cd "$root" && find common kernels worker router tools tests proto \
    -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null |
  sort | xargs grep -HE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' |
  sed -E 's/^([^:]+):[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1\t\2/') > "$edges" || true

status=0
awk -v rules="$rules" -v pairs="$pairs" -F'\t' '
  function unit_of(path,   dir, best, u) {
    dir = path
    sub(/\/[^\/]*$/, "", dir)  # the folder of the file
    if (dir ~ /^pagellm(\/|$)/) return "proto"
    best = ""
    for (u in units) {
      if ((dir == u || index(dir, u "/") == 1) && length(u) > length(best)) best = u
    }
    return best
  }
  # True when `to` is in the space-separated `list` (an entry "x/*" is x and every unit below).
  function allowed(list, to,   n, parts, i, p) {
    n = split(list, parts, " ")
    for (i = 1; i <= n; ++i) {
      p = parts[i]
      if (p == to) return 1
      if (p ~ /\/\*$/) {
        sub(/\/\*$/, "", p)
        if (to == p || index(to, p "/") == 1) return 1
      }
    }
    return 0
  }
  BEGIN {
    while ((getline line < rules) > 0) {
      sub(/#.*/, "", line)
      if (line !~ /:/) continue
      key = line; sub(/:.*/, "", key); gsub(/^[ \t]+|[ \t]+$/, "", key)
      deps = line; sub(/^[^:]*:/, "", deps); gsub(/^[ \t]+|[ \t]+$/, "", deps)
      if (key ~ / tests$/) {
        sub(/ tests$/, "", key)
        test_deps[key] = deps
      } else {
        deps_of[key] = deps
        n = split(deps, parts, " ")
        for (i = 1; i <= n; ++i) print "allowed", key, parts[i] > pairs
      }
      units[key] = 1
    }
    bad = 0
  }
  {
    file = $1; inc = $2
    first = inc; sub(/\/.*/, "", first)
    if (first !~ /^(common|kernels|worker|router|tools|tests|pagellm)$/) next
    from = unit_of(file); to = unit_of(inc)
    if (from == "" || to == "") {
      printf "%s: includes \"%s\": its folder is no unit of %s\n", file, inc, rules
      bad = 1; next
    }
    if (from == to) next
    print "actual", from, to > pairs
    is_test = file ~ /_(test|bench)\.cc$/ || file ~ /\/testing\//
    if (allowed(deps_of[from], to) || (is_test && allowed(test_deps[from], to))) next
    printf "%s: includes \"%s\": %s may not include %s (see %s)\n", file, inc, from, to, rules
    bad = 1
  }
  END { exit bad }
' "$edges" || status=1

# Cycles: the allowed graph and the actual one must both be acyclic (tsort names the units).
for what in allowed actual; do
  graph=$(awk -v w="$what" '$1 == w && $3 !~ /\*/ { print $2, $3 }' "$pairs" | sort -u)
  [ -z "$graph" ] && continue
  if ! out=$(printf '%s\n' "$graph" | tsort 2>&1 >/dev/null); then
    echo "the $what unit graph has a cycle through: $(echo "$out" | sed -n 's/^tsort: //p' |
      grep -v ': input contains a loop:' | tr '\n' ' ')"
    status=1
  fi
done

if [ "$status" -eq 0 ]; then
  echo "check_layers: ok ($(wc -l < "$edges") includes, $(awk '$1 == "actual"' "$pairs" | sort -u | wc -l) unit edges)"
fi
exit "$status"
