#!/usr/bin/env bash
# build.sh: builds the Soft-RoCE (rdma_rxe) guest that the rxe-vm testbed boots under qemu, from Debian
# packages, into a cache directory. Idempotent: each step leaves a stamp with the inputs it was built from and
# is skipped when they have not changed.
#
#   scripts/rxe-vm/build.sh [--cache DIR] [--no-verbs] [--force]
#
# Outputs (in the cache directory, default ~/.cache/lumina/rxe-vm or $LUMINA_RXE_CACHE):
#   vmlinuz            the guest kernel (a Debian kernel whose rxe has per-network-namespace sockets)
#   base.cpio.zst      root file system + rxe modules (rdma-core, perftest, iproute2, ethtool, kmod, tcpdump,
#                      openssh-server for the remote testbed's sshd mode)
#   bin/lumina         our switch and dumper, static (CGO_ENABLED=0)
#   bin/lumina-verbs   the verbs traffic generator (cgo, libibverbs), unless --no-verbs or it cannot build
#
# Why a newer kernel: bookworm's 6.1 rxe opens its UDP socket in the initial namespace only, so two rxe
# devices in two namespaces of one guest cannot talk. The kernel comes from
# $RXE_KERNEL_SUITE (default trixie-backports) on the mirror the host's apt already uses.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${LUMINA_RXE_CACHE:-$HOME/.cache/lumina/rxe-vm}
kernel_suite=${RXE_KERNEL_SUITE:-trixie-backports}
verbs=1
force=0
while [ $# -gt 0 ]; do
	case $1 in
	--cache) cache=$2; shift 2 ;;
	--no-verbs) verbs=0; shift ;;
	--force) force=1; shift ;;
	-h|--help) sed -n '2,16p' "$0"; exit 0 ;;
	*) echo "build.sh: unknown argument $1 (expected --cache DIR, --no-verbs, --force)" >&2; exit 2 ;;
	esac
done
mkdir -p "$cache"
if [ "$verbs" = 1 ] && [ ! -d "$repo/verbs/cmd/lumina-verbs" ]; then
	verbs=0
fi
cache=$(cd "$cache" && pwd)
log=$cache/build.log
: >"$log"

