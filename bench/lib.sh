# The timing the bench scripts share (bench/run.sh, qps.sh, analyze.sh, export.sh source it): one way to time a
# command, one median. Sourced, not run; needs bash and /usr/bin/time (Debian package time).

# bench_median X...: the median of the numbers (of an even count, the mean of the middle two).
bench_median() {
	printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# bench_runs RUNS CMD...: runs CMD (its output discarded) RUNS times, one after the other. Per run: the wall
# and CPU (user + sys) seconds of the command and its children to the millisecond (bash's time) and its peak
# RSS in KB (/usr/bin/time), in the arrays B_WALLS, B_CPUS and B_RSSS; their medians in B_WALL, B_CPU, B_RSS,
# the largest peak RSS in B_RSS_MAX. A run that exits with a status not in BENCH_OK (default "0"; lumina
# analyze exits 1 when a check fails, so its benchmarks set BENCH_OK="0 1") stops the script: its stderr and
# status are printed, and the script exits 1. No figure is made of a run that failed.
bench_runs() {
	local runs=$1 i w u s r st tf bt ef
	shift
	local TIMEFORMAT='%3R %3U %3S'
	tf=$(mktemp) bt=$(mktemp) ef=$(mktemp)
	B_WALLS=() B_CPUS=() B_RSSS=()
	for ((i = 0; i < runs; i++)); do
		st=0
		{ time /usr/bin/time -o "$tf" -f "%M" "$@" > /dev/null 2> "$ef"; } 2> "$bt" || st=$?
		if [[ " ${BENCH_OK:-0} " != *" $st "* ]]; then
			cat "$ef" >&2
			echo "bench: $* exited with status $st (accepted: ${BENCH_OK:-0})" >&2
			rm -f "$tf" "$bt" "$ef"
			exit 1
		fi
		read -r r < <(tail -1 "$tf") # after "Command exited with non-zero status N", when it did
		read -r w u s < <(tail -1 "$bt")
		B_WALLS+=("$w")
		B_CPUS+=("$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')")
		B_RSSS+=("$r")
	done
	rm -f "$tf" "$bt" "$ef"
	B_WALL=$(bench_median "${B_WALLS[@]}")
	B_CPU=$(bench_median "${B_CPUS[@]}")
	B_RSS=$(bench_median "${B_RSSS[@]}")
	B_RSS_MAX=$(printf '%s\n' "${B_RSSS[@]}" | sort -g | tail -1)
}

# bench_cache FILE...: puts the files into the page cache the same way every time: their cached pages dropped
# (dd's nocache), then one sequential read. Every tool then reads memory, and the cache is in the state a
# sequential read leaves (large folios): a file still cached as its writer left it, in small writes, can cost
# the kernel twice the time per read (measured here: 0.15 s against 0.07 s of system time for the same 941 MB).
bench_cache() {
	local f
	for f in "$@"; do
		dd if="$f" iflag=nocache count=0 status=none
		cat "$f" > /dev/null
	done
}
