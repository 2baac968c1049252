// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// The BPF data plane of `lumina switch --dataplane tc|xdp`: a program at the TC ingress (lumina_switch) or
// at the XDP hook (lumina_xdp, with lumina_xdp_mirror on the dumpers' devmap entries) of the switch's two
// host-facing ports that does what inject.Switch.Process does for the events it supports (drop, ecn,
// corrupt), in the same order: decode; count; classify the packet to a connection and kind; update ITER or
// the Nth counter; look the packet up in the exact-match table; apply the action; mirror the packet with
// Lumina's metadata (trace.EncodeMirror) to a dumper chosen by smooth weighted round robin (inject.WRR);
// forward it to the other port. Every table, register and opcode class is filled by the Go control plane
// (live/bpfswitch.go) from the same inject table the ring path runs.
//
// Mirroring: TC clones the frame with bpf_clone_redirect after writing the metadata into it (and restores
// the headers); XDP cannot clone, so lumina_xdp redirects into a broadcast devmap holding the two ports and
// the dumper, and the dumper entry's program rewrites its copy from metadata left in the XDP metadata area.
// docs/switch-bpf.md compares the two.
//
// Regenerate the committed objects with `go generate ./live` (needs clang and libbpf-dev).

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MAX_DUMPERS 16
#define MAX_CONNS 4096
#define PULL_LEN 128
#define SAVE_MAX 96 /* Ethernet + 2 VLAN tags + IPv4 with options + UDP = 90 bytes */
#define MASK48 ((1ULL << 48) - 1)

#define DIR_REQ_TO_RESP 0
#define DIR_RESP_TO_REQ 1

/* inject.PacketKind */
#define KIND_DATA 0
#define KIND_ACK 1
#define KIND_NAK 2
#define KIND_CNP 3
#define KIND_READ_REQ 4

/* inject.ActionKind (= trace.EventType) */
#define ACT_NONE 0
#define ACT_DROP 1
#define ACT_ECN 2
#define ACT_CORRUPT 3
#define NUM_ACTIONS 8

/* opcode classes, filled from package roce */
#define CLS_OTHER 0
#define CLS_SEND_WRITE 1
#define CLS_READ_REQ 2
#define CLS_READ_RESP 3
#define CLS_ACK 4
#define CLS_CNP 5

struct config {
	__u32 ifindex[2];
	__u32 dumper_ifindex[MAX_DUMPERS];
	__s64 weight[MAX_DUMPERS];
	__s64 total_weight;
	__u32 ndumpers;
	__u32 rewrite_port; /* 0: no RSS rewrite of mirrored copies */
	__u64 start_ns;     /* bpf_ktime_get_ns() at switch start */
};

struct gstate {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 seq;
	__u64 last_ns; /* the latest mirror timestamp handed out (raw bpf_ktime_get_ns) */
	__s64 credit[MAX_DUMPERS];
};

struct conn_state {
	struct bpf_spin_lock lock;
	__u32 read;
	__u32 cnp_dir;
	__u32 data_last;
	__u32 data_iter;
	__u32 req_last;
	__u32 req_iter;
	__u32 nth[3];
	__u32 has_msg;
	__u32 ipsn;
	__u32 ppm;
	__u32 nmsgs;
};

struct conn_key {
	__u32 src;
	__u32 dst;
	__u32 qpn;
};

struct conn_ref {
	__u32 conn;
	__u32 dir;
};

struct msg_key {
	__u32 conn;
	__u32 msg;
};

struct table_key {
	__u32 conn;
	__u32 seq;
	__u32 iter;
	__u8 kind;
	__u8 rel;
	__u8 pad[2];
};

struct table_val {
	__u32 idx;
	__u32 action;
};

struct opinfo {
	__u8 cls;
	__u8 aeth_off; /* bytes between the BTH and the AETH (acks) */
};

