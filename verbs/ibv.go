//go:build verbs

package verbs

/*
#cgo LDFLAGS: -libverbs
#include <infiniband/verbs.h>
#include <poll.h>
#include <fcntl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

// The helpers keep every verbs structure on the C side: Go passes scalars and C memory only.

static struct ibv_context *lv_open(const char *name, int *nfound) {
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	struct ibv_context *ctx = NULL;
	*nfound = n;
	if (!l) return NULL;
	for (int i = 0; i < n; i++) {
		if (name[0] == 0 || strcmp(ibv_get_device_name(l[i]), name) == 0) {
			ctx = ibv_open_device(l[i]);
			break;
		}
	}
	ibv_free_device_list(l);
	return ctx;
}

// lv_find_gid: the index of the RoCE v2 GID equal to want on the port, -1 if none.
static int lv_find_gid(struct ibv_context *ctx, int port, const unsigned char *want) {
	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, port, &pa)) return -2;
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(ctx, port, i, &e, 0)) continue;
		if (e.gid_type == IBV_GID_TYPE_ROCE_V2 && memcmp(e.gid.raw, want, 16) == 0) return i;
	}
	return -1;
}

static struct ibv_qp *lv_create_qp(struct ibv_pd *pd, struct ibv_cq *cq, int max_send, int max_recv) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.send_cq = cq;
	a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 0;
	a.cap.max_send_wr = max_send;
	a.cap.max_recv_wr = max_recv;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	return ibv_create_qp(pd, &a);
}

static int lv_to_init(struct ibv_qp *qp, int port) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int lv_to_rtr(struct ibv_qp *qp, int port, int mtu, unsigned dqpn, unsigned rq_psn,
		const unsigned char *dgid, int sgid_index, int tclass) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
	a.ah_attr.grh.sgid_index = sgid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.traffic_class = tclass;
	a.ah_attr.port_num = port;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int lv_to_rts(struct ibv_qp *qp, unsigned sq_psn, int timeout, int retry, int rnr) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = rnr;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int lv_post_send(struct ibv_qp *qp, int opcode, unsigned long long id, void *buf, unsigned len,
		unsigned lkey, unsigned long long raddr, unsigned rkey) {
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = opcode;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static int lv_post_recv(struct ibv_qp *qp, unsigned long long id, void *buf, unsigned len, unsigned lkey) {
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr, *bad;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return ibv_post_recv(qp, &wr, &bad);
}

// lv_poll polls up to n completions into the caller's C arrays.
static int lv_poll(struct ibv_cq *cq, int n, unsigned long long *ids, int *status, int *opcode) {
	struct ibv_wc wc[32];
	if (n > 32) n = 32;
	int got = ibv_poll_cq(cq, n, wc);
	for (int i = 0; i < got; i++) {
		ids[i] = wc[i].wr_id;
		status[i] = wc[i].status;
		opcode[i] = wc[i].opcode;
	}
	return got;
}

// lv_arm asks for an event at the next completion; lv_block sleeps on the channel for at most ms:
// 1 = an event, 0 = timed out, -errno on failure. Poll after arming: a completion that arrived just before
// lv_arm raises no event.
static int lv_arm(struct ibv_cq *cq) { return ibv_req_notify_cq(cq, 0) ? -EIO : 0; }

static int lv_block(struct ibv_comp_channel *ch, int ms) {
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	int r = poll(&p, 1, ms);
	if (r < 0) return errno == EINTR ? 0 : -errno;
	if (r == 0) return 0;
	struct ibv_cq *ev; void *ctx;
	if (ibv_get_cq_event(ch, &ev, &ctx)) return errno == EAGAIN ? 0 : -errno;
	ibv_ack_cq_events(ev, 1);
	return 1;
}

static int lv_nonblock(int fd) {
	int f = fcntl(fd, F_GETFL);
	return f < 0 ? -1 : fcntl(fd, F_SETFL, f | O_NONBLOCK);
}
*/
import "C"

import (
	"fmt"
	"net/netip"
	"syscall"
	"time"
	"unsafe"
)

