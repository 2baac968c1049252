#!/bin/bash
# guest-init.sh: PID 1 of the rxe-vm guest. It lays out the Lumina testbed in network namespaces
#
#   req (rxe on eth0) -- sw-req [sw: lumina switch] sw-resp -- resp (rxe on eth0)
#                               sw-dI -- dI (lumina dump), one per dumper
#
# runs the job's traffic (perftest with the switch learning connections, or lumina-verbs reporting them to the
# switch's control plane over a separate req<->sw link), stops the switch and dumpers, and writes the results
# as a tar archive onto the first virtio disk, then powers off. Every step is under a timeout; a failing step
# is named in /out/guest.log and in the file "failed", and the results gathered so far still come back.
#
# The job (/lumina/job/job.env) is written by the host (testbed/rxevm.go): see the variables used below.
export PATH=/lumina/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /run /tmp /run/netns
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mkdir -p /run/netns
OUT=/tmp/out
mkdir -p $OUT/dump
exec >>$OUT/guest.log 2>&1
tail -n +1 -f $OUT/guest.log >/dev/console &

finish() {
	echo "guest: $(cut -d' ' -f1 /proc/uptime)s packing results"
	sync
	tar -C $OUT -cf /dev/vda . 2>&1 || echo "guest: writing results to /dev/vda failed"
	sync
	echo "guest: done"
	echo o >/proc/sysrq-trigger
	sleep 30
}
fail() {
	echo "guest: step '$1' failed${2:+: $2}"
	echo "$1${2:+: $2}" >$OUT/failed
	finish
}
log() { echo "guest: $(cut -d' ' -f1 /proc/uptime)s $*"; }
# run NAME SECONDS CMD...: one step under a timeout.
run() {
	local name=$1 limit=$2; shift 2
	timeout -k 5 "$limit" "$@" || fail "$name" "exit $? from: $* (124 = timed out after ${limit}s)"
}

[ -f /lumina/job/job.env ] || fail "job" "no /lumina/job/job.env in the initramfs"
. /lumina/job/job.env
MODE=${MODE:-job}
if [ "$MODE" = sshd ]; then
	: "${DUMPERS:=1}" "${VETH_MTU:=1500}" "${SSHD_TIMEOUT:=600}"
	log "kernel $(uname -r), $(nproc) CPUs, mode sshd: the roles' namespaces wait for lumina's agents over SSH (at most ${SSHD_TIMEOUT}s)"
else
	: "${REQ_IPS:?}" "${RESP_IPS:?}" "${TOOL:?}" "${DUMPERS:=1}" "${VETH_MTU:=1500}" "${TRAFFIC_TIMEOUT:=120}"
	log "kernel $(uname -r), $(nproc) CPUs, job: tool=$TOOL verb=$VERB qps=$QPS msgs=$MSGS size=$SIZE mtu=$MTU dumpers=$DUMPERS"
fi

echo 1 >/proc/sys/kernel/sysrq
run "modules" 60 modprobe -a rdma_rxe ib_uverbs rdma_ucm veth virtio_blk
modprobe -q af_packet 2>/dev/null

# --- namespaces and links (as live.Testbed lays them out) ---
nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
for ns in req sw resp $(seq -f 'd%g' 0 $((DUMPERS - 1))); do
	run "netns $ns" 10 ip netns add "$ns"
	nsx "$ns" sh -c 'echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6'
	ip -n "$ns" link set lo up
done
veth() { # NS1 IF1 NS2 IF2
	run "veth $2-$4" 10 ip link add "$2" netns "$1" mtu "$VETH_MTU" type veth peer name "$4" netns "$3" mtu "$VETH_MTU"
	for e in "$1 $2" "$3 $4"; do
		set -- $e
		ip -n "$1" link set "$2" up
		# AF_PACKET would see partial checksums and the switch would forward them unfinished.
		nsx "$1" ethtool -K "$2" tx off rx off tso off gso off gro off >/dev/null 2>&1
	done
}
veth req eth0 sw sw-req
veth resp eth0 sw sw-resp
dumpifs=()
for i in $(seq 0 $((DUMPERS - 1))); do
	veth "d$i" eth0 sw "sw-d$i"
	dumpifs+=(--dumper "sw-d$i")
