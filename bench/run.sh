#!/usr/bin/env bash
# Runs Runtime's benchmarks (as root, after scripts/install.sh) and prints
# medians and ratios against baselines measured in the same run. Results are
# also written as JSON under bench/results/.
#
# Usage: bench/run.sh [-runs N]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/bin:$PATH
go run ./bench/startup "$@"
go run ./bench/metering
go run ./bench/egress "$@"
