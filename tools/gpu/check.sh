#!/usr/bin/env bash
# pagellm's one-shot GPU check: the CUDA tests and an end-to-end comparison with transformers.
#
#   tools/gpu/check.sh build     here: builds build/ (its CUDA targets include sm_90a) and packs
#                                .gpu-bundle (bundle.sh)
#   tools/gpu/check.sh run       on the lent GPU machine, from the repo root, .gpu-bundle carried:
#                                  run(command="tools/gpu/check.sh run", carry=[".gpu-bundle"])
#   tools/gpu/check.sh bench     on the lent GPU machine, a second call: the benchmarks
#   tools/gpu/check.sh dry-run   here, without a GPU: the same stages that need none
#   tools/gpu/check.sh emu       here, without a GPU: run's and bench's stages on the CUDA
#                                emulator (build-emu, cmake -DPAGELLM_CUDA_EMU=ON), small
#
# run: prints the GPU and driver; unpacks the bundle and finds the CUDA libraries (toolkit or
# torch's wheels) for the bundle's LD_LIBRARY_PATH, and nothing else's; runs every
# bin/*cuda*_test; builds the references with hf_reference.py on the GPU (with transformers'
# fp32 run as the noise floor), greedy and beam search; runs pagellm-gpu-ref on each and scores
# it with compare.py (greedy prefix, teacher-forced top-1, beams).
# Each stage has its own timeout inside a deadline (run 7 min, bench 5.5 min). $OUT gets summary.txt (the table
# printed last: stage | result | figure) and logs.tar.gz (every log, gtest XML and JSON).
# dry-run: unpacks and checks the bundle, runs the CUDA tests (all must pass or skip), runs
# compare_test.py, and when /tmp/gpuref-venv exists the whole comparison on the CPU with tiny
# models (hf_reference.py --tiny, pagellm-gpu-ref --device cpu).
# emu: a rehearsal of the GPU stages with build-emu's programs (no bundle; needs
# /tmp/gpuref-venv): the tiny references, pagellm-gpu-ref --device cuda against them, the engine
# tests, the serving benchmark and pagellm-gpu-bench, on the tiny Llama with small sizes. About
# 12 min on 2 cores: the emulator runs each CUDA thread on the CPU. Figures are not timings.
# Exits non-zero when a stage fails.
set -Eeuo pipefail
cd "$(dirname "$0")/../.."
stopped=""
trap 'stopped="line $LINENO: $BASH_COMMAND"' ERR

bundle=.gpu-bundle
venv=/tmp/gpuref-venv
cuda_re='^(libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia[-a-z_]*)\.so'
deadline=0  # set by the mode: run 420 s, bench 330 s, emu 1800 s (CHECK_DEADLINE_S overrides)
slow=1      # factor on each stage's own timeout: 8 on the emulator
tokenizer="$bundle/ref/tokenizer.json"
work=""    # scratch: the unpacked bundle, logs, references (run and dry-run)
out=""     # $OUT on the device, else /tmp/pagellm-gpu-check
ld_path="" # LD_LIBRARY_PATH for the bundle's programs only
failed=0

# --- bookkeeping -------------------------------------------------------------------------------

row() {  # stage result figure
  printf '%-36s %-8s %s\n' "$1" "$2" "$3" | tee -a "$work/table"
  [[ "$2" == PASS || "$2" == ok || "$2" == SKIP ]] || failed=1
}

# Seconds a step may take: $1, capped by the time until $2 (default: the deadline, less 15 s for
# the report); at least 1.
budget() {
  local want=$(($1 * slow)) left=$((${2:-$((deadline - 15))} - SECONDS))
  ((left > deadline - 15 - SECONDS)) && left=$((deadline - 15 - SECONDS))
  ((left < want)) && echo $((left > 1 ? left : 1)) || echo "$want"
}

# Runs "$@" under a timeout of $1 seconds, output to log $2; echoes the exit status.
timed() {
  local secs=$1 log=$2
  shift 2
  local rc=0
  timeout -k 5 "$secs" "$@" >"$work/logs/$log" 2>&1 || rc=$?
  echo "$rc"
}

