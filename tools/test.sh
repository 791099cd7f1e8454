#!/usr/bin/env bash
# Runs every test from a fresh clone: installs what is missing, checks the layering and the
# formatting, builds, fetches and converts the default model, then runs CTest (which also
# regenerates the reference fixtures from the independent Python implementations), builds the CPU
# container image and serves from it, checks the Helm chart, alerts and dashboard, then builds the libFuzzer targets with clang (when
# present) and runs each for 30 s. Each phase's wall time is printed (`phase:` lines).
# Model-dependent tests fail, rather than skip, here.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
phase() { echo "phase: $1 done at $((SECONDS - t0)) s"; }
tools/setup.sh
phase setup
tools/check_layers.sh
git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | xargs clang-format --dry-run -Werror
echo "clang-format: ok"
tools/build.sh
phase build
tools/prepare_models.sh
phase models
export PAGELLM_REQUIRE_MODELS=1
# Backends check every batch against forward_batch.h's contract (ValidateForwardBatch).
export PAGELLM_VALIDATE_BATCHES=1
ctest --test-dir build --output-on-failure --timeout 1200
phase ctest
# The CPU container image, built offline; its worker serves inside it.
tools/test_image.sh
phase image
# The Helm chart (lint, render, Kubernetes 1.30 schemas, typos refused), then the alert rules
# (promtool) and every dashboard query against a real Prometheus scraping a live deployment.
tools/test_deploy.sh
phase deploy
FUZZ_SECONDS="${FUZZ_SECONDS:-30}" tools/fuzz/run_ci.sh
phase fuzz
