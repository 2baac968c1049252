#!/usr/bin/env bash
# ci.sh: the rxe-vm evidence job. Builds (or reuses) the Soft-RoCE guest, then runs
# examples/rxe-vm-write-drop.yaml on it through the Go testbed (testbed.RunRxeVM, test TestRxeVMWriteDrop):
# the switch drops (qp 1, psn 5, iter 1) of a WRITE, and the test asserts that rxe NAKs it and goes back N,
# that the trace passes the integrity check, that every ICRC is valid and that the analyzers report the NACK
# generation and reaction latencies. When the verbs generator built (libibverbs-dev on the host), the same drop
# runs again with it (examples/rxe-vm-verbs-write-drop.yaml, TestRxeVMVerbsWriteDrop): the switch configured
# through the control plane instead of learning, and the generator's MCTs in traffic.json; and once more through
# testbed remote (TestRxeVMRemoteWriteDrop): the guest in sshd mode, lumina's agents in the roles' namespaces
# over SSH, hostnic creating the rxe devices and reading their counters, the generator's QPNs and PSNs sent
# to the switch over the agent channel. Budget: under 10 minutes on 2 cores including a cold build.
#
#   scripts/rxe-vm/ci.sh [--keep DIR]     (DIR keeps the results directory)
#
# It skips (exit 0, "SKIP:" on stdout) only when this machine cannot run qemu at all: not root (the build needs
# debootstrap) with no guest built, or a qemu that cannot start. Everything else that fails, fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${LUMINA_RXE_CACHE:-$HOME/.cache/lumina/rxe-vm}
keep=""
[ "${1:-}" = --keep ] && keep=$2
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
t0=$(date +%s)

if [ "$(id -u)" != 0 ] && [ ! -f "$cache/base.cpio.zst" ]; then
	echo "SKIP: rxe-vm needs root to build the guest (debootstrap, apt-get) and none is cached in $cache"
	exit 0
fi
if ! command -v qemu-system-x86_64 >/dev/null && [ "$(id -u)" = 0 ]; then
	DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q --no-install-recommends qemu-system-x86 >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -q --no-install-recommends qemu-system-x86 >/dev/null 2>&1; } || true
fi
command -v qemu-system-x86_64 >/dev/null || { echo "SKIP: qemu-system-x86_64 is not available and cannot be installed"; exit 0; }
# A qemu that starts runs until the timeout stops it (124); one that cannot start exits at once.
qrc=0
timeout 5 qemu-system-x86_64 -accel tcg -machine none -nographic -nodefaults -display none -monitor none -S \
	</dev/null >/dev/null 2>&1 || qrc=$?
[ "$qrc" = 124 ] || { echo "SKIP: qemu-system-x86_64 cannot start on this machine (exit $qrc)"; exit 0; }

echo "ci.sh: building the guest (cached in $cache)"
timeout 480 "$here/build.sh" --cache "$cache"
tb=$(date +%s)
echo "ci.sh: build took $((tb - t0)) s"

out=${keep:-$(mktemp -d)}
cd "$repo"
tlog=$(mktemp)
tests='TestRxeVMWriteDrop$'
if [ -f "$cache/bin/lumina-verbs" ]; then
	tests='TestRxeVM(Verbs|Remote)?WriteDrop$'
else
	echo "ci.sh: WARNING: no verbs generator in $cache/bin (see build.sh's output): its tests (verbs, remote) do not run"
fi
set +e
LUMINA_RXE_NO_BUILD=1 LUMINA_RXE_CACHE=$cache LUMINA_RXE_OUT=$out \
	timeout 840 "$GO" test -tags rxevm -run "$tests" -count=1 -v -timeout 820s ./testbed/ >"$tlog" 2>&1
rc=$?
set -e
grep -E -- '--- |^(ok|FAIL|PASS)|packets,|NACK gen|MCTs|run.sh|guest: |rror|want' "$tlog" || true
echo "ci.sh: run took $(( $(date +%s) - tb )) s; total $(( $(date +%s) - t0 )) s; results in $out"
for a in "$out/perftest/analysis.json" "$out/verbs/analysis.json" "$out/remote/analysis.json"; do
	[ -f "$a" ] || continue
	python3 - "$a" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
print("ci.sh:", {"verbs": "verbs generator:", "remote": "testbed remote (verbs generator):"}.get(sys.argv[1].split("/")[-2], "perftest:"), "verdict", d["verdict"], "| integrity", d["integrity"]["ok"],
      "| checks", ", ".join(f'{c["analyzer"]}={c["ok"]}' for c in d["checks"]))
for r in d["retransmissions"]:
    print(f'ci.sh: retransmission qp {r["qp"]} psn {r["psn"]} trigger {r["trigger"]} '
          f'nack_generation_us {r["nack_generation_us"]} nack_reaction_us {r["nack_reaction_us"]}')
PY
done
[ "$rc" = 0 ] || { echo "ci.sh: FAILED; the whole test log:"; cat "$tlog"; }
rm -f "$tlog"
[ -z "$keep" ] && rm -rf "$out"
exit "$rc"
