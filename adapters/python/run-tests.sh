#!/usr/bin/env bash
# Tests the Python framework adapters, each in the framework's own agent loop
# against real gVisor sandboxes (a `withruntime serve` the tests start; needs
# root and withruntime on PATH, as scripts/test.sh sets up).
#
# Each framework gets its own venv, .venv/<framework>, holding exactly the
# versions pinned in locks/<framework>.txt (some frameworks' pins conflict
# with each other: crewai wants openai<3, openai-agents openai>=3), plus the
# SDK (sdk/python) and this package, editable. Installing is idempotent: a
# second run only checks the venvs (uv pip sync). uv itself, pinned, lives in
# .venv/uv.
#
# Usage: adapters/python/run-tests.sh [framework...]     (default: all)
#        adapters/python/run-tests.sh --update-locks     (re-resolve locks/*.in to the newest versions)
set -euo pipefail
cd "$(dirname "$0")"

FRAMEWORKS=(openai_agents langchain llama_index crewai pydantic_ai smolagents google_adk claude_agent_sdk)
UV_VERSION=0.13.9
PYTHON=$(command -v python3)
export UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1

if [ ! -x .venv/uv/bin/uv ] || [ "$(.venv/uv/bin/uv --version | cut -d' ' -f2)" != "$UV_VERSION" ]; then
	rm -rf .venv/uv
	"$PYTHON" -m venv .venv/uv
	.venv/uv/bin/pip install -q "uv==$UV_VERSION"
fi
uv=.venv/uv/bin/uv

if [ "${1:-}" = "--update-locks" ]; then
	for fw in "${FRAMEWORKS[@]}"; do
		"$uv" pip compile -q --python "$PYTHON" --upgrade --no-annotate \
			--custom-compile-command "adapters/python/run-tests.sh --update-locks" \
			"locks/$fw.in" -o "locks/$fw.txt"
	done
	exit 0
fi

selected=("$@")
[ ${#selected[@]} -gt 0 ] || selected=("${FRAMEWORKS[@]}")
failed=()
for fw in "${selected[@]}"; do
	[ -f "locks/$fw.txt" ] || { echo "adapters/python: no framework $fw (locks/$fw.txt)" >&2; exit 2; }
	venv=.venv/$fw
	echo "adapters/python: $fw" >&2
	[ -x "$venv/bin/python" ] || "$uv" venv -q --python "$PYTHON" "$venv"
	VIRTUAL_ENV=$venv "$uv" pip sync -q "locks/$fw.txt"
	VIRTUAL_ENV=$venv "$uv" pip install -q --no-deps -e ../../sdk/python -e .
	"$venv/bin/python" -m pytest -q -p no:cacheprovider "tests/test_$fw.py" || failed+=("$fw")
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "adapters/python: FAILED: ${failed[*]}" >&2
	exit 1
fi
