#!/usr/bin/env bash
# run.sh: boots the rxe-vm guest under qemu (TCG) with a job and brings its results back.
#
#   scripts/rxe-vm/run.sh --job JOBDIR --out OUTDIR [--cache DIR] [--timeout SECONDS] [--smp N] [--mem MB] [--ssh-port PORT]
#
# JOBDIR holds job.env (what to run: see guest-init.sh) and scenario.yaml (the events the switch injects);
# testbed/rxevm.go writes both from a scenario, and `lumina run` on a scenario with `testbed: rxe-vm` calls
# this script. The guest is the cache's base initramfs plus a small uncompressed archive appended to it (the
# kernel unpacks both): our /init, our binaries and the job, so that changing them never rebuilds the base.
# The results come back as a tar archive written onto a sparse virtio disk.
# --ssh-port PORT (a job with MODE=sshd) gives the guest a network (qemu user networking) whose sshd is
# forwarded to 127.0.0.1:PORT: the remote testbed's jump host into the roles' namespaces (guest-init.sh).
#
# Exit status: 0 the guest ran the job; 1 a step failed (named on stderr); 2 usage or a missing build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${LUMINA_RXE_CACHE:-$HOME/.cache/lumina/rxe-vm}
job="" out="" limit=${RXE_VM_TIMEOUT:-420} smp=${RXE_VM_SMP:-2} mem=${RXE_VM_MEM:-1536} sshport=""
while [ $# -gt 0 ]; do
	case $1 in
	--job) job=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--cache) cache=$2; shift 2 ;;
	--timeout) limit=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--ssh-port) sshport=$2; shift 2 ;;
	-h|--help) sed -n '2,13p' "$0"; exit 0 ;;
	*) echo "run.sh: unknown argument $1 (expected --job DIR --out DIR [--cache DIR] [--timeout S] [--smp N] [--mem MB] [--ssh-port PORT])" >&2; exit 2 ;;
	esac
done
[ -n "$job" ] && [ -n "$out" ] || { echo "run.sh: --job DIR and --out DIR are required" >&2; exit 2; }
[ -f "$job/job.env" ] || { echo "run.sh: $job/job.env is missing" >&2; exit 2; }
for f in vmlinuz base.cpio.zst bin/lumina; do
	[ -f "$cache/$f" ] || { echo "run.sh: $cache/$f is missing: run scripts/rxe-vm/build.sh first" >&2; exit 2; }
done
command -v qemu-system-x86_64 >/dev/null || { echo "run.sh: qemu-system-x86_64 is not installed (build.sh installs it)" >&2; exit 2; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
# A previous run's results would mix with this one's: clear them, but never a directory we did not fill.
if [ -n "$(ls -A "$out")" ]; then
	[ -f "$out/guest.log" ] || [ -f "$out/console.log" ] || {
		echo "run.sh: $out is not empty and holds no previous rxe-vm results; give an empty or new directory" >&2
		exit 2
	}
	rm -rf "${out:?}"/*
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/lumina-rxe-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT

# step NAME SECONDS CMD...: one step under a timeout, named when it fails.
step() {
	local name=$1 lim=$2 rc=0; shift 2
	timeout --kill-after=10 "$lim" "$@" || rc=$?
	if [ "$rc" != 0 ]; then
		echo "run.sh: step '$name' failed (exit $rc; 124 = timed out after ${lim}s)" >&2
		exit 1
	fi
}

# The overlay archive: /init, /lumina/bin, /lumina/job.
ov=$work/overlay
mkdir -p "$ov/lumina/bin" "$ov/lumina/job"
install -m 0755 "$here/guest-init.sh" "$ov/init"
install -m 0755 "$cache/bin/lumina" "$ov/lumina/bin/lumina"
[ -f "$cache/bin/lumina-verbs" ] && install -m 0755 "$cache/bin/lumina-verbs" "$ov/lumina/bin/lumina-verbs"
cp -r "$job"/. "$ov/lumina/job/"
step "overlay archive" 60 bash -c "cd '$ov' && find . | cpio -o -H newc --quiet >'$work/overlay.cpio'"
# Uncompressed first: the kernel finds the next archive after a cpio trailer, but not after a zstd frame.
cat "$work/overlay.cpio" "$cache/base.cpio.zst" >"$work/boot.img"
# A sparse disk: the guest writes its tar archive from sector 0.
truncate -s "${RXE_VM_DISK:-2G}" "$work/xfer.img"

# Multi-threaded TCG sometimes oopses while the kernel patches its own code at boot (int3 in a patched
# instruction, seen in about one boot in five here): such a boot dies within seconds, before the job starts,
# and is retried.
net=()
if [ -n "$sshport" ]; then
	net=(-netdev "user,id=n0,net=10.0.2.0/24,hostfwd=tcp:127.0.0.1:$sshport-10.0.2.15:22" -device virtio-net-pci,netdev=n0)
fi
boots=${RXE_VM_BOOT_TRIES:-3}
for try in $(seq 1 "$boots"); do
	echo "run.sh: booting the guest (TCG, $smp vCPUs, $mem MB; at most ${limit}s; try $try of $boots)" >&2
	s=$(date +%s%N)
	rc=0
	timeout --kill-after=10 "$limit" qemu-system-x86_64 -accel tcg -cpu max -smp "$smp" -m "$mem" \
		-nographic -nodefaults -no-reboot -monitor none -serial "file:$out/console.log" \
		-kernel "$cache/vmlinuz" -initrd "$work/boot.img" \
		-drive "file=$work/xfer.img,format=raw,if=virtio" ${net[@]+"${net[@]}"} \
		-append "console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init" || rc=$?
	echo "run.sh: guest ran $(( ($(date +%s%N) - s) / 1000000 )) ms (qemu exit $rc)" >&2
	if [ "$rc" = 0 ] && ! grep -q "guest: .*kernel" "$out/console.log" && grep -q "Kernel panic" "$out/console.log"; then
		cp "$out/console.log" "$out/console-panic-$try.log"
		echo "run.sh: the guest kernel panicked while booting ($(grep -m1 -o 'Oops: [^[]*\|Kernel panic - [^[]*' "$out/console.log")); retrying" >&2
		continue
	fi
	break
done
if [ "$rc" != 0 ]; then
	echo "run.sh: step 'guest' failed: qemu exit $rc (124 = timed out after ${limit}s); last console lines:" >&2
	tail -n 20 "$out/console.log" >&2 || true
	exit 1
fi
step "unpacking results" 120 tar --no-same-owner -C "$out" -xf "$work/xfer.img"
if [ ! -f "$out/guest.log" ]; then
	echo "run.sh: step 'results' failed: the guest wrote no results; last console lines:" >&2
	tail -n 20 "$out/console.log" >&2 || true
	exit 1
fi
if [ -f "$out/failed" ]; then
	echo "run.sh: step 'guest $(cat "$out/failed")' failed; see $out/guest.log" >&2
	exit 1
fi