struct counters {
	__u64 rx_frames[2];
	__u64 rx_bytes[2];
	__u64 rx_roce[2];
	__u64 tx_roce[2];
	__u64 rx_other[2];
	__u64 tx_frames[2];
	__u64 tx_bytes[2];
	__u64 mirrored_from[2];
	__u64 mirrored;          /* copies built (inject's "mirrored") */
	__u64 per_dumper[MAX_DUMPERS];
	__u64 dumper_sent[MAX_DUMPERS];
	__u64 dumper_bytes[MAX_DUMPERS];
	__u64 dumper_err[MAX_DUMPERS];
	__u64 dropped;
	__u64 events[NUM_ACTIONS];
	__u64 bad_dumper;
	__u64 mirror_err;        /* RoCE frames not mirrored: IPv6/RoCEv1, or headers not in the linear area */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gstate);
} gstate SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CONNS);
	__type(key, __u32);
	__type(value, struct conn_state);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * MAX_CONNS);
	__type(key, struct conn_key);
	__type(value, struct conn_ref);
} conn_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct msg_key);
	__type(value, __s32);
} msg_start SEC(".maps");

/* max_entries of table and hits are set by the loader to the scenario's event table capacity */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, struct table_key);
	__type(value, struct table_val);
} table SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct opinfo);
} opcodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counters);
} counters SEC(".maps");

/* psn_diff is roce.PSN.Diff: the signed distance a - b modulo 2^24, in [-2^23, 2^23). */
static __always_inline __s32 psn_diff(__u32 a, __u32 b)
{
	__s32 d = (__s32)((a - b) & 0xffffff);
	if (d >= (1 << 23))
		d -= 1 << 24;
	return d;
}

/* The parsed frame. Offsets are from the start of the frame. */
struct pkt {
	__u32 l3, ihl, udp, bth, end; /* end: where the ICRC ends per the UDP length */
	__u32 src, dst, qpn, psn;
	__u8 roce;     /* 1: IPv4 RoCEv2; 2: RoCE we do not handle (IPv6, RoCEv1) */
	__u8 full_bth; /* the BTH is complete */
	__u8 opcode;
	__u8 tos;
	__u8 cls;      /* opcode class (opcodes map) */
	__u8 has_aeth; /* syn holds the AETH syndrome */
	__u8 syn;
	__u8 pad;
};

#define NEED(off, n)                                                                                      \
	do {                                                                                              \
		if ((void *)(data + (off) + (n)) > data_end)                                              \
			return -1;                                                                        \
	} while (0)

/* parse is roce.Packet.Decode for the fields the switch needs. It returns 0 with p->roce = 0 for frames
 * that are not RoCE, and -1 when the frame is longer than the linear area holds and the headers are cut (the
 * caller pulled PULL_LEN bytes, so this does not happen for frames the checks reach). */
