#!/usr/bin/env bash
# QP scale of `lumina run` on the simulator (issue 17 item 3), against its yardstick measured in the same run:
# 1,024 QPs (a QP here is a connection: a requester QP and its responder). One 1 KB WRITE per connection at 1,024 / 8,192 / 65,536 connections (65,536 is the limit): the
# whole `lumina run` and the simulation alone (bench/simonly: no dumps, trace or analysis), each the median of
# RUNS runs (default 3): wall, peak RSS, time and memory per QP, and their ratios to 1,024 QPs (1.0 = linear).
# Then the heap per idle QP of the simulator's per-QP state (QPs created, nothing posted) at 65,536 connections.
# Usage: bench/qps.sh            (RUNS=... to change the number of runs; QPS="1024 8192 65536" the connection
#                                 counts, the first the base of the ratios)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
RUNS=${RUNS:-3}
QPS=${QPS:-1024 8192 65536}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
go build -o "$TMP/lumina" ./cmd/lumina
go build -o "$TMP/simonly" ./bench/simonly

# measure CMD...: RUNS runs (bench/lib.sh); sets WALL, CPU (s) and RSS (KB) to the medians.
measure() {
	bench_runs "$RUNS" "$@"
	WALL=$B_WALL CPU=$B_CPU RSS=$B_RSS
}

echo "== one 1 KB WRITE per connection; median of $RUNS runs, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-18s %6s %8s %8s %9s %8s %8s %8s %8s\n' "" QPs "wall s" "cpu s" "us/QP" "KB/QP" "wall/QP" "cpu/QP" "mem/QP"
for what in simonly run; do
	base=""
	for n in $QPS; do
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
		if [ -z "$base" ]; then
			base=$n BASE_W=$WALL BASE_R=$RSS BASE_C=$CPU
		fi
		awk -v l="$label" -v n="$n" -v w="$WALL" -v c="$CPU" -v r="$RSS" -v b="$base" -v bw="$BASE_W" -v br="$BASE_R" -v bc="$BASE_C" 'BEGIN {
			printf "%-18s %6d %8.3f %8.3f %9.1f %8.2f %7.2fx %7.2fx %7.2fx\n", l, n, w, c, w / n * 1e6, r / n,
				(w / n) / (bw / b), (c / n) / (bc / b), (r / n) / (br / b)
		}'
	done
done
[ "$base" = 1024 ] && base=1,024
echo "(wall/QP, cpu/QP, mem/QP: per-QP wall time, CPU time and peak RSS relative to $base QPs: 1.00x is linear, above"
echo " is worse; the fixed start-up cost makes small runs dearer per QP. CPU seconds to the millisecond)"
echo
echo "== heap per idle QP (simulator per-QP state, 65,536 connections = 131,072 QPs created, nothing posted; limit 8 KB)"
go test ./netsim -run '^$' -bench 'BenchmarkIdleQPs' -benchtime 3x | grep -E '^BenchmarkIdleQPs'
