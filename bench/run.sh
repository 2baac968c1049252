#!/usr/bin/env bash
# Speed of `lumina run` on the simulator (issue 17 item 2), against its yardstick measured in the same run: the
# simulation alone (bench/simonly: the same scenario, switch logic and events, mirrored frames discarded: no
# dumps, no trace, no analysis). Scenario: bench/run/write-4qp.yaml, 4 QPs x 100 x 1 MB WRITEs, 460,800 trace
# packets. Prints the median of RUNS runs (default 5) of each: wall, trace packets/s, peak RSS, and the ratio;
# then peak RSS on a run 4x longer (memory flat in the run's length).
# Usage: bench/run.sh            (RUNS=... to change the number of runs; OUT=dir for the results, default a tmpdir)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
RUNS=${RUNS:-5}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=${OUT:-$TMP/out}
go build -o "$TMP/lumina" ./cmd/lumina
go build -o "$TMP/simonly" ./bench/simonly
SC=bench/run/write-4qp.yaml
sed 's/num-msgs-per-qp: 100/num-msgs-per-qp: 400/' "$SC" > "$TMP/write-4qp-x4.yaml"

# measure LABEL CMD...: RUNS runs (bench/lib.sh); sets WALL, CPU (s) and RSS (KB) to the medians.
measure() {
	local label=$1
	shift
	bench_runs "$RUNS" "$@"
	WALL=$B_WALL CPU=$B_CPU RSS=$B_RSS
	echo "  $label: walls ${B_WALLS[*]} s, cpu ${B_CPUS[*]} s"
}

PKTS=$("$TMP/simonly" "$SC" | awk '{print $1}')
echo "== $SC: $PKTS trace packets; median of $RUNS runs, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
measure "simulation alone" "$TMP/simonly" "$SC"
SIM_W=$WALL SIM_R=$RSS SIM_C=$CPU
measure "lumina run" "$TMP/lumina" run "$SC" -o "$OUT" -q
RUN_W=$WALL RUN_R=$RSS RUN_C=$CPU
awk -v p="$PKTS" -v sw="$SIM_W" -v sr="$SIM_R" -v sc="$SIM_C" -v rw="$RUN_W" -v rr="$RUN_R" -v rc="$RUN_C" 'BEGIN {
	printf "%-50s %6.3f s wall %5.2f M trace packets/s  %6.3f s cpu  peak RSS %3.0f MB\n", "simulation alone (bench/simonly)", sw, p / sw / 1e6, sc, sr / 1024
	printf "%-50s %6.3f s wall %5.2f M trace packets/s  %6.3f s cpu  peak RSS %3.0f MB\n", "lumina run (sim, dumps, trace.pcapng, analysis)", rw, p / rw / 1e6, rc, rr / 1024
	printf "lumina run / simulation alone: %.2fx the wall time, %.2fx the cpu time (target: >= 1.5 M trace packets/s end to end)\n", rw / sw, rc / sc
}'
echo
echo "== memory flat in the run's length: the same run with 4x the messages"
measure "lumina run x4" "$TMP/lumina" run "$TMP/write-4qp-x4.yaml" -o "$OUT" -q
awk -v rr="$RUN_R" -v r4="$RSS" -v w4="$WALL" -v c4="$CPU" -v p="$PKTS" 'BEGIN {
	printf "%-50s %6.3f s wall %5.2f M trace packets/s  %6.3f s cpu  peak RSS %3.0f MB (x1: %.0f MB, ratio %.2f)\n", "lumina run, 400 messages per QP", w4, 4 * p / w4 / 1e6, c4, r4 / 1024, rr / 1024, r4 / rr
}'
