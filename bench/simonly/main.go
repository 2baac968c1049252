// Command simonly runs a scenario's simulation as `lumina run` does (the same switch logic and events) and
// discards the mirrored frames: no dumps, no trace, no analysis. bench/run.sh times it as the yardstick of a
// whole `lumina run`.
//
//	go run ./bench/simonly bench/run/write-4qp.yaml
package main

import (
	"fmt"
	"os"

	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/testbed"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: simonly SCENARIO.yaml")
		os.Exit(2)
	}
	sc, err := scenario.Load(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "simonly:", err)
		os.Exit(2)
	}
	n, err := testbed.SimulateOnly(sc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "simonly:", err)
		os.Exit(1)
	}
	fmt.Printf("%d mirrored packets\n", n)
}
