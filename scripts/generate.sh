#!/usr/bin/env bash
# Regenerates every generated file from its one source, after a change to
# api/openapi.yaml or to the Python SDK's async client:
#   sdk/typescript/src/generated/openapi.ts   from api/openapi.yaml (openapi-typescript)
#   sdk/python/src/withruntime/_sync/         from the async client (unasync)
# The Go wire types (sdk/go/wire) are written by hand and checked against
# api/openapi.yaml by TestWireMatchesSpec; the Python types by
# sdk/python/tests/test_contract.py. Each SDK's tests fail on a stale file.
# Usage: scripts/generate.sh [--check]   (--check writes nothing, fails if stale)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
(cd "$root/sdk/typescript" && { [[ -d node_modules ]] || npm ci --no-audit --no-fund; } && npm run --silent generate -- "$@")
"$root/sdk/python/scripts/generate.sh" "$@"
