#!/usr/bin/env bash
# Runs Runtime's benchmarks (as root, after scripts/install.sh) and prints
# medians and ratios against baselines measured in the same run. Results are
# also written as JSON under bench/results/.
#
# Usage: bench/run.sh [-runs N]
# (-runs goes to the suite, egress and workloads; for the suite's other flags, such
# as -idle K or -only SECTIONS, run go run ./bench/suite directly. scale
# holds 1,000 idle sandboxes, or what free memory allows: go run
# ./bench/scale -n N to choose.)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/bin:$PATH
go run ./bench/suite "$@"
go run ./bench/metering
go run ./bench/egress "$@"
go run ./bench/volume
go run ./bench/workloads "$@"
go run ./bench/scale