done
if [ "$MODE" = sshd ]; then
	# sshd mode (testbed remote against this guest): the same cabling, nothing configured on the RNIC side.
	# Each role's namespace runs its own sshd on a management link from the initial namespace (10.99.K.2,
	# K = 1 req, 2 resp, 3 sw, 4.. dumpers), so that an agent started over SSH lives in its role's namespace
	# with nothing to select; the initial namespace's sshd (reached from the host through qemu's user network,
	# hostfwd to port 22) is the jump host. lumina's agents set up rxe (hostnic), the switch and the dumpers.
	# The host keys and the authorized key come with the job (/lumina/job/ssh: host_key, authorized_keys).
	run "modules (sshd)" 30 modprobe -a virtio_net
	[ -f /lumina/job/ssh/host_key ] && [ -f /lumina/job/ssh/authorized_keys ] ||
		fail "sshd" "no /lumina/job/ssh/host_key or authorized_keys in the job"
	mkdir -p /run/sshd /root/.ssh /etc/lumina-ssh
	chmod 700 /root/.ssh /etc/lumina-ssh
	install -m 0600 /lumina/job/ssh/host_key /etc/lumina-ssh/host_key
	install -m 0600 /lumina/job/ssh/authorized_keys /root/.ssh/authorized_keys
	ssh_opts=(-h /etc/lumina-ssh/host_key -o PermitRootLogin=prohibit-password -o PasswordAuthentication=no
		-o UsePAM=no -o AllowTcpForwarding=yes -o PrintMotd=no -o MaxStartups=64 -o MaxSessions=64)
	nic=$(ls /sys/class/net | grep -v -x -e lo -e 'sw-.*' | head -1)
	[ -n "$nic" ] || fail "sshd" "no network interface from qemu (virtio-net)"
	ip link set "$nic" up
	ip addr add 10.0.2.15/24 dev "$nic"
	ip route add default via 10.0.2.2
	k=1
	for ns in req resp sw $(seq -f 'd%g' 0 $((DUMPERS - 1))); do
		run "management link $ns" 10 ip link add "m-$ns" type veth peer name mgmt netns "$ns"
		ip addr add "10.99.$k.1/24" dev "m-$ns"
		ip link set "m-$ns" up
		ip -n "$ns" addr add "10.99.$k.2/24" dev mgmt
		ip -n "$ns" link set mgmt up
		run "sshd $ns" 10 ip netns exec "$ns" /usr/sbin/sshd "${ssh_opts[@]}" -o ListenAddress="10.99.$k.2" \
			-o PidFile="/run/sshd-$ns.pid"
		k=$((k + 1))
	done
	run "sshd" 10 /usr/sbin/sshd "${ssh_opts[@]}" -o ListenAddress=0.0.0.0 -o PidFile=/run/sshd.pid
	log "sshd up: jump host $nic 10.0.2.15:22; req 10.99.1.2, resp 10.99.2.2, sw 10.99.3.2, dumpers 10.99.4.2.."
	# The host ends the session by creating /run/lumina-stop (over SSH), or the timeout does.
	for _ in $(seq 1 $((SSHD_TIMEOUT * 2))); do
		[ -e /run/lumina-stop ] && break
		sleep 0.5
	done
	[ -e /run/lumina-stop ] || log "sshd mode: no stop after ${SSHD_TIMEOUT}s"
	dmesg >$OUT/dmesg.txt
	finish
fi
for a in $REQ_IPS; do ip -n req addr add "$a" dev eth0; done
for a in $RESP_IPS; do ip -n resp addr add "$a" dev eth0; done
# The control plane (generator -> switch) has its own link so that it never crosses the switch.
veth req ctl sw ctl
ip -n req addr add 192.168.77.1/30 dev ctl
ip -n sw addr add 192.168.77.2/30 dev ctl

# --- Soft-RoCE on both ends ---
run "rxe requester" 20 ip netns exec req rdma link add rxereq type rxe netdev eth0
run "rxe responder" 20 ip netns exec resp rdma link add rxeresp type rxe netdev eth0
# gid_index DEV IP: the RoCE v2 GID of an IPv4 address (::ffff:a.b.c.d).
gid_index() {
	local dev=$1 ip=$2 want d
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${ip//./ })
	for try in $(seq 1 50); do
		for g in /sys/class/infiniband/$dev/ports/1/gids/*; do
			d=${g##*/}
			if [ "$(cat "$g" 2>/dev/null)" = "$want" ] &&
				[ "$(cat /sys/class/infiniband/$dev/ports/1/gid_attrs/types/$d 2>/dev/null)" = "RoCE v2" ]; then
				echo "$d"
				return 0
			fi
		done
		sleep 0.2
	done
	return 1
}
REQ_IP=${REQ_IPS%%/*}
RESP_IP=${RESP_IPS%%/*}
REQ_GID=$(gid_index rxereq "$REQ_IP") || fail "gid" "no RoCE v2 GID for $REQ_IP on rxereq"
RESP_GID=$(gid_index rxeresp "$RESP_IP") || fail "gid" "no RoCE v2 GID for $RESP_IP on rxeresp"
log "rxereq GID index $REQ_GID ($REQ_IP), rxeresp GID index $RESP_GID ($RESP_IP)"
{
	echo "req_gid_index $REQ_GID"
	echo "resp_gid_index $RESP_GID"
	echo "kernel $(uname -r)"
	echo "active_mtu $(cat /sys/class/infiniband/rxereq/ports/1/active_mtu 2>/dev/null)"
} >$OUT/testbed.txt

counters() { # PHASE
	for dev in rxereq rxeresp; do
		for c in /sys/class/infiniband/$dev/ports/1/hw_counters/*; do
			echo "$dev ${c##*/} $(cat "$c")"
		done
	done >$OUT/counters-$1.txt
	# The same counters as rdma statistic and the netdevs' ethtool -S print them (raw, for the curious and as
	# real samples of those formats: hostnic/testdata).
	for dev in rxereq rxeresp; do
		rdma statistic show link $dev/1
	done >$OUT/rdma-statistic-$1.txt 2>&1
	for ns in req resp; do
		ip netns exec $ns ethtool -S eth0 >$OUT/ethtool-S-$ns-$1.txt 2>&1
	done
}

