#!/usr/bin/env bash
# Packs what the lent GPU machine needs to run pagellm's CUDA checks (tools/gpu/check.sh run):
# that machine has CUDA and python3 with torch but no gRPC/Abseil libraries, so the executables
# built here travel with the shared libraries they link.
#
#   tools/gpu/bundle.sh BUILD_DIR [OUT_DIR]      (OUT_DIR: .gpu-bundle in the repo root)
#
# OUT_DIR/bundle.tar.xz  (xz: ~100 MiB of executables and libraries pack to ~15 MiB)
#   bin/  pagellm, pagellm-worker, pagellm-gpu-ref (a note for each one missing) and every
#         executable named *cuda* in BUILD_DIR/bin and BUILD_DIR/tests (where tests land)
#   lib/  every library they load (ldd) except glibc, libstdc++ and libgcc_s (the device's are
#         newer) and the NVIDIA driver and CUDA libraries (the device has its own)
# OUT_DIR/ref/  tokenizer.json (+ tokenizer_config.json) of SmolLM2, for hf_reference.py
# Before packing it checks with `env -i LD_LIBRARY_PATH=lib ldd bin/*` that each library
# resolves into lib/ or is one of those left out (the CUDA ones may be missing here); after, that
# OUT_DIR is at most 60 MiB (the device takes 64 MiB, the working tree included).
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:?usage: tools/gpu/bundle.sh BUILD_DIR [OUT_DIR]}"
out="${2:-$root/.gpu-bundle}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
max_mib=60
# Sonames the device provides: glibc and the compiler runtime ...
system_re='^(linux-vdso|ld-linux|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil'
system_re+='|libstdc\+\+|libgcc_s)\.so'
# ... and the driver and CUDA libraries, which may also be missing here.
cuda_re='^(libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia[-a-z_]*)\.so'

die() {
  echo "bundle: $*" >&2
  exit 1
}

copy_executables() {
  local name f
  for name in pagellm pagellm-worker pagellm-router pagellm-gpu-ref pagellm-gpu-bench; do
    if [[ -x "$build/bin/$name" ]]; then
      cp "$build/bin/$name" "$stage/bin/"
    else
      echo "bundle: note: $build/bin/$name is missing, skipped"
    fi
  done
  # The CUDA tests and benchmarks, and the engine tests check.sh reruns with --device cuda. Not
  # the *_emu_test binaries: they run the kernels on the CPU emulator, which CI already does.
  for f in "$build"/bin/*cuda* "$build"/tests/*cuda* "$build"/tests/{preemption,sharing,speculative}_test; do
    [[ "$f" == *_emu_test ]] && continue
    [[ -f "$f" && -x "$f" ]] && cp "$f" "$stage/bin/"
  done
  return 0
}

# Prints "soname path" for each library that ldd resolves for the files given.
resolved_libs() {
  env -i LD_LIBRARY_PATH="$stage/lib" ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' |
    sort -u
}

copy_libs() {
  local soname path
  while read -r soname path; do
    [[ "$soname" =~ $system_re || "$soname" =~ $cuda_re ]] && continue
    cp -L "$path" "$stage/lib/$soname"
  done < <(resolved_libs "$stage"/bin/*)
}

copy_tokenizer() {
  local fixture="$build/fixtures/tokenizer/smollm2/tokenizer.json"
  local model_dir="$root/models/SmolLM2-135M-Instruct-hf"
  if [[ -f "$fixture" ]]; then
    cp "$fixture" "$out/ref/"
  elif [[ -f "$model_dir/tokenizer.json" ]]; then
    cp "$model_dir/tokenizer.json" "$out/ref/"
  else
    die "no tokenizer.json ($fixture or $model_dir/tokenizer.json); run tools/prepare_models.sh"
  fi
  if [[ -f "$model_dir/tokenizer_config.json" ]]; then
    cp "$model_dir/tokenizer_config.json" "$out/ref/"
  fi
}

check_libs() {
  local missing unbundled
  missing="$(env -i LD_LIBRARY_PATH="$stage/lib" ldd "$stage"/bin/* |
    awk '/not found/ { print $1 }' | sort -u | grep -Ev "$cuda_re" || true)"
  [[ -z "$missing" ]] || die "libraries not found: $(echo "$missing" | tr '\n' ' ')"
  unbundled="$(resolved_libs "$stage"/bin/* | grep -Ev "$system_re|$cuda_re" |
    grep -v " $stage/lib/" || true)"
  [[ -z "$unbundled" ]] || die "libraries resolved outside lib/: $(echo "$unbundled" | tr '\n' ' ')"
}

pack() {
  tar -C "$stage" -cf - bin lib | nice xz -6 -T1 >"$out/bundle.tar.xz"
}

check_size() {
  local bytes unpacked
  bytes="$(du -sb "$out" | cut -f1)"
  unpacked="$(du -sb "$stage" | cut -f1)"
  echo "bundle: $out: $(find "$stage/bin" -type f | wc -l) executables," \
    "$(find "$stage/lib" -type f | wc -l) libraries, $((unpacked >> 20)) MiB unpacked," \
    "$((bytes >> 20)) MiB packed ($bytes bytes)"
  ((bytes <= max_mib << 20)) || die "bundle is over $max_mib MiB"
}

[[ -d "$build/bin" ]] || die "$build/bin is not a directory"
rm -rf "$out"
mkdir -p "$stage/bin" "$stage/lib" "$out/ref"
copy_executables
[[ -n "$(find "$stage/bin" -type f)" ]] || die "no executables found in $build"
copy_libs
check_libs
copy_tokenizer
pack
check_size
find "$stage/bin" -type f -printf 'bundle:   bin/%f\n' | sort