static __always_inline int parse(void *data, void *data_end, __u32 len, struct pkt *p)
{
	__u32 off = 12;
	__u16 et;

	p->roce = 0;
	if (len < 14)
		return 0;
	NEED(off, 2);
	et = bpf_ntohs(*(__u16 *)(data + off));
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (et != 0x8100 && et != 0x88a8 && et != 0x9100)
			break;
		if (len < off + 2 + 4)
			return 0;
		off += 4;
		NEED(off, 2);
		et = bpf_ntohs(*(__u16 *)(data + off));
	}
	off += 2;
	p->l3 = off;
	if (et == 0x86dd || et == 0x8915) {
		/* IPv6 RoCEv2 or RoCEv1: recognised so that they are counted, not handled */
		if (len < off + 40)
			return 0;
		NEED(off, 40);
		__u8 *ip6 = data + off;
		if ((ip6[0] >> 4) != 6)
			return 0;
		__u32 plen = (__u32)ip6[4] << 8 | ip6[5];
		if (et == 0x8915) {
			if (ip6[6] == 0x1b && plen >= 12 + 4)
				p->roce = 2;
			return 0;
		}
		if (ip6[6] != 17)
			return 0;
		__u32 u = off + 40;
		if (len < u + 8)
			return 0;
		NEED(u, 8);
		__u8 *uh = data + u;
		__u32 ulen = (__u32)uh[4] << 8 | uh[5];
		if (((__u32)uh[2] << 8 | uh[3]) != 4791)
			return 0;
		if (ulen < 8 + 12 + 4 || u + ulen > off + 40 + plen)
			return 0;
		p->roce = 2;
		return 0;
	}
	if (et != 0x0800)
		return 0;
	if (len < off + 20)
		return 0;
	NEED(off, 20);
	__u8 *ip = data + off;
	if ((ip[0] >> 4) != 4)
		return 0;
	__u32 ihl = (ip[0] & 0x0f) * 4;
	if (ihl < 20 || len < off + ihl)
		return 0;
	__u32 totlen = (__u32)ip[2] << 8 | ip[3];
	if (totlen < ihl)
		return 0;
	if ((((__u32)ip[6] << 8 | ip[7]) & 0x3fff) != 0)
		return 0;
	if (ip[9] != 17)
		return 0;
	p->ihl = ihl;
	p->tos = ip[1];
	p->src = *(__u32 *)(ip + 12);
	p->dst = *(__u32 *)(ip + 16);
	__u32 u = off + ihl;
	if (len < u + 8)
		return 0;
	if (u > 14 + 8 + 60)
		return -1;
	NEED(u, 8);
	__u8 *uh = data + u;
	if (((__u32)uh[2] << 8 | uh[3]) != 4791)
		return 0;
	__u32 ulen = (__u32)uh[4] << 8 | uh[5];
	if (ulen < 8 + 12 + 4 || u + ulen > off + totlen)
		return 0;
	p->roce = 1;
	p->udp = u;
	p->bth = u + 8;
	p->end = u + ulen;
	p->full_bth = 0;
	if (len < p->bth + 12)
		return 0; /* RoCE, but the BTH is cut: counted and mirrored, never matched */
	NEED(p->bth, 12);
	__u8 *bth = data + p->bth;
	p->full_bth = 1;
	p->opcode = bth[0];
	p->qpn = (__u32)bth[5] << 16 | (__u32)bth[6] << 8 | bth[7];
	p->psn = (__u32)bth[9] << 16 | (__u32)bth[10] << 8 | bth[11];
	__u32 op = p->opcode;
	struct opinfo *oi = bpf_map_lookup_elem(&opcodes, &op);
	if (!oi)
		return 0;
	p->cls = oi->cls;
	if (p->cls == CLS_ACK) {
		__u32 a = p->bth + 12 + oi->aeth_off;
		/* the decoder's need(): the AETH lies within the frame and before the ICRC */
		if (a + 4 <= len && a + 4 <= p->end - 4 && a < PULL_LEN) {
			NEED(a, 1);
			p->syn = *(__u8 *)(data + a);
			p->has_aeth = 1;
		}
	}
	return 0;
}

/* The helpers below are global functions, which the verifier checks once each instead of once per path
 * into them (the VLAN tags and IP header lengths multiply the paths past its limit otherwise). */

/* fix_csum recomputes the IPv4 header checksum from scratch, as roce.IPv4Checksum does. */
__noinline int fix_csum(struct __sk_buff *skb, __u32 l3, __u32 ihl)
{
	__u8 h[60];
	if (ihl < 20 || ihl > 60)
		return -1;
	if (bpf_skb_load_bytes(skb, l3, h, ihl) < 0)
		return -1;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < 30; i++) {
		if (i * 2 >= ihl)
			break;
		if (i != 5)
			sum += (__u32)h[2 * i] << 8 | h[2 * i + 1];
	}
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	__u16 cs = bpf_htons(~sum & 0xffff);
	return bpf_skb_store_bytes(skb, l3 + 10, &cs, 2, 0);
}

/* flip_id inverts the IPv4 identification and fixes the checksum: the reference's corrupt, its own inverse. */
__noinline int flip_id(struct __sk_buff *skb, __u32 l3, __u32 ihl)
{
	__u16 id;
	if (l3 > 64 || bpf_skb_load_bytes(skb, l3 + 4, &id, 2) < 0)
		return -1;
	id ^= 0xffff;
	if (bpf_skb_store_bytes(skb, l3 + 4, &id, 2, 0) < 0)
		return -1;
	return fix_csum(skb, l3, ihl);
}