setup() {
  work="$(mktemp -d)"
  out="${OUT:-/tmp/pagellm-gpu-check}"
  rm -rf "${out:?}"/summary.txt "$out"/logs.tar.gz
  mkdir -p "$work/logs" "$out"
}

report() {
  local parts=(logs)
  [[ -z "$stopped" ]] || row check.sh FAIL "stopped at $stopped"
  [[ -d "$work/xml" ]] && parts+=(xml)
  [[ -d "$work/ref" ]] && parts+=(ref)
  rm -f "$work"/ref/*/model.safetensors "$work"/ref/*/tokenizer.json  # rebuilt from the seed
  {
    echo
    printf '%-36s %-8s %s\n' stage result figure
    cat "$work/table" 2>/dev/null || true
  } | tee "$out/summary.txt"
  tar -C "$work" -czf "$out/logs.tar.gz" "${parts[@]}"
  echo "check: $out/summary.txt, $out/logs.tar.gz"
  rm -rf "$work"
}

# --- stages ------------------------------------------------------------------------------------

build() {
  cmake -B build -G Ninja -DPAGELLM_CUDA=ON
  grep -q 'PAGELLM_CUDA_ARCHS:STRING=.*90a' build/CMakeCache.txt ||
    { echo "check: build/ must target 90a (PAGELLM_CUDA_ARCHS)" >&2; exit 1; }
  ninja -C build
  tools/gpu/bundle.sh build "$bundle"
}

gpu_info() {
  local smi
  if smi="$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2>&1)"; then
    timeout 20 nvidia-smi -L || true
    echo "driver: $smi"
    row gpu ok "$smi"
  else
    echo "nvidia-smi: $smi"
    row gpu FAIL "nvidia-smi failed"
  fi
}

unpack() {
  if [[ ! -f "$bundle/bundle.tar.xz" ]]; then
    row bundle FAIL "no $bundle/bundle.tar.xz (tools/gpu/check.sh build)"
    return 1
  fi
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' \
    "$bundle/bundle.tar.xz" "$work/bundle"
}

# The directory holding $1 among the usual CUDA places: the toolkit, the driver, torch's wheels.
find_lib() {
  local roots=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib
    /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu) sp
  while read -r sp; do
    roots+=("$sp/nvidia")
  done < <(python3 -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null)
  { find -H "${roots[@]}" -maxdepth 3 -name "$1" -not -path '*/stubs/*' 2>/dev/null || true; } |
    head -1 | xargs -r dirname
}

# LD_LIBRARY_PATH for the bundle's programs: its lib/ and where the CUDA libraries are.
# need_cuda=1 (run): each must be found; 0 (dry-run): whatever this machine has.
cuda_libs() {
  local need_cuda=$1 lib dir dirs=""
  for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
    dir="$(find_lib "$lib")"
    if [[ -n "$dir" ]]; then
      echo "$lib: $dir"
      [[ ":$dirs:" == *":$dir:"* ]] || dirs="$dirs:$dir"
    elif ((need_cuda)); then
      row cuda-libraries FAIL "$lib not found"
      return 1
    fi
  done
  # NCCL (dlopen'ed by worker_nccl_communicator_cuda_test): the toolkit's or torch's, if any.
  dir="$(find_lib libnccl.so.2)"
  if [[ -n "$dir" ]]; then
    echo "libnccl.so.2: $dir"
    [[ ":$dirs:" == *":$dir:"* ]] || dirs="$dirs:$dir"
  fi
  if ((need_cuda)) && ! ldconfig -p | grep -q 'libcuda\.so\.1 '; then
    dir="$(find_lib libcuda.so.1)"
    [[ -n "$dir" ]] || { row cuda-libraries FAIL "libcuda.so.1 not found"; return 1; }
    dirs="$dirs:$dir"
  fi
  ld_path="$work/bundle/lib$dirs"
  row cuda-libraries ok "${dirs#:}"
}

ldd_check() {
  local need_cuda=$1 missing
  missing="$(env LD_LIBRARY_PATH="$ld_path" ldd "$work"/bundle/bin/* |
    awk '/not found/ { print $1 }' | sort -u)"
  ((need_cuda)) || missing="$(echo "$missing" | grep -Ev "$cuda_re" || true)"
  if [[ -n "$missing" ]]; then
    row bundle-ldd FAIL "not found: $(echo "$missing" | tr '\n' ' ')"
    return 1
  fi
  row bundle-ldd ok "$(find "$work/bundle/bin" -type f | wc -l) programs resolve"
}

