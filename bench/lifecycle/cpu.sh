#!/usr/bin/env bash
# Host CPU per sandbox lifecycle, over the whole process tree, with perf.
#
#   bench/lifecycle/cpu.sh [-r ROUNDS] [-n LIFECYCLES] [MODE ...]
#
# MODEs are bench/lifecycle's (default: runtime bare). Each round runs every
# mode once, interleaved (others' load on the host shifts all of them
# alike), under `perf stat -e task-clock` enabled only around the measured
# lifecycles; it prints each mode's CPU ms per lifecycle per round and the
# means. Run as root from the repository root; needs perf (linux-perf).
set -euo pipefail
rounds=3 n=20
while getopts r:n: o; do
	case $o in
	r) rounds=$OPTARG ;;
	n) n=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
modes=("$@")
[[ ${#modes[@]} -gt 0 ]] || modes=(runtime bare)
command -v perf >/dev/null || { echo "cpu.sh: perf not found (apt-get install linux-perf)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/wr-lifecycle-cpu.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/lifecycle" ./bench/lifecycle
mkfifo "$tmp/ctl" "$tmp/ack"
declare -A sum
for ((r = 1; r <= rounds; r++)); do
	for m in "${modes[@]}"; do
		perf stat -e task-clock -x, -o "$tmp/stat" --delay=-1 --control="fifo:$tmp/ctl,$tmp/ack" \
			"$tmp/lifecycle" -mode "$m" -n "$n" -ctl "$tmp/ctl,$tmp/ack" >"$tmp/out" 2>&1 ||
			{ cat "$tmp/out" >&2; exit 1; }
		ms=$(awk -F, -v n="$n" '/task-clock/ {printf "%.1f", $1/n}' "$tmp/stat")
		printf 'round %d  %-15s %7s ms CPU per lifecycle  (%s)\n' "$r" "$m" "$ms" "$(grep -m1 'wall' "$tmp/out")"
		sum[$m]=$(awk -v a="${sum[$m]:-0}" -v b="$ms" 'BEGIN {print a + b}')
	done
done
for m in "${modes[@]}"; do
	awk -v m="$m" -v s="${sum[$m]}" -v r="$rounds" 'BEGIN {printf "mean  %-15s %7.1f ms CPU per lifecycle\n", m, s / r}'
done