/* The same two for XDP frames (bpf_xdp_load_bytes and bpf_xdp_store_bytes, Linux 5.18). */
__noinline int fix_csum_xdp(struct xdp_md *ctx, __u32 l3, __u32 ihl)
{
	__u8 h[60];
	if (ihl < 20 || ihl > 60)
		return -1;
	if (bpf_xdp_load_bytes(ctx, l3, h, ihl) < 0)
		return -1;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < 30; i++) {
		if (i * 2 >= ihl)
			break;
		if (i != 5)
			sum += (__u32)h[2 * i] << 8 | h[2 * i + 1];
	}
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	__u16 cs = bpf_htons(~sum & 0xffff);
	return bpf_xdp_store_bytes(ctx, l3 + 10, &cs, 2);
}

__noinline int flip_id_xdp(struct xdp_md *ctx, __u32 l3, __u32 ihl)
{
	__u16 id;
	if (l3 > 64 || bpf_xdp_load_bytes(ctx, l3 + 4, &id, 2) < 0)
		return -1;
	id ^= 0xffff;
	if (bpf_xdp_store_bytes(ctx, l3 + 4, &id, 2) < 0)
		return -1;
	return fix_csum_xdp(ctx, l3, ihl);
}

static __always_inline struct table_val *lookup(struct table_key *k)
{
	struct table_val *v = bpf_map_lookup_elem(&table, k);
	if (v)
		return v;
	k->iter = 0;
	return bpf_map_lookup_elem(&table, k);
}

/* classify is inject.Switch.classify: it finds the connection and kind, updates ITER or the Nth counter
 * (under the connection's lock, as the two ports may run on two CPUs) and looks the packet up. */
static __always_inline int found(struct table_val *v)
{
	return v ? (int)(v->idx << 8 | (v->action & 0xff)) : -1;
}

/* classify returns the matching entry as index << 8 | action, or -1. */
__noinline int classify(struct pkt *p)
{
	if (!p)
		return -1;
	struct conn_key ck = {.src = p->src, .dst = p->dst, .qpn = p->qpn};
	struct conn_ref *ref = bpf_map_lookup_elem(&conn_map, &ck);
	if (!ref)
		return -1;
	__u32 conn = ref->conn, dir = ref->dir;
	struct conn_state *cs = bpf_map_lookup_elem(&conns, &conn);
	if (!cs)
		return -1;
	__u32 cls = p->cls, psn = p->psn, read = cs->read;
	struct table_key k = {.conn = conn};
	__u32 kind;

	if (cls == CLS_CNP) {
		if (dir != cs->cnp_dir)
			return -1;
		kind = KIND_CNP;
	} else if (cls == CLS_ACK) {
		if (dir != DIR_RESP_TO_REQ)
			return -1;
		if (!p->has_aeth)
			return -1; /* cut before the end of the AETH: neither ACK nor NAK, as in roce */
		switch ((p->syn >> 5) & 3) {
		case 0:
			kind = KIND_ACK;
			break;
		case 3:
			kind = KIND_NAK;
			break;
		default:
			return -1; /* RNR NAKs and reserved syndromes are neither */
		}
	} else if (read && dir == DIR_REQ_TO_RESP && cls == CLS_READ_REQ) {
		__u32 iter;
		bpf_spin_lock(&cs->lock);
		__u32 last = cs->req_last;
		if (psn_diff(last, cs->data_last) < 0)
			last = cs->data_last;
		if (psn_diff(psn, last) <= 0)
			cs->req_iter++;
		cs->req_last = psn;
		iter = cs->req_iter;
		bpf_spin_unlock(&cs->lock);
		k.kind = KIND_READ_REQ;
		k.seq = psn;
		k.iter = iter;
		return found(lookup(&k));
	} else if ((read && dir == DIR_RESP_TO_REQ && cls == CLS_READ_RESP) ||
		   (!read && dir == DIR_REQ_TO_RESP && cls == CLS_SEND_WRITE)) {
		__s32 *ms = 0;
		__u32 first = 0;
		if (cs->has_msg && cs->ppm > 0) {
			__s32 off = psn_diff(psn, cs->ipsn);
			if (off >= 0) {
				struct msg_key mk = {.conn = conn, .msg = (__u32)off / cs->ppm};
				if (mk.msg < cs->nmsgs) {
					ms = bpf_map_lookup_elem(&msg_start, &mk);
					first = (__u32)off % cs->ppm == 0;
				}
			}
		}
		__u32 iter;
		__s32 start = 0;
		bpf_spin_lock(&cs->lock);
		if (psn_diff(psn, cs->data_last) <= 0)
			cs->data_iter++;
		cs->data_last = psn;
		iter = cs->data_iter;
		if (ms) {
			if (first && *ms == 0)
				*ms = (__s32)iter;
			start = *ms;
		}
		bpf_spin_unlock(&cs->lock);
		k.kind = KIND_DATA;
		k.seq = psn;
		if (start != 0) {
			k.rel = 1;
			k.iter = iter - (__u32)start + 1;
			struct table_val *v = bpf_map_lookup_elem(&table, &k);
			if (v)
				return found(v);
			k.rel = 0;
		}
		k.iter = iter;
		return found(lookup(&k));
	} else {
		return -1;
	}
	/* acks, naks and cnps: the Nth of their kind, in the connection's data round */
	__u32 n, iter;
	__u32 i = kind - KIND_ACK;
	bpf_spin_lock(&cs->lock);
	if (i == 0) {
		n = cs->nth[0]++;
	} else if (i == 1) {
		n = cs->nth[1]++;
	} else {
		n = cs->nth[2]++;
	}
	iter = cs->data_iter;
	bpf_spin_unlock(&cs->lock);
	k.kind = kind;
	k.seq = n;
	k.iter = iter;
	return found(lookup(&k));
}

