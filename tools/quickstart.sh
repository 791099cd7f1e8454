#!/usr/bin/env bash
# One command from a fresh Debian 12 machine: install, build, fetch the default model, then
# serve it on localhost (a worker behind a router; see tools/serve.sh) after a demo request.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
tools/build.sh
tools/fetch_model.sh
exec tools/serve.sh "$@"
