package hostnic

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/lumina-go/lumina/scenario"
)

func TestFromScenario(t *testing.T) {
	sc, err := scenario.Parse([]byte(`
requester:
  nic: {type: CX5, ip-list: [10.0.0.2/24], prio-dscp-map: {3: [26]}}
  roce-parameters: {dcqcn-rp-enable: true, dcqcn-np-enable: false, min-time-between-cnps: 4, adaptive-retrans: true, slow-restart: false}
responder:
  nic: {type: e810, ip-list: [10.0.0.3/24]}
  roce-parameters: {dcqcn-enable: true}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	req, err := FromScenario(sc, "requester", Hardware{IfName: "ens1f0", PCIAddr: "0000:3b:00.0", IBDevice: "mlx5_0", IBPort: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := req.RoCE
	if req.Vendor != "nvidia" || !req.ConfigureQoS || req.IPs[0].String() != "10.0.0.2/24" || req.PrioDSCPMap[3][0] != 26 ||
		!*r.DCQCNRPEnable || *r.DCQCNNPEnable || *r.MinTimeBetweenCNPsUs != 4 || !*r.AdaptiveRetrans || *r.SlowRestart || r.DCQCNEnable != nil {
		t.Errorf("requester config %+v roce %+v", req, r)
	}
	resp, err := FromScenario(sc, "responder", Hardware{IfName: "ens785f0", IBDevice: "irdma0", SkipQoS: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Vendor != "intel" || resp.ConfigureQoS || resp.RoCE.DCQCNEnable == nil || !*resp.RoCE.DCQCNEnable || resp.RoCE.DCQCNRPEnable != nil {
		t.Errorf("responder config %+v", resp)
	}
	// The hardware keys are checked as Plan checks them.
	_, err = FromScenario(sc, "requester", Hardware{IfName: "ens1f0", IBDevice: "mlx5_0"})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "pci-addr" || ce.Host != "requester" {
		t.Errorf("missing pci-addr: %v", err)
	}
	if _, err := FromScenario(sc, "switch", Hardware{}); err == nil || !strings.Contains(err.Error(), "expected requester or responder") {
		t.Errorf("bad role: %v", err)
	}
	rxe, err := scenario.Parse([]byte("requester: {nic: {type: rxe, ip-list: [10.0.0.2/24]}}\nresponder: {nic: {type: rxe}, roce-parameters: {slow-restart: true}}\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The scenario's default dcqcn-rp/np-enable (true) do not stop an rxe host; a feature rxe lacks does.
	c, err := FromScenario(rxe, "requester", Hardware{IfName: "eth0", IBDevice: "rxe0"})
	if err != nil || c.Vendor != "rxe" || c.RoCE != (RoCEParameters{}) || c.ConfigureQoS {
		t.Errorf("rxe requester: %+v, %v", c, err)
	}
	if _, err := FromScenario(rxe, "responder", Hardware{IfName: "eth0"}); !errors.As(err, &ce) || ce.Field != "roce-parameters.slow-restart" {
		t.Errorf("slow restart on rxe: %v", err)
	}
	sim, err := scenario.Parse([]byte("requester: {nic: {type: ideal}}\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromScenario(sim, "requester", Hardware{IfName: "e", IBDevice: "d"}); !errors.As(err, &ce) || ce.Field != "nic.type" || !strings.Contains(ce.Msg, "simulated NIC") {
		t.Errorf("simulated type: %v", err)
	}
}

// The Config travels to the agent as JSON and comes back the same, plan included.
func TestConfigJSONRoundTrip(t *testing.T) {
	in := nvidiaConfig()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"if-name":"ens1f0"`, `"pci-addr":"0000:3b:00.0"`, `"ip-list":["10.0.0.2/24","10.0.1.2/24"]`, `"min-time-between-cnps":50`, `"dcqcn-rp-enable":false`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks %s", b, key)
		}
	}
	var out Config
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	p1, _ := Plan(in)
	p2, err := Plan(out)
	if err != nil || !reflect.DeepEqual(p1, p2) {
		t.Errorf("the plan changed through JSON: %v", err)
	}
}

// A profile name is not a path: a scenario in another directory naming type rxe gets the rxe profile.
func TestFromScenarioProfileNameInAnotherDirectory(t *testing.T) {
	sc, err := scenario.Parse([]byte("requester:\n  nic: {type: rxe, ip-list: [10.0.0.2/24]}\n"), "/elsewhere/lab/s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := FromScenario(sc, "requester", Hardware{IfName: "eth0", IBDevice: "rxereq"})
	if err != nil || cfg.Vendor != VendorRxe || cfg.IBDevice != "rxereq" {
		t.Errorf("config %+v, error %v", cfg, err)
	}
}