static __always_inline void put48(__u8 *b, __u64 v)
{
	b[0] = v >> 40;
	b[1] = v >> 32;
	b[2] = v >> 24;
	b[3] = v >> 16;
	b[4] = v >> 8;
	b[5] = v;
}

/* mirror is inject.Switch.mirror plus the live switch's send to the dumper: it turns the frame into the
 * mirrored copy in place (metadata, the corrupt flip undone, the RSS rewrite), clones it to the dumper and
 * restores the frame's headers. */
struct pick {
	__u64 seq;
	__u64 ns; /* in: bpf_ktime_get_ns() at ingress; out: the same, never before an earlier sequence number's */
	__u32 dumper;
	__u32 pad;
};

/* event_of is the action the event table gives this packet (ACT_NONE when no entry matches or its BTH was
 * cut), counting the entry's hit and the event; both hooks call it. */
static __always_inline __u32 event_of(struct pkt *p, struct counters *c)
{
	if (!p->full_bth)
		return ACT_NONE;
	int v = classify(p);
	if (v < 0)
		return ACT_NONE;
	__u32 act = v & 0xff;
	__u32 idx = (__u32)v >> 8;
	__u64 *h = bpf_map_lookup_elem(&hits, &idx);
	if (h)
		__sync_fetch_and_add(h, 1);
	if (act < NUM_ACTIONS)
		c->events[act]++;
	return act;
}

/* next_mirror takes the next mirror sequence number and the dumper (inject.Switch.mirror's s.seq and
 * s.wrr.Next()) under the global lock, and counts the copy. Two CPUs can read the clock in one order and take
 * sequence numbers in the other: the timestamp is raised to the last one handed out, so that timestamps never
 * go backwards along the mirror sequence (the integrity check's second condition). It returns 0 when there is a dumper to send the
 * copy to, 1 when the switch has none (the copy is counted, as on the ring path, and goes nowhere). */
__noinline int next_mirror(struct pick *pk)
{
	__u32 zero = 0;
	struct gstate *g = bpf_map_lookup_elem(&gstate, &zero);
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct counters *c = bpf_map_lookup_elem(&counters, &zero);
	if (!pk || !g || !cfg || !c)
		return -1;
	__u32 nd = cfg->ndumpers;
	__u64 seq;
	__u32 d = 0;
	__u64 ns = pk->ns;
	bpf_spin_lock(&g->lock);
	seq = g->seq % MASK48 + 1;
	g->seq = seq;
	if (ns < g->last_ns)
		ns = g->last_ns;
	g->last_ns = ns;
	if (nd > 0) {
		/* inject.WRR.Next: add each weight to its credit, take the largest (lowest index on ties), charge
		 * it the total */
		__s64 best = 0;
#pragma unroll
		for (int i = 0; i < MAX_DUMPERS; i++) {
			if (i < nd) {
				g->credit[i] += cfg->weight[i];
				if (i == 0 || g->credit[i] > best) {
					best = g->credit[i];
					d = i;
				}
			}
		}
		d &= MAX_DUMPERS - 1;
		g->credit[d] -= cfg->total_weight;
	}
	bpf_spin_unlock(&g->lock);
	c->mirrored++;
	pk->seq = seq;
	pk->ns = ns;
	pk->dumper = d & (MAX_DUMPERS - 1);
	if (nd == 0) {
		c->per_dumper[0]++;
		c->bad_dumper++;
		return 1;
	}
	c->per_dumper[d & (MAX_DUMPERS - 1)]++;
	return 0;
}