t0=$(date +%s%N)
# secs T0: seconds since T0 (nanoseconds from date +%s%N), one decimal.
secs() { local d=$(( ($(date +%s%N) - $1) / 100000000 )); echo "$((d / 10)).$((d % 10))"; }
# step NAME SECONDS CMD...: runs one step under a timeout, its output in build.log; names the step on failure.
step() {
	local name=$1 limit=$2; shift 2
	local s rc=0; s=$(date +%s%N)
	echo "== $name" >>"$log"
	# The step runs in a child bash (timeout cannot run a function) that gets our functions and variables.
	timeout --kill-after=10 "$limit" bash -c "$(declare -f); $(declare -p $vars 2>/dev/null); set -euo pipefail; $*" \
		>>"$log" 2>&1 || rc=$?
	if [ "$rc" != 0 ]; then
		echo "build.sh: step '$name' failed (exit $rc; 124 = timed out after ${limit}s); last lines of $log:" >&2
		tail -n 25 "$log" >&2
		exit 1
	fi
	printf 'build.sh: %-28s %6ss\n' "$name" "$(secs "$s")"
}
vars="cache log force verbs repo kernel_suite MIRROR SUITE apt_dir APT abi kver moddir modules rootfs_pkgs GO"
# fresh STAMP INPUTS: true when STAMP exists and holds INPUTS (the step can be skipped).
fresh() { [ "$force" = 0 ] && [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "build.sh: $1 needs root (debootstrap, apt-get); run it as root or with sudo" >&2
		exit 1
	fi
}

# --- host packages -----------------------------------------------------------------------------------------
host_pkgs() {
	local missing=()
	command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
	command -v debootstrap >/dev/null || missing+=(debootstrap)
	command -v cpio >/dev/null || missing+=(cpio)
	command -v zstd >/dev/null || missing+=(zstd)
	command -v depmod >/dev/null || missing+=(kmod)
	if [ "$verbs" = 1 ]; then
		[ -f /usr/include/infiniband/verbs.h ] || missing+=(libibverbs-dev)
		command -v gcc >/dev/null || missing+=(gcc)
	fi
	[ ${#missing[@]} = 0 ] && return 0
	need_root "installing ${missing[*]}"
	echo "installing host packages: ${missing[*]}"
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}
step "host packages" 600 host_pkgs

# --- the Debian mirror, from the host's apt configuration ----------------------------------------------------
mirror() {
	local m=""
	# deb822 .sources: the first URIs of an entry whose suites are not -security.
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		m=$(awk 'BEGIN{RS=""} /Types:[^\n]*deb/ && !/Suites:[^\n]*-security/ && /URIs:[^\n]*\/debian/ {
			match($0, /URIs:[ \t]*[^ \t\n]+/); u=substr($0, RSTART, RLENGTH); sub(/URIs:[ \t]*/, "", u); print u; exit }' "$f")
		[ -n "$m" ] && break
	done
	if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
		m=$(awk '$1=="deb" { for (i=2;i<=NF;i++) if ($i !~ /^\[/ && $i !~ /\]$/ && $i ~ /^(https?|file):/) { if ($(i+1) !~ /-security/) { print $i; exit } } }' /etc/apt/sources.list)
	fi
	echo "$m"
}
MIRROR=${RXE_MIRROR:-$(mirror)}
if [ -z "$MIRROR" ]; then
	echo "build.sh: no Debian mirror found in /etc/apt/sources.list(.d); set RXE_MIRROR=URL" >&2
	exit 1
fi
SUITE=${RXE_ROOTFS_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}
echo "build.sh: mirror $MIRROR, root file system $SUITE, kernel from $kernel_suite, cache $cache"

# --- kernel ---------------------------------------------------------------------------------------------------
apt_dir=$cache/apt
APT=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o "Dir::Cache::Archives=$apt_dir/cache/archives"
	-o Dir::State::status=/dev/null -o APT::Architecture=amd64 -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
kernel_index() {
	# A private apt configuration: the host's sources stay as they are.
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $MIRROR $kernel_suite main" >"$apt_dir/sources.list"
	apt-get "${APT[@]}" update -q
}
step "kernel package index" 180 kernel_index
# The ABI version comes from the metapackage's dependency, never hard-coded: the archive drops old ABIs.
kver=$(apt-cache "${APT[@]}" madison linux-image-amd64 | awk -v s="$kernel_suite" '$0 ~ s {print $3; exit}')
abi=$(apt-cache "${APT[@]}" depends "linux-image-amd64=$kver" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
abi=${abi#linux-image-}
if [ -z "$abi" ]; then
	echo "build.sh: step 'kernel version' failed: linux-image-amd64 ($kver) in $kernel_suite names no linux-image-ABI dependency" >&2
	exit 1
fi
kernel_fetch() {
	local pkgs=()
	# Newer packaging splits the kernel into linux-binary-ABI (vmlinuz) and linux-modules-ABI; older keeps both
	# in linux-image-ABI.
	if apt-cache "${APT[@]}" show "linux-binary-$abi" >/dev/null 2>&1; then
		pkgs=("linux-binary-$abi" "linux-modules-$abi")
	else
		pkgs=("linux-image-$abi")
	fi
	rm -rf "$cache/kernel.tmp" && mkdir -p "$cache/kernel.tmp"
	(cd "$apt_dir/cache/archives" && apt-get "${APT[@]}" download "${pkgs[@]}")
	for p in "${pkgs[@]}"; do
		dpkg -x "$(ls -t "$apt_dir"/cache/archives/"${p}"_*.deb | head -1)" "$cache/kernel.tmp"
	done
	local vm
	vm=$(find "$cache/kernel.tmp" -name 'vmlinuz*' -type f | head -1)
	[ -n "$vm" ] || { echo "no vmlinuz in ${pkgs[*]}"; return 1; }
	local moddir
	moddir=$(find "$cache/kernel.tmp" -type d -path '*/modules/*' -name "$abi" | head -1)
	[ -n "$moddir" ] || { echo "no modules directory for $abi in ${pkgs[*]}"; return 1; }
	find "$moddir" -name 'rdma_rxe.ko*' | grep -q . || { echo "the kernel $abi has no rdma_rxe module"; return 1; }
	cp "$vm" "$cache/vmlinuz"
	rm -rf "$cache/kernel" && mv "$cache/kernel.tmp" "$cache/kernel"
	rm -f "$apt_dir"/cache/archives/*.deb
}
if fresh "$cache/kernel.stamp" "$abi $kver"; then
	echo "build.sh: kernel $abi ($kver) cached"
else
	step "kernel $abi download" 600 kernel_fetch
	echo "$abi $kver" >"$cache/kernel.stamp"
fi
moddir=$(find "$cache/kernel" -type d -path '*/modules/*' -name "$abi" | head -1)

# --- root file system -----------------------------------------------------------------------------------------
rootfs_pkgs=rdma-core,ibverbs-providers,ibverbs-utils,libibverbs1,perftest,iproute2,ethtool,kmod,tcpdump,procps,iputils-ping,openssh-server
rootfs() {
	need_root "debootstrap"
	rm -rf "$cache/rootfs.tmp"
	debootstrap --variant=minbase --include="$rootfs_pkgs" "$SUITE" "$cache/rootfs.tmp" "$MIRROR"
	rm -rf "$cache/rootfs" && mv "$cache/rootfs.tmp" "$cache/rootfs"
}
if fresh "$cache/rootfs.stamp" "$SUITE $MIRROR $rootfs_pkgs"; then
	echo "build.sh: root file system cached"
else
	step "debootstrap $SUITE" 900 rootfs
	echo "$SUITE $MIRROR $rootfs_pkgs" >"$cache/rootfs.stamp"
	rm -f "$cache/base.stamp"
fi

# --- initramfs: root file system + the modules rxe and the testbed need ----------------------------------------
modules="rdma_rxe ib_uverbs rdma_ucm veth virtio_blk virtio_pci virtio_net sch_netem af_packet"
base() {
	local st=$cache/stage
	rm -rf "$st" && mkdir -p "$st"
	cp -a "$cache/rootfs/." "$st/"
	# What a guest that lives for a minute does not need.
	rm -rf "$st"/usr/share/{doc,man,info,locale,i18n,zoneinfo} "$st"/var/cache/apt/* "$st"/var/lib/apt/lists/* \
		"$st"/usr/lib/udev/hwdb.* "$st"/lib/udev/hwdb.* "$st"/usr/lib/modules "$st"/lib/modules 2>/dev/null || true
	mkdir -p "$st/lib/modules/$abi"
	cp "$moddir"/modules.* "$st/lib/modules/$abi/" 2>/dev/null || true
	# Resolve dependencies against the full tree, copy only what the modules need.
	local base_dir=$cache/kernel
	[ -d "$cache/kernel/lib/modules/$abi" ] || base_dir=$cache/kernel/usr
	depmod -b "$base_dir" "$abi"
	for m in $modules; do
		# Built-in ones (virtio_pci, af_packet in recent kernels) are "not found": nothing to copy.
		modprobe -d "$base_dir" -S "$abi" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}' || true
	done | sort -u | while read -r ko; do
		rel=${ko#"$base_dir"/lib/modules/"$abi"/}
		mkdir -p "$st/lib/modules/$abi/$(dirname "$rel")"
		cp "$ko" "$st/lib/modules/$abi/$rel"
	done
	depmod -b "$st" "$abi"
	find "$st/lib/modules/$abi" -name '*.ko*' | wc -l >"$cache/modules.count"
	(cd "$st" && find . | cpio -o -H newc --quiet) | zstd -3 -T0 -q -f -o "$cache/base.cpio.zst"
	rm -rf "$st"
}
if fresh "$cache/base.stamp" "$abi $modules $(cat "$cache/rootfs.stamp")"; then
	echo "build.sh: base initramfs cached"
else
	step "base initramfs" 300 base
	echo "$abi $modules $(cat "$cache/rootfs.stamp")" >"$cache/base.stamp"
	echo "build.sh: base initramfs $(du -h "$cache/base.cpio.zst" | cut -f1), $(cat "$cache/modules.count") modules"
fi

# --- our binaries ---------------------------------------------------------------------------------------------
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
mkdir -p "$cache/bin"
go_lumina() {
	cd "$repo" && CGO_ENABLED=0 "$GO" build -trimpath -o "$cache/bin/lumina.tmp" ./cmd/lumina &&
		mv "$cache/bin/lumina.tmp" "$cache/bin/lumina"
}
go_verbs() {
	cd "$repo" && CGO_ENABLED=1 "$GO" build -tags verbs -trimpath -o "$cache/bin/lumina-verbs.tmp" ./verbs/cmd/lumina-verbs &&
		mv "$cache/bin/lumina-verbs.tmp" "$cache/bin/lumina-verbs"
}
# go build is itself incremental: these steps are cheap when nothing changed.
step "go build lumina (static)" 600 go_lumina
if [ "$verbs" = 1 ]; then
	if [ "$SUITE" != "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" ]; then
		echo "build.sh: the guest is $SUITE but the host is not: the cgo generator would not match its libibverbs; skipped" >&2
		rm -f "$cache/bin/lumina-verbs"
	elif ! (step "go build lumina-verbs (cgo)" 600 go_verbs); then
		# perftest with the switch in learning mode still runs: say so, loudly, and go on.
		echo "build.sh: WARNING: the verbs generator did not build; the testbed falls back to perftest" >&2
		rm -f "$cache/bin/lumina-verbs"
	fi
else
	rm -f "$cache/bin/lumina-verbs"
fi
echo "build.sh: done in $(secs "$t0")s: $cache"