// The port every connection uses: rxe and most RoCE NICs have one.
const ibPort = 1

// Device is an opened RDMA device with one protection domain and one completion channel.
type Device struct {
	Name string
	ctx  *C.struct_ibv_context
	pd   *C.struct_ibv_pd
	ch   *C.struct_ibv_comp_channel
}

func errnoErr(what string, rc C.int, err error) error {
	if err == nil && rc < 0 {
		err = syscall.Errno(-rc)
	}
	if err == nil {
		err = syscall.Errno(rc)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// OpenDevice opens the named device (the first one when name is empty).
func OpenDevice(name string) (*Device, error) {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var n C.int
	ctx, err := C.lv_open(cn, &n)
	if ctx == nil {
		if n == 0 {
			return nil, fmt.Errorf("opening RDMA device %q: no RDMA devices (is rdma_rxe loaded and an rxe link added?)", name)
		}
		return nil, fmt.Errorf("opening RDMA device %q among %d devices: not found or cannot open: %v", name, int(n), err)
	}
	d := &Device{Name: name, ctx: ctx}
	if d.pd, err = C.ibv_alloc_pd(ctx); d.pd == nil {
		d.Close()
		return nil, fmt.Errorf("device %s: allocating a protection domain: %v", name, err)
	}
	if d.ch, err = C.ibv_create_comp_channel(ctx); d.ch == nil {
		d.Close()
		return nil, fmt.Errorf("device %s: creating a completion channel: %v", name, err)
	}
	if C.lv_nonblock(d.ch.fd) != 0 {
		d.Close()
		return nil, fmt.Errorf("device %s: completion channel: cannot make it non-blocking", name)
	}
	return d, nil
}

// Close releases the device; queue pairs, memory regions and CQs must be closed first.
func (d *Device) Close() {
	if d.ch != nil {
		C.ibv_destroy_comp_channel(d.ch)
	}
	if d.pd != nil {
		C.ibv_dealloc_pd(d.pd)
	}
	if d.ctx != nil {
		C.ibv_close_device(d.ctx)
	}
	*d = Device{}
}

// GIDIndex finds the index of the RoCE v2 GID of address a.
func (d *Device) GIDIndex(a netip.Addr) (int, error) {
	g := GID(a)
	r := C.lv_find_gid(d.ctx, ibPort, (*C.uchar)(unsafe.Pointer(&g[0])))
	switch {
	case r == -2:
		return 0, fmt.Errorf("device %s: querying port %d failed", d.Name, ibPort)
	case r < 0:
		return 0, fmt.Errorf("device %s port %d has no RoCE v2 GID for %s", d.Name, ibPort, a)
	}
	return int(r), nil
}

// CQ is a completion queue with C-side buffers for polling, so that polling allocates nothing.
type CQ struct {
	d      *Device
	cq     *C.struct_ibv_cq
	ids    *C.ulonglong
	status *C.int
	opcode *C.int
}

// Completion is one polled work completion.
type Completion struct {
	ID     uint64
	Status int // 0 = success
	Recv   bool
}

// NewCQ creates a completion queue of n entries bound to the device's channel.
func (d *Device) NewCQ(n int) (*CQ, error) {
	cq, err := C.ibv_create_cq(d.ctx, C.int(n), nil, d.ch, 0)
	if cq == nil {
		return nil, fmt.Errorf("device %s: creating a CQ of %d entries: %v", d.Name, n, err)
	}
	c := &CQ{d: d, cq: cq}
	c.ids = (*C.ulonglong)(C.calloc(32, C.size_t(unsafe.Sizeof(C.ulonglong(0)))))
	c.status = (*C.int)(C.calloc(32, C.size_t(unsafe.Sizeof(C.int(0)))))
	c.opcode = (*C.int)(C.calloc(32, C.size_t(unsafe.Sizeof(C.int(0)))))
	return c, nil
}

// Poll fills out (at most 32) with completions and returns how many.
func (c *CQ) Poll(out []Completion) (int, error) {
	n := C.lv_poll(c.cq, C.int(min(len(out), 32)), c.ids, c.status, c.opcode)
	if n < 0 {
		return 0, fmt.Errorf("polling the CQ: ibv_poll_cq returned %d", int(n))
	}
	ids := unsafe.Slice(c.ids, 32)
	st := unsafe.Slice(c.status, 32)
	op := unsafe.Slice(c.opcode, 32)
	for i := range int(n) {
		out[i] = Completion{ID: uint64(ids[i]), Status: int(st[i]), Recv: op[i]&C.IBV_WC_RECV != 0}
	}
	return int(n), nil
}

// Arm asks for an event at the next completion; poll once more after it before Block.
func (c *CQ) Arm() error {
	if r := C.lv_arm(c.cq); r < 0 {
		return errnoErr("arming the CQ", r, nil)
	}
	return nil
}

// Block sleeps until a completion event on the device's channel or the timeout.
func (c *CQ) Block(timeout time.Duration) error {
	if r := C.lv_block(c.d.ch, C.int(timeout/time.Millisecond)); r < 0 {
		return errnoErr("waiting for completions", r, nil)
	}
	return nil
}

// StatusString names a work-completion status as libibverbs does.
func StatusString(s int) string { return C.GoString(C.ibv_wc_status_str(uint32(s))) }

// StatusOf maps a work-completion status to the report's connection status.
func StatusOf(s int) string {
	switch s {
	case C.IBV_WC_RETRY_EXC_ERR:
		return StatusRetryExceeded
	case C.IBV_WC_RNR_RETRY_EXC_ERR:
		return StatusRNRExceeded
	case C.IBV_WC_WR_FLUSH_ERR:
		return StatusFlushed
	case C.IBV_WC_REM_ACCESS_ERR, C.IBV_WC_REM_INV_REQ_ERR, C.IBV_WC_REM_OP_ERR, C.IBV_WC_REM_ABORT_ERR:
		return StatusRemoteError
	}
	return "error: " + StatusString(s)
}

// Close destroys the CQ.
func (c *CQ) Close() {
	if c.cq != nil {
		C.ibv_destroy_cq(c.cq)
	}
	C.free(unsafe.Pointer(c.ids))
	C.free(unsafe.Pointer(c.status))
	C.free(unsafe.Pointer(c.opcode))
	*c = CQ{}
}

// MR is a registered buffer in C memory (the device writes to it behind Go's back).
type MR struct {
	mr   *C.struct_ibv_mr
	buf  unsafe.Pointer
	Size int
}

// NewMR allocates and registers size bytes for local and remote read and write.
func (d *Device) NewMR(size int) (*MR, error) {
	buf := C.calloc(1, C.size_t(size))
	if buf == nil {
		return nil, fmt.Errorf("allocating a %d-byte buffer", size)
	}
	mr, err := C.ibv_reg_mr(d.pd, buf, C.size_t(size), C.IBV_ACCESS_LOCAL_WRITE|C.IBV_ACCESS_REMOTE_WRITE|C.IBV_ACCESS_REMOTE_READ)
	if mr == nil {
		C.free(buf)
		return nil, fmt.Errorf("device %s: registering %d bytes: %v", d.Name, size, err)
	}
	return &MR{mr: mr, buf: buf, Size: size}, nil
}

// Addr and RKey are what the peer needs to WRITE to or READ from the buffer.
func (m *MR) Addr() uint64 { return uint64(uintptr(m.buf)) }
func (m *MR) RKey() uint32 { return uint32(m.mr.rkey) }

// Close deregisters and frees the buffer.
func (m *MR) Close() {
	if m.mr != nil {
		C.ibv_dereg_mr(m.mr)
	}
	C.free(m.buf)
	*m = MR{}
}

// QP is a reliable-connected queue pair.
type QP struct {
	qp *C.struct_ibv_qp
}

// NewQP creates an RC queue pair on cq (send and receive) and moves it to INIT.
func (d *Device) NewQP(cq *CQ, maxSend, maxRecv int) (*QP, error) {
	qp, err := C.lv_create_qp(d.pd, cq.cq, C.int(maxSend), C.int(maxRecv))
	if qp == nil {
		return nil, fmt.Errorf("device %s: creating an RC QP (%d send, %d receive WRs): %v", d.Name, maxSend, maxRecv, err)
	}
	q := &QP{qp: qp}
	if rc, err := C.lv_to_init(qp, ibPort); rc != 0 {
		q.Close()
		return nil, errnoErr("moving the QP to INIT", rc, err)
	}
	return q, nil
}

// QPN is the queue pair's number.
func (q *QP) QPN() uint32 { return uint32(q.qp.qp_num) }

// Path is what connects a queue pair to its peer.
type Path struct {
	MTU       int // bytes
	RemoteQPN uint32
	RemoteGID netip.Addr
	SGIDIndex int
	DSCP      int
	RecvPSN   uint32 // the peer's initial send PSN
	SendPSN   uint32 // ours
	Timeout   int
	RetryCnt  int
	RNRRetry  int
}

// Connect moves the queue pair through RTR to RTS.
func (q *QP) Connect(p Path) error {
	mtu, ok := MTUEnum(p.MTU)
	if !ok {
		return fmt.Errorf("connecting QP %d: MTU %d is not an IB MTU", q.QPN(), p.MTU)
	}
	g := GID(p.RemoteGID)
	// The traffic class carries DSCP in its upper six bits; ECN stays 0 (the NIC sets ECT itself).
	if rc, err := C.lv_to_rtr(q.qp, ibPort, C.int(mtu), C.uint(p.RemoteQPN), C.uint(p.RecvPSN),
		(*C.uchar)(unsafe.Pointer(&g[0])), C.int(p.SGIDIndex), C.int(p.DSCP<<2)); rc != 0 {
		return errnoErr(fmt.Sprintf("moving QP %d to RTR (remote QPN %d, GID %s, sgid index %d)", q.QPN(), p.RemoteQPN, p.RemoteGID, p.SGIDIndex), rc, err)
	}
	if rc, err := C.lv_to_rts(q.qp, C.uint(p.SendPSN), C.int(p.Timeout), C.int(p.RetryCnt), C.int(p.RNRRetry)); rc != 0 {
		return errnoErr(fmt.Sprintf("moving QP %d to RTS", q.QPN()), rc, err)
	}
	return nil
}

// Opcodes for PostSend.
const (
	OpWrite = C.IBV_WR_RDMA_WRITE
	OpSend  = C.IBV_WR_SEND
	OpRead  = C.IBV_WR_RDMA_READ
)

// OpFor maps a verb to its opcode.
func OpFor(verb string) (int, error) {
	switch verb {
	case "write":
		return OpWrite, nil
	case "send":
		return OpSend, nil
	case "read":
		return OpRead, nil
	}
	return 0, fmt.Errorf("verb %q; expected write, send or read", verb)
}

// PostSend posts one signaled WRITE, SEND or READ of the whole buffer.
func (q *QP) PostSend(op int, id uint64, m *MR, raddr uint64, rkey uint32) error {
	if rc := C.lv_post_send(q.qp, C.int(op), C.ulonglong(id), m.buf, C.uint(m.Size), m.mr.lkey, C.ulonglong(raddr), C.uint(rkey)); rc != 0 {
		return fmt.Errorf("QP %d: posting a work request: %w", q.QPN(), syscall.Errno(rc))
	}
	return nil
}

// PostRecv posts one receive of the whole buffer.
func (q *QP) PostRecv(id uint64, m *MR) error {
	if rc := C.lv_post_recv(q.qp, C.ulonglong(id), m.buf, C.uint(m.Size), m.mr.lkey); rc != 0 {
		return fmt.Errorf("QP %d: posting a receive: %w", q.QPN(), syscall.Errno(rc))
	}
	return nil
}

// Close destroys the queue pair.
func (q *QP) Close() {
	if q.qp != nil {
		C.ibv_destroy_qp(q.qp)
	}
	q.qp = nil
}