# Every bin/*cuda*_test, 120 s for all; $1=1 (run): a binary whose tests all skip fails.
cuda_tests() {
  local need_gpu=$1 until=$((SECONDS + 120)) t name rc log passed failed_n skipped start
  mkdir -p "$work/xml"
  for t in "$work"/bundle/bin/*cuda*_test; do
    [[ -x "$t" ]] || continue
    name="$(basename "$t")"
    if ((SECONDS >= until)); then
      row "$name" FAIL "not run: the tests' 120 s were spent"
      continue
    fi
    start=$SECONDS
    rc="$(timed "$(budget 90 "$until")" "$name.log" env LD_LIBRARY_PATH="$ld_path" "$t" \
      --gtest_output="xml:$work/xml/$name.xml")"
    log="$work/logs/$name.log"
    passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)"
    failed_n="$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)"
    skipped="$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)"
    local figure="${passed:-0} passed, ${skipped:-0} skipped, ${failed_n:-0} failed, $((SECONDS - start)) s"
    if [[ "$rc" == 124 || "$rc" == 137 ]]; then
      row "$name" FAIL "timed out; $figure"
    elif [[ "$rc" != 0 ]]; then
      row "$name" FAIL "exit $rc; $figure"
    elif [[ "${passed:-0}" == 0 ]]; then
      row "$name" "$( ((need_gpu)) && echo FAIL || echo SKIP)" "$figure"
    else
      row "$name" PASS "$figure"
    fi
  done
}

compare_tests() {
  local rc
  rc="$(timed 60 compare_test.log python3 -m unittest discover -s tools/gpu -p compare_test.py)"
  row compare_test "$([[ "$rc" == 0 ]] && echo PASS || echo FAIL)" "$(tail -1 "$work/logs/compare_test.log")"
}

# hf_reference.py with PYTHON and extra flags into $work/ref; the models' names on stdout.
hf_reference() {
  local python=$1 secs=$2 start=$SECONDS rc
  shift 2
  rc="$(timed "$(budget "$secs")" hf_reference.log env HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 \
    "$python" tools/gpu/hf_reference.py --out "$work/ref" --tokenizer "$tokenizer" \
    "$@")"
  if [[ "$rc" != 0 ]]; then
    row hf-reference FAIL "exit $rc after $((SECONDS - start)) s (logs/hf_reference.log)"
    return 1
  fi
  row hf-reference ok "$((SECONDS - start)) s; $(grep -c 'prompts (' "$work/logs/hf_reference.log") models"
}

# The tiny references on this machine's CPU (dry-run, emu): fp32, with bf16 as the noise floor.
tiny_reference() {
  hf_reference "$venv/bin/python" 300 --device cpu --dtype float32 --check-dtype bfloat16 \
    --tiny --prompts 6 --max-tokens 16 --max-prompt-tokens 600
}

# compare.py REF OURS as a row named $1.
score() {
  local line rc=0
  line="$(python3 tools/gpu/compare.py "$2" "$3" 2>&1)" || rc=$?
  row "$1" "$([[ "$rc" == 0 ]] && echo PASS || echo FAIL)" "$line"
}

# pagellm-gpu-ref on each reference model, on $1 (cuda|cpu), then compare.py.
ours() {
  local device=$1 dir name rc start
  for dir in "$work"/ref/*/; do
    name="$(basename "$dir")"
    for f in "$dir"/hf_*.json; do  # transformers in another dtype: the noise floor
      [[ -f "$f" ]] && score "transformers-$(basename "$f" .json | cut -d_ -f2)/$name" \
        "$dir/ref.json" "$f"
    done
    if [[ ! -x "$work/bundle/bin/pagellm-gpu-ref" ]]; then
      row "gpu-ref/$name" FAIL "pagellm-gpu-ref is not in the bundle"
      continue
    fi
    start=$SECONDS
    rc="$(timed "$(budget 90)" "gpu_ref_$name.log" env LD_LIBRARY_PATH="$ld_path" \
      "$work/bundle/bin/pagellm-gpu-ref" --model "$dir" --device "$device" \
      --input "$dir/ref.json" --output "$dir/ours.json")"
    if [[ "$rc" != 0 ]]; then
      row "gpu-ref/$name" FAIL "exit $rc after $((SECONDS - start)) s (logs/gpu_ref_$name.log)"
      continue
    fi
    row "gpu-ref/$name" ok "$((SECONDS - start)) s on $device"
    score "compare/$name" "$dir/ref.json" "$dir/ours.json"
    # (an if, not `[[ ]] &&`: on the CPU that list's status would end the script under set -e)
    if [[ "$device" == cuda ]]; then tensor_parallel_ref "$dir" "$name"; fi
  done
}

