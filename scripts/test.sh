#!/usr/bin/env bash
# The project's test command (README "Set up"): installs what the tests need, then runs the formatting,
# vet and staticcheck gates, the whole test suite, and bounded fuzzing of the decoders and readers.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH)/bin"
FUZZTIME="${FUZZTIME:-15s}"

step() { printf '\n== %s\n' "$*"; }

# Debian packages the tests use: tshark (golden decoding tests compare every header field with it), ethtool
# (the netns testbed turns checksum offloads off on its veths; the netns tests need it), openssh-server (the
# remote testbed's tests run a real sshd in each host namespace), chromium (the HTML report's tests render it
# in headless Chromium), time (/usr/bin/time: the bench scripts' peak RSS, bench/lib.sh, tested in bench/).
need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
[ -x /usr/sbin/ethtool ] || command -v ethtool >/dev/null 2>&1 || need+=(ethtool)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -x /usr/bin/time ] || need+=(time)
if [ ${#need[@]} -gt 0 ]; then
	step "installing ${need[*]}"
	if [ "$(id -u)" = 0 ]; then
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >/dev/null
		echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
		apt-get install -y -qq "${need[@]}" >/dev/null
	else
		echo "${need[*]} missing and not root: the tests that use them will fail" >&2
	fi
fi

if ! command -v staticcheck >/dev/null 2>&1; then
	step "installing staticcheck"
	GOFLAGS= go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "not gofmt'ed:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "staticcheck"
staticcheck ./...

step "go test"
go test -count=1 ./...

step "fuzz (bounded: $FUZZTIME each)"
# Every Fuzz target of the repository, each for a bounded time: hostile bytes must never panic.
# Go before 1.27 can fail a -fuzztime run with a bare "context deadline exceeded" when the deadline races a
# worker's last call (golang/go#75804): no input failed. Such a run counts only if its corpus, replayed as a
# plain test, passes; a run that wrote a failing input, panicked or failed any other way fails the job.
fuzzlog=$(mktemp)
for file in $(grep -rl --include='*_test.go' '^func Fuzz' .); do
	for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/func //'); do
		pkg="./$(dirname "${file#./}")"
		echo "-- $target ($pkg)"
		if go test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 5s "$pkg" 2>&1 | tee "$fuzzlog"; then
			continue
		fi
		if grep -q 'context deadline exceeded' "$fuzzlog" && ! grep -qE 'Failing input written|panic:|hung or terminated|_test\.go:[0-9]+:' "$fuzzlog"; then
			echo "-- $target: the fuzz deadline race (golang/go#75804), no failing input; replaying its corpus"
			go test -count=1 -run "^$target\$" "$pkg"
			continue
		fi
		echo "-- $target failed" >&2
		exit 1
	done
done
rm -f "$fuzzlog"
step "Soft-RoCE in a VM (rxe-vm testbed: real rdma_rxe under qemu, our switch and dumpers in the middle)"
# Builds (or reuses the cached) Debian guest, runs examples/rxe-vm-write-drop.yaml and checks the NAK, the
# go-back-N retransmission, the integrity check and every ICRC; with the verbs generator, again with it and
# through testbed remote (the guest's sshd mode, hostnic). Set SKIP_RXE_VM=1 to leave it out locally.
if [ -z "${SKIP_RXE_VM:-}" ]; then
	timeout 1200 bash scripts/rxe-vm/ci.sh
fi
echo "all tests passed"
