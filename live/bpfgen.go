package live

// The BPF data plane's objects are generated from bpf/switch.c and committed, so that building needs no
// clang. After changing bpf/switch.c run `go generate ./live` (needs clang and libbpf-dev); it also records
// the source's hash in bpf/switch.c.sha256, which TestBPFObjectsFresh compares against the source.
//
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu" bpfSwitch bpf/switch.c
//go:generate sh -c "sha256sum bpf/switch.c | cut -c1-64 > bpf/switch.c.sha256"