# With two GPUs or more: the same comparison with the model split over two of them
# (--tensor-parallel-size 2: NCCL, one process per GPU). One GPU: a SKIP row saying so.
tensor_parallel_ref() {
  local dir=$1 name=$2 gpus rc start
  gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
  if ((${gpus:-0} < 2)); then
    row "gpu-ref-tp2/$name" SKIP "${gpus:-0} GPU: tensor parallelism needs two"
    return 0
  fi
  start=$SECONDS
  rc="$(timed "$(budget 90)" "gpu_ref_tp2_$name.log" env LD_LIBRARY_PATH="$ld_path" \
    "$work/bundle/bin/pagellm-gpu-ref" --model "$dir" --device cuda --tensor-parallel-size 2 \
    --input "$dir/ref.json" --output "$dir/ours_tp2.json")"
  if [[ "$rc" != 0 ]]; then
    row "gpu-ref-tp2/$name" FAIL "exit $rc after $((SECONDS - start)) s (logs/gpu_ref_tp2_$name.log)"
    return 0
  fi
  score "compare-tp2/$name" "$dir/ref.json" "$dir/ours_tp2.json"
}

# The engine tests whose expectations hold for any model (greedy tokens equal with and without
# swap and recompute preemption, and with and without n-gram speculation; shared prompt blocks;
# prefix caching; chunked prefill; aborts free every block), on the GPU over the generated Llama
# checkpoint.
engine_tests() {
  local t name rc start model="$work/ref/llama3"
  [[ -d "$model" ]] || { row engine-tests FAIL "no $model"; return 0; }
  for t in "$work"/bundle/bin/{preemption,sharing,speculative}_test; do
    name="$(basename "$t")"
    start=$SECONDS
    rc="$(timed "$(budget 120)" "$name.log" env LD_LIBRARY_PATH="$ld_path" \
      PAGELLM_TEST_DEVICE=cuda PAGELLM_TEST_MODEL="$model" PAGELLM_REQUIRE_MODELS=1 "$t" \
      --gtest_output="xml:$work/xml/$name.xml")"
    row "$name (cuda)" "$([[ "$rc" == 0 ]] && echo PASS || echo FAIL)" \
      "$(grep -E '^\[  (PASSED|FAILED) ' "$work/logs/$name.log" | tr '\n' ' ') $((SECONDS - start)) s"
  done
}

# Each kernel test once more under compute-sanitizer's memcheck (out-of-bounds and misaligned
# accesses), where the tool exists.
sanitizer() {
  local t name rc
  command -v compute-sanitizer >/dev/null || { row compute-sanitizer SKIP "not installed"; return 0; }
  for t in "$work"/bundle/bin/kernels_cuda_*_test; do
    name="$(basename "$t")"
    rc="$(timed "$(budget 60)" "sanitizer_$name.log" env LD_LIBRARY_PATH="$ld_path" \
      compute-sanitizer --tool memcheck --error-exitcode 9 "$t" --gtest_brief=1)"
    row "memcheck/$name" "$([[ "$rc" == 0 ]] && echo PASS || echo FAIL)" \
      "$(grep -m1 'ERROR SUMMARY' "$work/logs/sanitizer_$name.log" || echo "exit $rc")"
  done
}

