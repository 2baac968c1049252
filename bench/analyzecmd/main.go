// Command analyzecmd runs summary.Analyze on capture files, standing in for `lumina analyze` in bench/analyze.sh
// until the command line is wired; -json prints the JSON report, -no-icrc skips the ICRC check (decode only).
package main

import (
	"flag"
	"fmt"
	"os"

	"lumina/analyze/summary"
)

func main() {
	asJSON := flag.Bool("json", false, "print the report as JSON")
	noICRC := flag.Bool("no-icrc", false, "skip the ICRC check (decode-only measurement)")
	order := flag.String("order", "auto", "merge order: auto, time or mirror-seq")
	quiet := flag.Bool("q", false, "print nothing (for timing)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: analyzecmd [-json] [-no-icrc] [-order o] [-q] CAPTURE...")
		os.Exit(2)
	}
	o, err := summary.ParseOrder(*order)
	if err != nil {
		fmt.Fprintln(os.Stderr, "analyzecmd:", err)
		os.Exit(2)
	}
	r, err := summary.Analyze(flag.Args(), summary.Options{Order: o, SkipICRC: *noICRC})
	if err != nil {
		fmt.Fprintln(os.Stderr, "analyzecmd:", err)
		if r == nil {
			os.Exit(2)
		}
	}
	if *quiet {
		if err != nil {
			os.Exit(2)
		}
		return
	}
	if *asJSON {
		err = r.WriteJSON(os.Stdout)
	} else {
		err = r.WriteText(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "analyzecmd:", err)
		os.Exit(2)
	}
}
