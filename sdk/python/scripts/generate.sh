#!/usr/bin/env bash
# Regenerates every generated file of the Python SDK: the sync client
# (src/withruntime/_sync/) from the async one (src/withruntime/_async/), with
# unasync (see scripts/generate.py). The repo's top-level generate script
# calls this. Uses sdk/python/.venv (made here, with the [test] extra, which
# brings unasync) unless PYTHON names an interpreter that has unasync.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z ${PYTHON:-} ]]; then
	if [[ ! -x .venv/bin/python ]]; then
		python3 -m venv .venv
	fi
	.venv/bin/python -c 'import unasync' 2>/dev/null || .venv/bin/pip install -q -e '.[test]'
	PYTHON=.venv/bin/python
fi
"$PYTHON" scripts/generate.py "$@"
