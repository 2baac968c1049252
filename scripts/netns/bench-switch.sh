#!/bin/sh
# Forwarding rate, mirroring rate, drops and added latency of the live switch (ring path, BPF at TC and XDP)
# against the Linux bridge on the same veth pairs, in one run. Needs root, iproute2 and ethtool (and Linux 6.6
# or later for the BPF data plane). Extra arguments go to the blaster
# (-count N, -lat N, -gap-us N, -payload N, -ring v2|v3, -modes bridge,ring,tc,xdp).
set -eu
cd "$(dirname "$0")/../.."
go build -o /tmp/lumina-blast ./scripts/netns/blast
exec /tmp/lumina-blast "$@"
