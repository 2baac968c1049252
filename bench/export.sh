#!/usr/bin/env bash
# Speed of `lumina export --parquet` against `lumina analyze` on the same generated RoCEv2 capture (issue 19,
# item 5), and its memory at two sizes (the export streams: peak RSS should not grow with the capture).
# Prints, for N and N/10 packets: wall time, packets/s and peak RSS of each, and the ratio export / analyze.
# Usage: bench/export.sh            (N=1000000; set N=... to change)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
N=${N:-1000000}
CAP=${CAP:-/tmp/lumina-bench-$N.pcap}
SMALL=/tmp/lumina-bench-$((N / 10)).pcap
BIN=$(mktemp -d)/lumina
OUT=$(dirname "$BIN")
trap 'rm -rf "$OUT"' EXIT

go build -o "$BIN" ./cmd/lumina
[ -s "$CAP" ] || go run ./bench/gencap -n "$N" -o "$CAP"
[ -s "$SMALL" ] || go run ./bench/gencap -n $((N / 10)) -o "$SMALL"
bench_cache "$CAP" "$SMALL" # into the page cache

# run LABEL PACKETS CMD...: wall time and peak RSS of one run of CMD (bench/lib.sh; lumina analyze exits 1
# when a checker fails); sets WALL.
run() {
	local label=$1 n=$2
	shift 2
	BENCH_OK="0 1" bench_runs 1 "$@"
	WALL=$B_WALL
	awk -v l="$label" -v w="$WALL" -v n="$n" -v r="$B_RSS" \
		'BEGIN { printf "%-28s %8.3f s  %10.0f packets/s  peak RSS %7d KB\n", l, w, n / w, r }'
}

for size in "$N:$CAP" "$((N / 10)):$SMALL"; do
	n=${size%%:*}
	cap=${size#*:}
	echo "== $n packets, $(du -h "$cap" | cut -f1) ($cap)"
	run "lumina analyze" "$n" "$BIN" analyze "$cap"
	a=$WALL
	rm -rf "$OUT/pq"
	run "lumina export --parquet" "$n" "$BIN" export "$cap" --parquet "$OUT/pq"
	e=$WALL
	[ -s "$OUT/pq/packets.parquet" ] || { echo "export wrote no packets.parquet" >&2; exit 1; }
	echo "Parquet output: $(du -sh "$OUT/pq" | cut -f1)"
	awk -v a="$a" -v e="$e" 'BEGIN { printf "export / analyze: %.2fx the time\n", e / a }'
	echo
done