# --- switch and dumpers ---
for i in $(seq 0 $((DUMPERS - 1))); do
	ip netns exec "d$i" lumina dump --iface eth0 --out $OUT/dump/dumper-$i.pcap --snaplen 65535 --workers 1 \
		${REWRITE_PORT:+--rewrite-port $REWRITE_PORT} >$OUT/dumper-$i.json 2>$OUT/dumper-$i.log &
	echo $! >>/tmp/dumper.pids
done
swmode=(--learn)
[ "$TOOL" = verbs ] && swmode=(--control 192.168.77.2:7700)
ip netns exec sw lumina switch --in sw-req --out sw-resp "${dumpifs[@]}" --events /lumina/job/scenario.yaml "${swmode[@]}" \
	--status $OUT/switch-status.json >$OUT/switch.log 2>&1 &
swpid=$!
for try in $(seq 1 100); do
	[ -s $OUT/switch-status.json ] && break
	kill -0 $swpid 2>/dev/null || fail "switch" "lumina switch exited: $(tail -3 $OUT/switch.log)"
	sleep 0.2
done
[ -s $OUT/switch-status.json ] || fail "switch" "no status after 20 s: $(tail -3 $OUT/switch.log)"
log "switch and $DUMPERS dumper(s) running"
run "ping through the switch" 30 ip netns exec req ping -c 1 -W 10 "$RESP_IP" >/dev/null

counters start
# --- traffic ---
t_start=$(date +%s%N)
case $TOOL in
perftest)
	# perftest: the server on the responder, the client (requester) retries until the server listens.
	pf=(-d rxeresp -x "$RESP_GID" -s "$SIZE" -n "$MSGS" -q "$QPS" -m "$MTU" -F --report_gbits -p 18515 ${PERFTEST_ARGS:-})
	timeout -k 5 "$TRAFFIC_TIMEOUT" ip netns exec resp "$PERFTEST" "${pf[@]}" >$OUT/perftest-server.txt 2>&1 &
	srv=$!
	pf[1]=rxereq
	pf[3]=$REQ_GID
	ok=0
	for try in $(seq 1 40); do
		sleep 0.5
		if timeout -k 5 "$TRAFFIC_TIMEOUT" ip netns exec req "$PERFTEST" "${pf[@]}" "$RESP_IP" >$OUT/perftest-client.txt 2>&1; then
			ok=1
			break
		fi
		grep -q "Couldn't connect\|Unable to open\|Failed to connect" $OUT/perftest-client.txt || break
	done
	wait $srv
	src=$?
	echo "client_ok $ok server_exit $src" >$OUT/traffic-status.txt
	[ $ok = 1 ] || log "perftest client failed: $(tail -3 $OUT/perftest-client.txt)"
	;;
verbs)
	timeout -k 5 "$TRAFFIC_TIMEOUT" ip netns exec resp lumina-verbs server --device rxeresp --gid-index "$RESP_GID" \
		--listen "$RESP_IP:18515" --timeout "${TRAFFIC_TIMEOUT}s" >$OUT/verbs-server.json 2>$OUT/verbs-server.log &
	srv=$!
	timeout -k 5 "$TRAFFIC_TIMEOUT" ip netns exec req lumina-verbs client --device rxereq --gid-index "$REQ_GID" \
		--connect "$RESP_IP:18515" --job /lumina/job/scenario.yaml --control 192.168.77.2:7700 \
		--timeout "$((TRAFFIC_TIMEOUT - 5))s" >$OUT/verbs-client.json 2>$OUT/verbs-client.log
	cl=$?
	wait $srv
	src=$?
	echo "client_exit $cl server_exit $src" >$OUT/traffic-status.txt
	[ $cl = 0 ] || log "lumina-verbs client failed: $(tail -3 $OUT/verbs-client.log)"
	;;
*) fail "traffic" "unknown TOOL=$TOOL" ;;
esac
echo "traffic_ns $(($(date +%s%N) - t_start))" >>$OUT/traffic-status.txt
log "traffic done: $(tr '\n' ' ' <$OUT/traffic-status.txt)"
# Late retransmissions and ACKs still cross the switch for a moment.
sleep "${SETTLE_S:-1}"
counters finish

# --- stop the switch first (it releases held frames), then the dumpers ---
kill -INT $swpid
for try in $(seq 1 50); do kill -0 $swpid 2>/dev/null || break; sleep 0.2; done
kill -0 $swpid 2>/dev/null && { log "switch did not stop; killing it"; kill -KILL $swpid; }
sleep 0.5
for p in $(cat /tmp/dumper.pids); do kill -INT "$p"; done
for p in $(cat /tmp/dumper.pids); do
	for try in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
done
log "switch and dumpers stopped"
dmesg >$OUT/dmesg.txt
finish
