#!/usr/bin/env bash
# tools/check_layers.sh can fail: on a planted upward include, on a folder no rule names, and on
# an allow-list with a cycle. Each case runs on a scratch tree; the real tree must pass.
set -uo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() {  # expect WANT_STATUS PATTERN ARGS...
  local want=$1 pattern=$2
  shift 2
  out=$(tools/check_layers.sh "$@" 2>&1)
  local got=$?
  if [ "$got" -ne "$want" ] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL: check_layers.sh $* exited $got (want $want), output:"
    echo "$out"
    fail=1
  else
    echo "ok: $pattern"
  fi
}

expect 0 "check_layers: ok"

# A kernel that includes the engine.
mkdir -p "$tmp/up/kernels/cpu" "$tmp/up/worker/engine"
echo '#include "worker/engine/engine.h"' > "$tmp/up/kernels/cpu/ops.cc"
echo '// engine' > "$tmp/up/worker/engine/engine.h"
expect 1 "kernels/cpu may not include worker/engine" --root "$tmp/up"

# The block manager reaching into a backend.
mkdir -p "$tmp/kv/worker/kv" "$tmp/kv/worker/backend/cpu"
echo '#include "worker/backend/cpu/kv_cache.h"' > "$tmp/kv/worker/kv/block_manager.cc"
echo '// pool' > "$tmp/kv/worker/backend/cpu/kv_cache.h"
expect 1 "worker/kv may not include worker/backend/cpu" --root "$tmp/kv"

# A production file including tools/.
mkdir -p "$tmp/tools/router" "$tmp/tools/tools/cli"
echo '#include "tools/cli/flags.h"' > "$tmp/tools/router/router_main.cc"
echo '// flags' > "$tmp/tools/tools/cli/flags.h"
expect 1 "router may not include tools" --root "$tmp/tools"

# An allow-list with a cycle between two folders.
printf 'common:\nworker/a: worker/b common\nworker/b: worker/a common\n' > "$tmp/cycle.txt"
mkdir -p "$tmp/cyc/worker/a"
echo '// nothing' > "$tmp/cyc/worker/a/x.h"
expect 1 "allowed unit graph has a cycle" --root "$tmp/cyc" --rules "$tmp/cycle.txt"
exit "$fail"
