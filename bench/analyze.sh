#!/usr/bin/env bash
# Speed of `lumina analyze` (issue 17 items 1, 3 and 4), everything measured in one run on this machine:
#   1. Go benchmarks on one core: decode-only (roce codec, summary) and the full per-packet summary work;
#   2. on a generated N-packet RoCEv2 pcap, from the page cache: the read-bandwidth yardstick (bench/readcrc:
#      read the file + a CRC32 of every packet, on one core and on every core), decode-only, the summary with
#      ICRCs, the full analyze (ICRCs + checkers) on every core and on one core, and
#      `tshark -r FILE -T fields -e infiniband.bth.psn`; packets/s, packets/s per core (packets / CPU seconds),
#      the ratio against tshark and against the yardstick, peak RSS;
#   3. memory flat in the capture's size: peak RSS of the full analyze on N/10 and N packets;
#   4. connections: the full analyze (--json) of traces of C connections of one 1 KB WRITE each (gencap -conns),
#      C = 1,024, 8,192 and 65,536: time and peak RSS, per connection and against 1,024.
# Each figure is the median of RUNS runs (wall and CPU) and the largest peak RSS; the ratios against the
# yardstick and against tshark are medians of pairs of runs taken in turn (tshark: TSHARK_RUNS pairs).
# Usage: bash bench/analyze.sh     (N=1000000 RUNS=5 TSHARK_RUNS=3; SKIP_TSHARK=1 skips tshark;
#                                   UPDATE_README=1 rewrites the README's analyze table with the figures)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
N=${N:-1000000}
RUNS=${RUNS:-5}
TSHARK_RUNS=${TSHARK_RUNS:-3}
TMP=${TMPDIR:-/tmp}
CAP=${CAP:-$TMP/lumina-bench-$N.pcap}
SMALL=$TMP/lumina-bench-$((N / 10)).pcap
BIN=$TMP/lumina-bench-bin
mkdir -p "$BIN"

go build -o "$BIN/lumina" ./cmd/lumina
go build -o "$BIN/gencap" ./bench/gencap
go build -o "$BIN/readcrc" ./bench/readcrc
[ -s "$CAP" ] || "$BIN/gencap" -n "$N" -o "$CAP"
[ -s "$SMALL" ] || "$BIN/gencap" -n $((N / 10)) -o "$SMALL"
CONNS="1024 8192 65536"
for c in $CONNS; do
	[ -s "$TMP/lumina-bench-conns-$c.pcap" ] || "$BIN/gencap" -conns "$c" -o "$TMP/lumina-bench-conns-$c.pcap"
done
bench_cache "$CAP" "$SMALL" "$TMP"/lumina-bench-conns-*.pcap # into the page cache: every tool reads memory

CORES=$(nproc)
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== $(uname -m), $CORES cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(go version | cut -d' ' -f3), load average $LOAD"
echo
echo "== Go benchmarks (one core)"
go test ./roce -run '^$' -bench 'BenchmarkDecode$' | grep -E '^Benchmark'
go test ./analyze/summary -run '^$' -bench 'Decode|StatsAdd' -benchtime 2000000x | grep -E '^Benchmark'

# measure KEY PACKETS RUNS CMD...: runs CMD (output discarded) RUNS times (bench/lib.sh; lumina exits 1 when a
# check fails) and sets W_KEY (median wall s), C_KEY (median user+sys s) and M_KEY (largest peak RSS, KB);
# prints a row.
measure() {
	local key=$1 pkts=$2 runs=$3
	shift 3
	BENCH_OK="0 1" bench_runs "$runs" "$@"
	printf -v "W_$key" '%s' "$B_WALL"
	printf -v "C_$key" '%s' "$B_CPU"
	printf -v "M_$key" '%s' "$B_RSS_MAX"
	awk -v l="$key" -v w="$B_WALL" -v c="$B_CPU" -v n="$pkts" -v r="$B_RSS_MAX" 'BEGIN {
		printf "%-18s %7.3f s wall %7.3f s cpu %7.2f M packets/s %6.2f M packets/s per core %7.1f MB peak\n",
			l, w, c, n / w / 1e6, n / c / 1e6, r / 1024 }'
}

