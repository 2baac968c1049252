#!/usr/bin/env bash
# QP scale of `lumina run` on the simulator (issue 17 item 3), against its yardstick measured in the same run:
# 1,024 QPs (a QP here is a connection: a requester QP and its responder). One 1 KB WRITE per connection at 1,024 / 8,192 / 65,536 connections (65,536 is the limit): the
# whole `lumina run` and the simulation alone (bench/simonly: no dumps, trace or analysis), each the median of
# RUNS runs (default 3): wall, peak RSS, time and memory per QP, and their ratios to 1,024 QPs (1.0 = linear).
# Then the heap per idle QP of the simulator's per-QP state (QPs created, nothing posted) at 65,536 connections.
# Usage: bench/qps.sh            (RUNS=... to change the number of runs)
set -euo pipefail
cd "$(dirname "$0")/.."
TIMEFORMAT='%3R %3U %3S'
RUNS=${RUNS:-3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
go build -o "$TMP/lumina" ./cmd/lumina
go build -o "$TMP/simonly" ./bench/simonly

# measure CMD...: RUNS runs; sets WALL (s) and RSS (KB) to the medians.
measure() {
	local walls=() rsss=() cpus=() i
	for ((i = 0; i < RUNS; i++)); do
		# bash's time to the millisecond (wall, user, sys of the command and its children), peak RSS from
		# /usr/bin/time.
		{ time /usr/bin/time -o "$TMP/t" -f "%M" "$@" > /dev/null 2> "$TMP/err"; } 2> "$TMP/bt" || { cat "$TMP/err" >&2; exit 1; }
		read -r r < <(tail -1 "$TMP/t")
		read -r w u s < <(tail -1 "$TMP/bt")
		walls+=("$w")
		rsss+=("$r")
		cpus+=("$(awk -v u="$u" -v s="$s" 'BEGIN {print u + s}')")
	done
	CPU=$(printf '%s\n' "${cpus[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	WALL=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	RSS=$(printf '%s\n' "${rsss[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
}

echo "== one 1 KB WRITE per connection; median of $RUNS runs, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-18s %6s %8s %8s %9s %8s %8s %8s %8s\n' "" QPs "wall s" "cpu s" "us/QP" "KB/QP" "wall/QP" "cpu/QP" "mem/QP"
for what in simonly run; do
	for n in 1024 8192 65536; do
		cat > "$TMP/qps-$n.yaml" << YAML
seed: 1
requester: {nic: {type: cx5}}
responder: {nic: {type: cx5}}
traffic: {num-connections: $n, rdma-verb: write, num-msgs-per-qp: 1, message-size: 1024, mtu: 1024}
YAML
		if [ "$what" = simonly ]; then
			label="simulation alone"
			measure "$TMP/simonly" "$TMP/qps-$n.yaml"
		else
			label="lumina run"
			measure "$TMP/lumina" run "$TMP/qps-$n.yaml" -o "$TMP/out" -q
		fi
		if [ "$n" = 1024 ]; then
			BASE_W=$WALL BASE_R=$RSS BASE_C=$CPU
		fi
		awk -v l="$label" -v n="$n" -v w="$WALL" -v c="$CPU" -v r="$RSS" -v bw="$BASE_W" -v br="$BASE_R" -v bc="$BASE_C" 'BEGIN {
			printf "%-18s %6d %8.3f %8.3f %9.1f %8.2f %7.2fx %7.2fx %7.2fx\n", l, n, w, c, w / n * 1e6, r / n,
				(w / n) / (bw / 1024), (c / n) / (bc / 1024), (r / n) / (br / 1024)
		}'
	done
done
echo "(wall/QP, cpu/QP, mem/QP: per-QP wall time, CPU time and peak RSS relative to 1,024 QPs: 1.00x is linear, above"
echo " is worse; the fixed start-up cost makes small runs dearer per QP. CPU seconds to the millisecond)"
echo
echo "== heap per idle QP (simulator per-QP state, 65,536 connections = 131,072 QPs created, nothing posted; limit 8 KB)"
go test ./netsim -run '^$' -bench 'BenchmarkIdleQPs' -benchtime 3x | grep -E '^BenchmarkIdleQPs'