# The benchmarks (a second device call), most important first: dummy Llama-3-8B decode (batch
# 1, 64, 256 at 1024 tokens of context) and 2048-token prefill against their floors; the serving
# benchmark through the router; HF transformers on the same GPU and trace; paged attention alone
# against the copy bandwidth.
bench() {
  local rc
  gpu_bench --load-format dummy --dummy-model llama-3-8b --dummy-dtype bf16 --tokenizer "$tokenizer"
  serving_bench 1000 --device cuda --load-format dummy --dummy-model llama-3-8b --dummy-dtype bf16
  hf_baseline python3 --device cuda
  rc="$(timed "$(budget 45)" attention_bench.log env LD_LIBRARY_PATH="$ld_path" \
    "$work/bundle/bin/kernels_cuda_paged_attention_bench")"
  row attention-bench "$([[ "$rc" == 0 ]] && echo ok || echo FAIL)" \
    "$(tail -1 "$work/logs/attention_bench.log")"
}

# pagellm-gpu-bench --device cuda with the model (and size) flags "$@".
gpu_bench() {
  local rc
  rc="$(timed "$(budget 150)" gpu_bench.log env LD_LIBRARY_PATH="$ld_path" \
    "$work/bundle/bin/pagellm-gpu-bench" --device cuda "$@" --json "$work/logs/gpu_bench.json")"
  row gpu-bench "$([[ "$rc" == 0 ]] && echo ok || echo FAIL)" "$(tail -c 400 "$work/logs/gpu_bench.log")"
}

# Value of key $2 in the one-line-or-more JSON file $1 (plain python3).
json_get() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2" \
    2>/dev/null || echo "?"
}

# `pagellm bench --dataset sharegpt-like` through pagellm-router to one pagellm-worker --device
# cuda serving dummy Llama-3-8B bf16 (target: >= 8,000 output tok/s). Both bind to loopback.
# $1: prompts; the rest: the worker's model and device flags.
serving_bench() {
  local bin="$work/bundle/bin" until=$((SECONDS + $(budget 150))) worker router rc i
  local prompts=$1
  shift
  : >"$work/logs/serving_worker.log"
  env LD_LIBRARY_PATH="$ld_path" "$bin/pagellm-worker" "$@" --tokenizer "$tokenizer" \
    --host 127.0.0.1 --port 50161 --metrics-port 0 --max-num-seqs 256 \
    >"$work/logs/serving_worker.log" 2>&1 &
  worker=$!
  for ((i = 0; SECONDS < until - 60; i++)); do
    grep -q 'listening on' "$work/logs/serving_worker.log" && break
    kill -0 "$worker" 2>/dev/null || break
    sleep 1
  done
  if ! grep -q 'listening on' "$work/logs/serving_worker.log"; then
    row serving-bench FAIL "worker did not start (logs/serving_worker.log)"
    kill -9 "$worker" 2>/dev/null || true
    return 0
  fi
  env LD_LIBRARY_PATH="$ld_path" "$bin/pagellm-router" --host 127.0.0.1 --port 50151 \
    --metrics-port 0 --http-port 0 --workers 127.0.0.1:50161 >"$work/logs/serving_router.log" 2>&1 &
  router=$!
  sleep 2
  rc="$(timed $((until - SECONDS > 1 ? until - SECONDS : 1)) serving_bench.log \
    env LD_LIBRARY_PATH="$ld_path" "$bin/pagellm" bench --server 127.0.0.1:50151 \
    --dataset sharegpt-like --num-prompts "$prompts" --seed 0 --save-detailed \
    --json "$work/logs/serving_bench.json")"
  kill -TERM "$router" "$worker" 2>/dev/null || true
  sleep 1
  kill -9 "$router" "$worker" 2>/dev/null || true
  wait "$router" "$worker" 2>/dev/null || true
  local tput
  tput="$(json_get "$work/logs/serving_bench.json" output_throughput | cut -d. -f1)"
  row serving-bench "$([[ "$rc" == 0 ]] && echo ok || echo FAIL)" \
    "output tok/s $tput (target 8000), completed $(json_get "$work/logs/serving_bench.json" completed)"
}