echo
echo "== $N packets, $(du -h "$CAP" | cut -f1) ($CAP); median of $RUNS runs"
measure readcrc1 "$N" "$RUNS" "$BIN/readcrc" -j 1 "$CAP"
measure readcrc "$N" "$RUNS" "$BIN/readcrc" -j 0 "$CAP"
measure decode "$N" "$RUNS" "$BIN/lumina" analyze --no-icrc --no-checks "$CAP"
measure summary "$N" "$RUNS" "$BIN/lumina" analyze --no-checks "$CAP"
measure analyze "$N" "$RUNS" "$BIN/lumina" analyze --json "$CAP"
measure analyze1core "$N" "$RUNS" env GOMAXPROCS=1 "$BIN/lumina" analyze --json "$CAP"
echo "   readcrc: read + CRC32 of every packet (-j 1: one core; else every core); decode: --no-icrc --no-checks;"
echo "   summary: --no-checks (every ICRC); analyze: the full analysis (ICRC + checkers), every core and GOMAXPROCS=1"

# ratio_pairs KEY_A KEY_B RUNS: R_OUT is the median over RUNS pairs of wall(B) / wall(A), for the commands in
# PAIR_A and PAIR_B (words joined by \x1f) taken in turn (A B A B ...), so that a change in the machine's load
# hits both sides of a pair alike.
echo
echo "== ratios from runs taken in turn, pair by pair (median of the pairs' ratios)"
ratio_pairs() {
	local a=$1 b=$2 runs=$3 r=""
	shift 3
	local -a cmd_a cmd_b
	IFS=$'\x1f' read -r -a cmd_a <<< "${PAIR_A}"
	IFS=$'\x1f' read -r -a cmd_b <<< "${PAIR_B}"
	for i in $(seq "$runs"); do
		measure "$a$i" "$N" 1 "${cmd_a[@]}"
		measure "$b$i" "$N" 1 "${cmd_b[@]}"
		local wa=W_$a$i wb=W_$b$i
		r="$r $(awk -v x="${!wa}" -v y="${!wb}" 'BEGIN { print y / x }')"
	done
	R_OUT=$(bench_median $r)
}
join() { local IFS=$'\x1f'; echo "$*"; }
PAIR_A=$(join "$BIN/lumina" analyze --json "$CAP") PAIR_B=$(join "$BIN/readcrc" -j 0 "$CAP")
ratio_pairs pa pr "$RUNS"
R_READ=$R_OUT
TS="" R_TSHARK=""
if [ -z "${SKIP_TSHARK:-}" ] && command -v tshark > /dev/null; then
	PAIR_B=$(join tshark -r "$CAP" -T fields -e infiniband.bth.psn)
	ratio_pairs pt tshark "$TSHARK_RUNS"
	R_TSHARK=$R_OUT
	TS=$(bench_median $(for i in $(seq "$TSHARK_RUNS"); do v=W_tshark$i; echo "${!v}"; done))
	M_tshark=$M_tshark1
fi
echo
awk -v rr="$R_READ" -v rt="$R_TSHARK" -v c="$C_analyze" -v n="$N" 'BEGIN {
	if (rt != "") printf "lumina analyze vs tshark:                     %6.1fx faster (target >= 50x)\n", rt
	printf "lumina analyze vs the read-bandwidth limit:   %6.2fx the time of readcrc on every core\n", 1 / rr
	printf "lumina analyze per core:                      %6.2f M packets/s of CPU time (target >= 2)\n", n / c / 1e6 }'

echo
echo "== memory flat in the capture's size: the full analyze"
measure analyze_small $((N / 10)) 1 "$BIN/lumina" analyze --json "$SMALL"
awk -v s="$M_analyze_small" -v b="$M_analyze" -v n="$N" 'BEGIN {
	printf "peak RSS: %.0f MB on %d packets, %.0f MB on %d packets\n", s / 1024, n / 10, b / 1024, n }'

echo
echo "== connections: one 1 KB WRITE each, lumina analyze --json (median of $RUNS runs)"
for c in $CONNS; do
	measure "conns$c" $((2 * c)) "$RUNS" "$BIN/lumina" analyze --json "$TMP/lumina-bench-conns-$c.pcap"
