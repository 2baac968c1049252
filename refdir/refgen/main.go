// Command refgen writes a reference Lumina results directory from a run of the simulator: it runs the
// reference-format configuration on the simulated testbed (our results go to OUT/lumina-results) and writes
// OUT/config.yml and OUT/0/{pcap-result,switch-result,rdma-result} as the reference would have left them
// (refdir.FromResults). The refdir tests use the same path on testdata/cases/*.yml.
//
//	go run ./refdir/refgen -config refdir/testdata/cases/drops.yml -out /tmp/ref-drops
//	lumina analyze /tmp/ref-drops
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lumina-go/lumina/refdir"
	"github.com/lumina-go/lumina/scenario"
	"github.com/lumina-go/lumina/testbed"
	"github.com/lumina-go/lumina/verdict"
)

func main() {
	config := flag.String("config", "", "reference-format configuration (conf/example.yml's keys; sim testbed)")
	out := flag.String("out", "", "reference results directory to write")
	flag.Parse()
	if *config == "" || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: refgen -config CONFIG.yml -out DIR")
		os.Exit(2)
	}
	sc, err := scenario.Load(*config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "refgen:", err)
		os.Exit(2)
	}
	dir := filepath.Join(*out, "lumina-results")
	var o *verdict.Outcome
	err = testbed.Run(sc, testbed.Options{OutDir: dir, Finish: func(staged string) (err error) {
		o, err = verdict.Judge(staged, sc)
		return err
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "refgen:", err)
		os.Exit(2)
	}
	if err := refdir.FromResults(dir, *config, *out); err != nil {
		fmt.Fprintln(os.Stderr, "refgen:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: reference results directory (our run's results in %s, verdict %s)\n", *out, dir, o.Doc.Verdict)
}
