package netsim_test

import (
	"fmt"
	"net/netip"

	"github.com/lumina-go/lumina/lab"
	"github.com/lumina-go/lumina/netsim"
	"github.com/lumina-go/lumina/rnic"
)

// A 10 KB RDMA WRITE between two ConnectX-6 Dx hosts on the paper's testbed, no events.
func ExampleRun() {
	prof, err := rnic.LoadProfile("cx6dx")
	if err != nil {
		panic(err)
	}
	host := func(ip string, mac byte) lab.HostConfig {
		return lab.HostConfig{Profile: prof, IPs: []netip.Addr{netip.MustParseAddr(ip)}, MAC: [6]byte{2, 0, 0, 0, 0, mac},
			DCQCNRPEnable: true, DCQCNNPEnable: true}
	}
	frames := 0
	res, err := netsim.Run(lab.Config{
		Seed:            42,
		Requester:       host("10.0.0.2", 2),
		Responder:       host("10.0.0.1", 1),
		Link:            lab.LinkConfig{PropagationNs: netsim.DefaultPropagationNs},
		SwitchLatencyNs: netsim.DefaultSwitchLatencyNs,
		Traffic: lab.TrafficConfig{Verb: "write", NumConns: 1, MsgsPerConn: 1, MsgSize: 10240, MTU: 1024,
			TxDepth: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7},
		Dump: func(dumper int, ts int64, frame []byte) { frames++ },
	})
	if err != nil {
		panic(err)
	}
	c := res.PerConn[0]
	fmt.Printf("%s: %d message, MCT %.1f us, %d data packets, %d frames mirrored\n",
		c.Status, c.Completed, float64(c.MCTNs[0])/1e3, c.DataPackets, frames)
	// Output: ok: 1 message, MCT 3.3 us, 10 data packets, 12 frames mirrored
}