done
for c in $CONNS; do
	w=W_conns$c m=M_conns$c u=C_conns$c
	awk -v c="$c" -v w="${!w}" -v m="${!m}" -v u="${!u}" -v w0="$W_conns1024" -v m0="$M_conns1024" -v u0="$C_conns1024" 'BEGIN {
		printf "%6d connections (%4.0fx 1,024): wall %7.3f s (%5.1fx), cpu %7.3f s (%5.1fx, %5.1f us per connection), peak RSS %5.0f MB (%5.1fx, %4.1f KB per connection)\n",
			c, c / 1024, w, w / w0, u, u / u0, u / c * 1e6, m / 1024, m / m0, m / c }'
done

if [ -n "${UPDATE_README:-}" ]; then
	block=$(mktemp)
	awk -v n="$N" -v size="$(du -h "$CAP" | cut -f1)" -v cores="$CORES" -v t="$TS" -v date="$(date -u +%Y-%m-%d)" -v load="$LOAD" \
		-v wd="$W_decode" -v cd="$C_decode" -v md="$M_decode" -v ws="$W_summary" -v cs="$C_summary" -v ms="$M_summary" \
		-v wa="$W_analyze" -v ca="$C_analyze" -v ma="$M_analyze" -v w1="$W_analyze1core" -v c1="$C_analyze1core" -v m1="$M_analyze1core" \
		-v wr="$W_readcrc" -v cr="$C_readcrc" -v mr="$M_readcrc" -v mt="${M_tshark:-0}" -v msmall="$M_analyze_small" \
		-v rt="$R_TSHARK" -v rr="$R_READ" \
		-v wc1="$C_conns1024" -v mc1="$M_conns1024" -v wc2="$C_conns8192" -v mc2="$M_conns8192" -v wc3="$C_conns65536" -v mc3="$M_conns65536" '
	function row(name, w, c, m) {
		printf "| %s | %.3f s | %.1f M | %.1f M | %s | %.0f MB |\n", name, w, n / w / 1e6, n / c / 1e6, t != "" ? sprintf("%.0fx", t / w) : "-", m / 1024 }
	BEGIN {
		printf "Taken by `UPDATE_README=1 bash bench/analyze.sh` on %s, load average %s when it started (other work on the machine\n", date, load
		print "inflates the wall times, tshark'"'"'s most; the per-core figures are packets per CPU second). Medians of several runs.\n"
		printf "| tool (%d packets, %s, %d cores) | wall | packets/s | per core | vs tshark | peak RSS |\n", n, size, cores
		print "|---|---|---|---|---|---|"
		row("read + CRC32 of every packet, every core (`bench/readcrc`: the read-bandwidth limit)", wr, cr, mr)
		row("`lumina analyze --no-icrc --no-checks` (decode + summary)", wd, cd, md)
		row("`lumina analyze --no-checks` (summary, every ICRC checked)", ws, cs, ms)
		row("`lumina analyze` (summary, ICRC, and the checkers on every connection)", wa, ca, ma)
		row("`lumina analyze` on one core (GOMAXPROCS=1)", w1, c1, m1)
		if (t != "") printf "| `tshark -r FILE -T fields -e infiniband.bth.psn` | %.1f s | %.0f k | | 1x | %.0f MB |\n", t, n / t / 1e3, mt / 1024
		printf "\nIn runs taken in turn, pair by pair: the full analyze takes %.2fx the time of the read-bandwidth limit", 1 / rr
		if (rt != "") printf " and is %.1fx faster than tshark", rt
		printf " (medians of the pairs'"'"' ratios). Its peak RSS is %.0f MB on %d packets and %.0f MB on %d.\n", msmall / 1024, n / 10, ma / 1024, n
		printf "On traces of one 1 KB WRITE per connection (`lumina analyze --json`, CPU time / peak RSS): 1,024 connections %.2f s / %.0f MB, 8,192 %.2f s / %.0f MB, 65,536 %.2f s / %.0f MB (%.1f us and %.1f KB per connection).\n",
			wc1, mc1 / 1024, wc2, mc2 / 1024, wc3, mc3 / 1024, wc3 / 65536 * 1e6, mc3 / 65536 }' > "$block"
	awk -v f="$block" '
		/<!-- analyze-bench:begin -->/ { print; while ((getline l < f) > 0) print l; skip = 1; next }
		/<!-- analyze-bench:end -->/ { skip = 0 }
		!skip' README.md > README.md.new && mv README.md.new README.md
	rm -f "$block"
	echo
	echo "README.md: the analyze table rewritten"
fi