__noinline int mirror(struct __sk_buff *skb, __u32 l3, __u32 ihl, __u32 udp, __u32 port_act)
{
	__u32 port = port_act >> 8, act = port_act & 0xff;
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct counters *c = bpf_map_lookup_elem(&counters, &zero);
	if (!cfg || !c)
		return -1;
	struct pick pk = {};
	pk.ns = bpf_ktime_get_ns();
	if (next_mirror(&pk) != 0)
		return 0;
	__u64 ts = (pk.ns - cfg->start_ns) & MASK48;
	__u64 seq = pk.seq;
	__u32 d = pk.dumper & (MAX_DUMPERS - 1);

	__u8 save[SAVE_MAX];
	__u32 hlen = udp + 8;
	if (hlen > SAVE_MAX || hlen < 14)
		goto err;
	if (bpf_skb_load_bytes(skb, 0, save, hlen) < 0)
		goto err;
	if (act == ACT_CORRUPT && flip_id(skb, l3, ihl) < 0)
		goto restore;
	__u8 macs[12];
	put48(macs, ts);
	put48(macs + 6, seq);
	__u8 ttl = act;
	if (bpf_skb_store_bytes(skb, 0, macs, 12, 0) < 0 || bpf_skb_store_bytes(skb, l3 + 8, &ttl, 1, 0) < 0 ||
	    fix_csum(skb, l3, ihl) < 0)
		goto restore;
	if (cfg->rewrite_port) {
		/* trace.RewriteRSS: checksum field <- source port, source port <- random, destination <- port */
		__u16 ports[4];
		if (bpf_skb_load_bytes(skb, udp, ports, 8) < 0)
			goto restore;
		ports[3] = ports[0];
		ports[0] = bpf_get_prandom_u32();
		ports[1] = bpf_htons(cfg->rewrite_port);
		if (bpf_skb_store_bytes(skb, udp, ports, 8, 0) < 0)
			goto restore;
	}
	__u32 len = skb->len;
	if (bpf_clone_redirect(skb, cfg->dumper_ifindex[d], 0) == 0) {
		c->dumper_sent[d]++;
		c->dumper_bytes[d] += len;
		c->mirrored_from[port & 1]++;
	} else {
		c->dumper_err[d]++;
	}
restore:
	if (bpf_skb_store_bytes(skb, 0, save, hlen, 0) < 0)
		c->mirror_err++;
	return 0;
err:
	c->mirror_err++;
	return -1;
}

SEC("tc")
int lumina_switch(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct counters *c = bpf_map_lookup_elem(&counters, &zero);
	if (!cfg || !c)
		return TC_ACT_OK;
	__u32 port;
	if (skb->ifindex == cfg->ifindex[0])
		port = 0;
	else if (skb->ifindex == cfg->ifindex[1])
		port = 1;
	else
		return TC_ACT_OK;
	__u32 out = port ^ 1;
	__u32 out_if = cfg->ifindex[out];
	__u32 len = skb->len;
	c->rx_frames[port]++;
	c->rx_bytes[port] += len;
	bpf_skb_pull_data(skb, len < PULL_LEN ? len : PULL_LEN);

	struct pkt p = {};
	if (parse((void *)(long)skb->data, (void *)(long)skb->data_end, len, &p) < 0 || p.roce == 2) {
		/* RoCE this program does not handle, or headers beyond the linear area: forwarded unchanged,
		 * counted as RoCE whose mirror copy could not be built */
		if (p.roce) {
			c->rx_roce[port]++;
			c->tx_roce[out]++;
			c->mirror_err++;
		} else {
			c->rx_other[port]++;
		}
		c->tx_frames[out]++;
		c->tx_bytes[out] += len;
		return bpf_redirect(out_if, 0);
	}
	if (!p.roce) {
		c->rx_other[port]++;
		c->tx_frames[out]++;
		c->tx_bytes[out] += len;
		return bpf_redirect(out_if, 0);
	}
	c->rx_roce[port]++;

	__u32 act = event_of(&p, c);
	switch (act) {
	case ACT_ECN: {
		__u8 tos = p.tos | 3;
		bpf_skb_store_bytes(skb, p.l3 + 1, &tos, 1, 0);
		fix_csum(skb, p.l3, p.ihl);
		break;
	}
	case ACT_CORRUPT:
		flip_id(skb, p.l3, p.ihl);
		break;
	}
	mirror(skb, p.l3, p.ihl, p.udp, port << 8 | act); /* at most five arguments */
	if (act == ACT_DROP) {
		c->dropped++;
		return TC_ACT_SHOT;
	}
	c->tx_roce[out]++;
	c->tx_frames[out]++;
	c->tx_bytes[out] += skb->len;
	return bpf_redirect(out_if, 0);
}

