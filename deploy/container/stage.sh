#!/usr/bin/env bash
# Stages what the pagellm images hold, from a build on this (Debian 12) machine, into a build
# context directory for the Containerfiles:
#   deploy/container/stage.sh BUILD_BIN_DIR CONTEXT_DIR
# CONTEXT_DIR/stage/usr/local/bin/        pagellm-router, pagellm-worker, pagellm
# CONTEXT_DIR/stage/usr/local/lib/pagellm/ every shared library they load that is not glibc's
#                                          (ldd; the image's own glibc is bookworm's, as here)
# The images are built offline: nothing is downloaded, so nothing in them is newer or other than
# what the tests ran against. The Containerfiles check inside the image that every library
# resolves.
set -euo pipefail
bin_dir=${1:?usage: stage.sh BUILD_BIN_DIR CONTEXT_DIR}
ctx=${2:?usage: stage.sh BUILD_BIN_DIR CONTEXT_DIR}
here=$(cd "$(dirname "$0")" && pwd)

rm -rf "$ctx/stage"
mkdir -p "$ctx/stage/usr/local/bin" "$ctx/stage/usr/local/lib/pagellm"
for b in pagellm-router pagellm-worker pagellm; do
  install -m 0755 "$bin_dir/$b" "$ctx/stage/usr/local/bin/$b"
  strip --strip-unneeded "$ctx/stage/usr/local/bin/$b"
done
# glibc (and the loader) come from the base image; everything else travels with the binaries.
ldd "$ctx"/stage/usr/local/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux-x86-64)\.so' |
  while read -r lib; do
    cp -L "$lib" "$ctx/stage/usr/local/lib/pagellm/"
  done
cp "$here"/Containerfile.* "$ctx/"
echo "staged $(ls "$ctx/stage/usr/local/lib/pagellm" | wc -l) libraries," \
  "$(du -sh "$ctx/stage" | cut -f1) in $ctx/stage"
