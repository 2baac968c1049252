#!/usr/bin/env bash
# Speed of `lumina analyze` (issue item 7), measured side by side with tshark in one run:
#   1. Go benchmarks: decode-only (roce codec) and the full per-packet work (BenchmarkStatsAdd, with ICRC);
#   2. end to end on a generated N-packet RoCEv2 pcap: decode + summary without ICRC, the full analyze with
#      ICRC, and `tshark -r FILE -T fields -e infiniband.bth.psn`; packets/s, speed-up and peak RSS;
#   3. memory flat: peak RSS of the full analyze on a capture 10x smaller.
# Usage: bench/analyze.sh            (N=1000000; set N=... to change, SKIP_TSHARK=1 to skip tshark)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000000}
CAP=${CAP:-/tmp/lumina-bench-$N.pcap}
SMALL=/tmp/lumina-bench-$((N / 10)).pcap
BIN=/tmp/lumina-bench-bin

go build -o "$BIN" ./cmd/lumina
[ -s "$CAP" ] || go run ./bench/gencap -n "$N" -o "$CAP"
[ -s "$SMALL" ] || go run ./bench/gencap -n $((N / 10)) -o "$SMALL"
cat "$CAP" "$SMALL" > /dev/null # into the page cache, so every tool reads from memory

echo "== Go benchmarks (one core)"
go test ./analyze/summary -run '^$' -bench 'Decode|StatsAdd' -benchtime 2000000x | grep -E '^Benchmark'

# run LABEL CMD...: wall time and peak RSS of CMD, output discarded.
run() {
	local label=$1
	shift
	local tf
	tf=$(mktemp)
	/usr/bin/time -o "$tf" -f "%e %M" "$@" > /dev/null 2>&1 || true # lumina exits 1 when a checker fails
	local wall rss
	read -r wall rss < <(tail -1 "$tf")
	rm -f "$tf"
	awk -v l="$label" -v w="$wall" -v n="$N" -v r="$rss" \
		'BEGIN { printf "%-34s %8.3f s  %10.0f packets/s  peak RSS %7d KB\n", l, w, n / w, r }'
	eval "T_${label//[^a-zA-Z0-9]/_}=$wall"
}

echo
echo "== $N packets, $(du -h "$CAP" | cut -f1) ($CAP)"
run "decode-only (--no-icrc --no-checks)" "$BIN" analyze --no-icrc --no-checks "$CAP"
run "summary with ICRC (--no-checks)" "$BIN" analyze --no-checks "$CAP"
run "lumina analyze (ICRC + checkers)" "$BIN" analyze "$CAP"
if [ -z "${SKIP_TSHARK:-}" ] && command -v tshark > /dev/null; then
	run "tshark -e infiniband.bth.psn" tshark -r "$CAP" -T fields -e infiniband.bth.psn
	awk -v a="$T_tshark__e_infiniband_bth_psn" -v b="$T_lumina_analyze__ICRC___checkers_" \
		'BEGIN { printf "speed-up of lumina analyze over tshark: %.1fx\n", a / b }'
fi
echo
echo "== memory flat: peak RSS on $((N / 10)) packets"
N=$((N / 10)) run "lumina analyze (ICRC + checkers)" "$BIN" analyze "$SMALL"