/* ---- XDP: the same switch at the driver's receive hook ----
 *
 * XDP cannot clone, so the mirror copy is made by the devmap: the program redirects the frame with
 * BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS into the devmap of the chosen dumper, which holds port 0, port 1
 * and that dumper; the kernel copies the frame for each entry but the ingress port. The dumper's entry has an
 * egress program (lumina_xdp_mirror) that turns its copy into the mirror copy, from the metadata the ingress
 * program left in front of the frame (XDP metadata area). A dropped frame goes to the dumper's entry alone.
 * Targets must accept XDP frames (ndo_xdp_xmit): on veth, the target's peer needs GRO on or an XDP program. */

struct xmeta {
	__u64 seq;
	__u64 ts;
	__u32 act;
	__u32 port;
};

struct devmap_val {
	__u32 ifindex;
	__u32 prog_fd;
};

#define BCAST_MAP(n)                                                                                      \
	struct {                                                                                          \
		__uint(type, BPF_MAP_TYPE_DEVMAP);                                                        \
		__uint(max_entries, 3);                                                                   \
		__type(key, __u32);                                                                       \
		__type(value, struct devmap_val);                                                         \
	} bcast##n SEC(".maps");

BCAST_MAP(0)
BCAST_MAP(1)
BCAST_MAP(2)
BCAST_MAP(3)
BCAST_MAP(4)
BCAST_MAP(5)
BCAST_MAP(6)
BCAST_MAP(7)
BCAST_MAP(8)
BCAST_MAP(9)
BCAST_MAP(10)
BCAST_MAP(11)
BCAST_MAP(12)
BCAST_MAP(13)
BCAST_MAP(14)
BCAST_MAP(15)

#define DEVMAP_DUMPER 2 /* key of the dumper in its devmap; 0 and 1 are the ports */

