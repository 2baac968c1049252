// Command simonly runs a scenario's simulation as `lumina run` does (the same switch logic and events) and
// discards the mirrored frames: no dumps, no trace, no analysis. bench/run.sh times it as the yardstick of a
// whole `lumina run`.
//
//	go run ./bench/simonly bench/run/write-4qp.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/testbed"
)

func main() {
	cpuProf := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: simonly [-cpuprofile FILE] SCENARIO.yaml")
		os.Exit(2)
	}
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			fmt.Fprintln(os.Stderr, "simonly:", err)
			os.Exit(2)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "simonly:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	sc, err := scenario.Load(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "simonly:", err)
		os.Exit(2)
	}
	n, err := testbed.SimulateOnly(sc)
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "simonly:", err)
		os.Exit(1)
	}
	fmt.Printf("%d mirrored packets\n", n)
}
