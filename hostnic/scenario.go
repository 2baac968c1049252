package hostnic

import (
	"fmt"
	"strings"

	"github.com/lumina-go/lumina/rnic"
	"github.com/lumina-go/lumina/scenario"
)

// Hardware is what a scenario's host section names on the real machine: the reference's nic.if-name,
// nic.pci-addr, nic.ib-device and nic.ib-port (the scenario package records them as hardware keys), plus for
// rxe the parent netdev, the netdev MTU to set, and whether to leave QoS alone.
type Hardware struct {
	IfName   string
	PCIAddr  string
	IBDevice string
	IBPort   int
	Parent   string // rxe only; empty = IfName
	MTU      int    // netdev MTU; 0 = leave it
	// SkipQoS leaves DSCP trust, the DSCP map and ETS alone (the reference always sets them on NVIDIA and
	// Intel NICs).
	SkipQoS bool
}

// FromScenario builds the Config of sc's host role ("requester" or "responder"): the vendor from nic.type
// (cx4lx, cx5, cx6dx, cx6vpi-200g -> nvidia; e810 -> intel; rxe -> rxe; a profile file -> its vendor), the
// addresses and prio-dscp-map from the nic section, and every roce-parameter of that vendor (the reference
// writes them all on each run). Simulation-only types (ideal, irn, p2100g) are an error. For rxe, whose
// scenario defaults still say dcqcn-rp-enable and dcqcn-np-enable, those two are ignored; any other
// roce-parameter turned on is an error.
func FromScenario(sc *scenario.Scenario, role string, hw Hardware) (Config, error) {
	var h scenario.Host
	switch role {
	case "requester":
		h = sc.Requester
	case "responder":
		h = sc.Responder
	default:
		return Config{}, fmt.Errorf("hostnic: role %q; expected requester or responder", role)
	}
	// A profile name (cx5, rxe) is looked up as is; only a profile file is relative to the scenario.
	t := h.NIC.Type
	if strings.HasSuffix(t, ".yaml") || strings.HasSuffix(t, ".yml") {
		t = sc.ResolvePath(t)
	}
	prof, err := rnic.LoadProfile(t)
	if err != nil {
		return Config{}, &ConfigError{Host: role, Field: "nic.type", Msg: err.Error()}
	}
	cfg := Config{Host: role, IfName: hw.IfName, PCIAddr: hw.PCIAddr, IBDevice: hw.IBDevice, IBPort: hw.IBPort,
		Parent: hw.Parent, IPs: h.NIC.IPList, MTU: hw.MTU, PrioDSCPMap: h.NIC.PrioDSCPMap}
	r := h.RoCEParameters
	switch prof.Vendor {
	case VendorNVIDIA:
		cfg.Vendor = VendorNVIDIA
		rp, np, adp, sr := r.DCQCNRPEnable, r.DCQCNNPEnable, r.AdaptiveRetrans, r.SlowRestart
		cfg.RoCE = RoCEParameters{DCQCNRPEnable: &rp, DCQCNNPEnable: &np, AdaptiveRetrans: &adp, SlowRestart: &sr,
			MinTimeBetweenCNPsUs: r.MinTimeBetweenCNPsUs}
		if r.DCQCNEnable != nil {
			return Config{}, &ConfigError{Host: role, Field: "roce-parameters.dcqcn-enable",
				Msg: "is Intel's setting; expected dcqcn-rp-enable and dcqcn-np-enable on an NVIDIA NIC"}
		}
		cfg.ConfigureQoS = !hw.SkipQoS
	case VendorIntel:
		cfg.Vendor = VendorIntel
		en := r.DCQCNRPEnable && r.DCQCNNPEnable
		if r.DCQCNEnable != nil {
			en = *r.DCQCNEnable
		}
		cfg.RoCE = RoCEParameters{DCQCNEnable: &en}
		cfg.ConfigureQoS = !hw.SkipQoS
	case VendorRxe:
		cfg.Vendor = VendorRxe
		// dcqcn-rp-enable and dcqcn-np-enable default to true in every scenario; rxe has neither point (its
		// profile says cnp.none), so they are not settings here.
		for _, f := range []struct {
			name string
			on   bool
		}{{"adaptive-retrans", r.AdaptiveRetrans},
			{"slow-restart", r.SlowRestart}, {"min-time-between-cnps", r.MinTimeBetweenCNPsUs != nil},
			{"dcqcn-enable", r.DCQCNEnable != nil && *r.DCQCNEnable}} {
			if f.on {
				return Config{}, &ConfigError{Host: role, Field: "roce-parameters." + f.name,
					Msg: "Soft-RoCE (rxe) has no congestion control or adaptive retransmission; expected it off or unset"}
			}
		}
	default:
		return Config{}, &ConfigError{Host: role, Field: "nic.type",
			Msg: fmt.Sprintf("%q is a simulated NIC (vendor %q); expected a real one: cx4lx, cx5, cx6dx, cx6vpi-200g, e810 or rxe", h.NIC.Type, prof.Vendor)}
	}
	if _, err := Plan(cfg); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