static __always_inline long redirect_dumper(__u32 d, __u32 key, __u64 flags)
{
	switch (d) {
#define CASE(n)                                                                                           \
	case n:                                                                                           \
		return bpf_redirect_map(&bcast##n, key, flags);
		CASE(0)
		CASE(1)
		CASE(2)
		CASE(3)
		CASE(4)
		CASE(5)
		CASE(6)
		CASE(7)
		CASE(8)
		CASE(9)
		CASE(10)
		CASE(11)
		CASE(12)
		CASE(13)
		CASE(14)
		CASE(15)
#undef CASE
	}
	return XDP_ABORTED;
}

SEC("xdp")
int lumina_xdp(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct counters *c = bpf_map_lookup_elem(&counters, &zero);
	if (!cfg || !c)
		return XDP_PASS;
	__u32 port;
	if (ctx->ingress_ifindex == cfg->ifindex[0])
		port = 0;
	else if (ctx->ingress_ifindex == cfg->ifindex[1])
		port = 1;
	else
		return XDP_PASS;
	__u32 out = port ^ 1;
	__u32 out_if = cfg->ifindex[out];
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 len = data_end - data;
	c->rx_frames[port]++;
	c->rx_bytes[port] += len;

	struct pkt p = {};
	if (parse(data, data_end, len, &p) < 0 || p.roce != 1) {
		if (p.roce) {
			c->rx_roce[port]++;
			c->tx_roce[out]++;
			c->mirror_err++;
		} else {
			c->rx_other[port]++;
		}
		c->tx_frames[out]++;
		c->tx_bytes[out] += len;
		return bpf_redirect(out_if, 0);
	}
	c->rx_roce[port]++;

	__u32 act = event_of(&p, c);
	switch (act) {
	case ACT_ECN: {
		__u8 tos = p.tos | 3;
		bpf_xdp_store_bytes(ctx, p.l3 + 1, &tos, 1);
		fix_csum_xdp(ctx, p.l3, p.ihl);
		break;
	}
	case ACT_CORRUPT:
		flip_id_xdp(ctx, p.l3, p.ihl);
		break;
	}
	struct pick pk = {};
	pk.ns = bpf_ktime_get_ns();
	int m = next_mirror(&pk);
	__u64 ts = (pk.ns - cfg->start_ns) & MASK48;
	if (m == 0) {
		if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct xmeta)) < 0) {
			c->mirror_err++;
			m = -1;
		} else {
			struct xmeta *xm = (void *)(long)ctx->data_meta;
			if ((void *)(xm + 1) > (void *)(long)ctx->data) {
				c->mirror_err++;
				m = -1;
			} else {
				xm->seq = pk.seq;
				xm->ts = ts;
				xm->act = act;
				xm->port = port;
			}
		}
	}
	if (act == ACT_DROP) {
		c->dropped++;
		if (m == 0)
			return redirect_dumper(pk.dumper, DEVMAP_DUMPER, 0);
		return XDP_DROP;
	}
	c->tx_roce[out]++;
	c->tx_frames[out]++;
	c->tx_bytes[out] += len;
	if (m == 0)
		return redirect_dumper(pk.dumper, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
	return bpf_redirect(out_if, 0);
}

/* lumina_xdp_mirror runs on the dumper's devmap entry, on the dumper's copy only: inject.Switch.mirror's
 * rewrite from the metadata the ingress program wrote. */
SEC("xdp/devmap")
int lumina_xdp_mirror(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	struct counters *c = bpf_map_lookup_elem(&counters, &zero);
	if (!cfg || !c)
		return XDP_DROP;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct xmeta *xm = (void *)(long)ctx->data_meta;
	__u32 d = 0;
#pragma unroll
	for (int i = 0; i < MAX_DUMPERS; i++) {
		if (cfg->dumper_ifindex[i] == ctx->egress_ifindex) {
			d = i;
			break;
		}
	}
	if ((void *)(xm + 1) > data) {
		c->dumper_err[d]++;
		return XDP_DROP;
	}
	__u64 seq = xm->seq, ts = xm->ts;
	__u32 act = xm->act, port = xm->port & 1;
	struct pkt p = {};
	__u32 len = data_end - data;
	if (parse(data, data_end, len, &p) < 0 || p.roce != 1) {
		c->dumper_err[d]++;
		return XDP_DROP;
	}
	if (act == ACT_CORRUPT && flip_id_xdp(ctx, p.l3, p.ihl) < 0)
		goto err;
	__u8 macs[12];
	put48(macs, ts);
	put48(macs + 6, seq);
	__u8 ttl = act;
	if (bpf_xdp_store_bytes(ctx, 0, macs, 12) < 0 || bpf_xdp_store_bytes(ctx, p.l3 + 8, &ttl, 1) < 0 ||
	    fix_csum_xdp(ctx, p.l3, p.ihl) < 0)
		goto err;
	if (cfg->rewrite_port) {
		__u16 ports[4];
		if (bpf_xdp_load_bytes(ctx, p.udp, ports, 8) < 0)
			goto err;
		ports[3] = ports[0];
		ports[0] = bpf_get_prandom_u32();
		ports[1] = bpf_htons(cfg->rewrite_port);
		if (bpf_xdp_store_bytes(ctx, p.udp, ports, 8) < 0)
			goto err;
	}
	c->dumper_sent[d]++;
	c->dumper_bytes[d] += len;
	c->mirrored_from[port]++;
	return XDP_PASS;
err:
	c->dumper_err[d]++;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
