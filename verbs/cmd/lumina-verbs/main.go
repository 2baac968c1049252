//go:build verbs

// Command lumina-verbs is Lumina's RDMA traffic generator (package verbs): `server` on the responder,
// `client` on the requester with the scenario; the client prints its report (testbed.VerbsReport) as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/verbs"
)

const usage = `usage:
  lumina-verbs server --device DEV --listen ADDR:PORT [--gid-index N] [--timeout D]
  lumina-verbs client --device DEV --connect ADDR:PORT --job scenario.yaml [--control ADDR:PORT|unix:PATH] [--gid-index N] [--timeout D]

The client reads the scenario's traffic section (connections, verb, messages, size, MTU, tx-depth, barrier-sync,
multi-gid, dscp-list, timeouts), sets the connections up with the server over TCP, reports every connection's
QPNs and initial PSNs to the switch's control plane (--control) and starts only when the switch answers ready.
Each connection's GID index is found from its address; --gid-index is the fallback when the table has none.
Exit status: 0 the run completed (connection statuses are in the report), 1 it failed, 2 bad usage or input.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "server" && args[0] != "client") {
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("lumina-verbs "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	device := fs.String("device", "", "RDMA device (default: the first)")
	gid := fs.Int("gid-index", -1, "GID index used when the GID table has no RoCE v2 entry for an address")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on the whole run")
	listen := fs.String("listen", "", "server: address to listen on")
	connect := fs.String("connect", "", "client: the server's address")
	job := fs.String("job", "", "client: the scenario")
	control := fs.String("control", "", "client: the switch's control plane, ADDR:PORT or unix:PATH (empty: no start barrier)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	ctx := context.Background()
	if args[0] == "server" {
		if *listen == "" {
			fmt.Fprintln(stderr, "lumina-verbs server: --listen ADDR:PORT is required")
			return 2
		}
		bye, err := verbs.RunServer(ctx, verbs.ServerConfig{Device: *device, GIDIndex: *gid, Listen: *listen, Timeout: *timeout, Log: stderr})
		if err != nil {
			bye.Error = err.Error()
		}
		_ = enc.Encode(bye)
		if err != nil {
			fmt.Fprintf(stderr, "lumina-verbs server: %v\n", err)
			return 1
		}
		return 0
	}
	if *connect == "" || *job == "" {
		fmt.Fprintln(stderr, "lumina-verbs client: --connect ADDR:PORT and --job scenario.yaml are required")
		return 2
	}
	sc, err := scenario.Load(*job)
	if err != nil {
		fmt.Fprintf(stderr, "lumina-verbs client: %v\n", err)
		return 2
	}
	plan, err := verbs.FromScenario(sc)
	if err != nil {
		fmt.Fprintf(stderr, "lumina-verbs client: %v\n", err)
		return 2
	}
	rep, err := verbs.RunClient(ctx, verbs.ClientConfig{Device: *device, GIDIndex: *gid, Server: *connect, Control: *control, Timeout: *timeout, Log: stderr}, plan)
	if err != nil {
		rep.Error = err.Error()
	}
	_ = enc.Encode(rep)
	if err != nil {
		fmt.Fprintf(stderr, "lumina-verbs client: %v\n", err)
		return 1
	}
	return 0
}