# HF transformers generate on the same GPU, the first 64 requests of the serving benchmark's
# trace in one static batch (hf_baseline.py); the ratio is pagellm's output tok/s over HF's
# (target: >= 20x).
# $1: python; the rest: hf_baseline.py's flags.
hf_baseline() {
  local rc ours hf python=$1
  shift
  [[ -f "$work/logs/serving_bench.json" ]] ||
    { row hf-baseline FAIL "no serving_bench.json for the trace"; return 0; }
  rc="$(timed "$(budget 110)" hf_baseline.log env HF_HUB_OFFLINE=1 "$python" \
    tools/gpu/hf_baseline.py --lengths "$work/logs/serving_bench.json" \
    --json "$work/logs/hf_baseline.json" "$@")"
  ours="$(json_get "$work/logs/serving_bench.json" output_throughput)"
  hf="$(json_get "$work/logs/hf_baseline.json" output_throughput)"
  row hf-baseline "$([[ "$rc" == 0 ]] && echo ok || echo FAIL)" \
    "HF tok/s $hf; pagellm/HF $(python3 -c "print(f'{$ours / $hf:.1f}x')" 2>/dev/null || echo ?)"
}

run() {
  gpu_info
  unpack || return 0
  cuda_libs 1 || return 0
  ldd_check 1 || return 0
  cuda_tests 1
  hf_reference python3 150 --device cuda --check-dtype float32 || return 0
  ours cuda
  engine_tests
  sanitizer
}

bench_run() {
  gpu_info
  unpack || return 0
  cuda_libs 1 || return 0
  bench
}

dry_run() {
  unpack || return 0
  cuda_libs 0
  ldd_check 0 || return 0
  cuda_tests 0
  compare_tests
  if [[ -x "$venv/bin/python" ]]; then
    tiny_reference || return 0
    ours cpu
  else
    row hf-reference SKIP "no $venv"
  fi
  # The benchmark plumbing, small: the serving benchmark on the CPU with the default model's
  # shape, and the HF baseline with a tiny Llama on the CPU over its trace.
  serving_bench 6 --device cpu --load-format dummy --max-model-len 1024
  if [[ -x "$venv/bin/python" ]]; then
    hf_baseline "$venv/bin/python" --device cpu --tiny --batch 4 --max-new-tokens 32
  fi
}

# build-emu's programs (and its engine tests) as $work/bundle/bin, the tokenizer from the
# models; no LD_LIBRARY_PATH (the emulator is linked in).
emu_programs() {
  local f emu=build-emu
  mkdir -p "$work/bundle/bin"
  for f in "$emu"/bin/pagellm{,-worker,-router,-gpu-ref,-gpu-bench} "$emu"/tests/{preemption,sharing,speculative}_test; do
    if [[ ! -x "$f" ]]; then
      row emu-build FAIL "no $f (cmake -S . -B $emu -G Ninja -DPAGELLM_CUDA_EMU=ON; ninja -C $emu)"
      return 1
    fi
    ln -s "$PWD/$f" "$work/bundle/bin/"
  done
  tokenizer=models/SmolLM2-135M-Instruct-hf/tokenizer.json
  [[ -f "$tokenizer" ]] || { row emu-build FAIL "no $tokenizer (tools/prepare_models.sh)"; return 1; }
  row emu-build ok "$emu: the CUDA emulator"
}

emu_run() {
  emu_programs || return 0
  [[ -x "$venv/bin/python" ]] || { row hf-reference FAIL "no $venv (../shared/PEERS.md)"; return 0; }
  tiny_reference || return 0
  ours cuda
  engine_tests
  serving_bench 6 --device cuda --model "$work/ref/llama3" --gpu-memory-utilization 0.3 \
    --swap-space 0.5
  gpu_bench --model "$work/ref/llama3" --gpu-memory-utilization 0.3 --swap-space 0.1 \
    --decode_batches 1,4 --context 64 --prefill_tokens 128 --iters 2 --copy_mib 16 --gemm_n 128
}

case "${1:-}" in
  build) build ;;
  run | bench | dry-run | emu)
    default_deadline=420
    [[ "$1" == bench ]] && default_deadline=330
    [[ "$1" == emu ]] && default_deadline=1800 slow=8
    deadline=$((SECONDS + ${CHECK_DEADLINE_S:-$default_deadline}))
    setup
    trap report EXIT
    case "$1" in
      run) run ;;
      bench) bench_run ;;
      emu) emu_run ;;
      *) dry_run ;;
    esac
    exit "$failed"
    ;;
  *)
    echo "usage: tools/gpu/check.sh build | run | bench | dry-run | emu" >&2
    exit 2
    ;;
esac
