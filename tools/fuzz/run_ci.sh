#!/usr/bin/env bash
# Builds every libFuzzer target of tools/fuzz/ with clang in its own build directory and runs each
# for a short while on a copy of its seeds with its dictionary. Exits non-zero when a target
# crashes (ASan, UBSan, a broken invariant, a leak, a timeout or out-of-memory) or fails to build;
# the crashing input is kept under $BUILD_DIR/fuzz-artifacts/. Without clang or libFuzzer it says
# so and exits 0.
#
# Environment: FUZZ_SECONDS per target (30), FUZZ_BUILD_DIR (build-fuzz, git-ignored),
# FUZZ_JOBS for ninja and for the targets run at once (all cores), FUZZ_TARGETS
# (space-separated subset; default all).
# Usage: tools/fuzz/run_ci.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds="${FUZZ_SECONDS:-30}"
build_dir="${FUZZ_BUILD_DIR:-build-fuzz}"
jobs="${FUZZ_JOBS:-$(nproc)}"

if ! command -v clang++ >/dev/null 2>&1 || ! command -v clang >/dev/null 2>&1; then
  echo "fuzz: skipped (no clang)"
  exit 0
fi
probe_dir="$(mktemp -d)"
trap 'rm -rf "$probe_dir"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' \
  >"$probe_dir/probe.cc"
if ! clang++ -fsanitize=fuzzer "$probe_dir/probe.cc" -o "$probe_dir/probe" >/dev/null 2>&1; then
  echo "fuzz: skipped (no libFuzzer)"
  exit 0
fi

# Target -> dictionary (tools/fuzz/NAME.dict).
declare -A dict=(
  [gguf_file_fuzz]=gguf [safetensors_file_fuzz]=safetensors [hf_config_fuzz]=hf_config
  [hf_tokenizer_json_fuzz]=hf_tokenizer_json [tokenizer_fuzz]=tokenizer
  [chat_template_fuzz]=chat_template [request_bytes_fuzz]=request_bytes
  [openai_request_fuzz]=openai_request [tool_reply_fuzz]=tool_reply
  [structured_grammar_fuzz]=structured_grammar [generation_config_fuzz]=generation_config
)
all_targets=""
for src in tools/fuzz/*_fuzz.cc; do all_targets+="$(basename "$src" .cc) "; done
targets="${FUZZ_TARGETS:-$all_targets}"

cmake -B "$build_dir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DPAGELLM_FUZZ=ON -DPAGELLM_CUDA=OFF >"$probe_dir/configure.log" 2>&1 ||
  { cat "$probe_dir/configure.log"; echo "fuzz: FAILED (configure)"; exit 1; }
# shellcheck disable=SC2086  # word splitting of the target list is intended
ninja -C "$build_dir" -j "$jobs" $targets >"$probe_dir/build.log" 2>&1 ||
  { tail -n 40 "$probe_dir/build.log"; echo "fuzz: FAILED (build)"; exit 1; }

artifacts="$build_dir/fuzz-artifacts"
mkdir -p "$artifacts"
# Runs one target; its verdict goes to $probe_dir/result-TARGET (first word ok or FAILED).
run_one() {
  local target=$1
  local corpus="$probe_dir/corpus-$target"
  mkdir -p "$corpus"
  if [[ -d "tools/fuzz/seeds/$target" ]]; then
    cp tools/fuzz/seeds/"$target"/* "$corpus"/
  elif [[ "$target" == gguf_file_fuzz && -x .venv/bin/python ]]; then
    .venv/bin/python tools/fuzz/make_gguf_seeds.py "$corpus" >/dev/null 2>&1 || true
  fi
  local dict_args=()
  if [[ -n "${dict[$target]:-}" ]]; then dict_args=(-dict="tools/fuzz/${dict[$target]}.dict"); fi
  local log="$artifacts/$target.log"
  local rc=0
  "$build_dir/bin/$target" "${dict_args[@]}" -max_total_time="$seconds" -timeout=25 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$target-" "$corpus" >"$log" 2>&1 || rc=$?
  local execs rate
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
  if [[ $rc -eq 0 ]]; then
    echo "ok, ${execs:-?} executions in ${seconds}s (${rate:-?}/s)" >"$probe_dir/result-$target"
  else
    {
      echo "FAILED (exit $rc) after ${execs:-?} executions; log $log"
      grep -E '^==[0-9]+==ERROR|SUMMARY|Test unit written to|runtime error' "$log" | head -n 5 || true
    } >"$probe_dir/result-$target"
  fi
}

# One target per core at a time (each is single-threaded).
running=0
for target in $targets; do
  run_one "$target" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
failed=0
for target in $targets; do
  result="$(cat "$probe_dir/result-$target" 2>/dev/null || echo "FAILED (no result)")"
  echo "fuzz: $target: $result"
  [[ "$result" == ok* ]] || failed=1
done
exit "$failed"
