package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startRunProfile starts `lumina run --cpuprofile` and arranges `--memprofile` (pprof files, for `go tool
// pprof`); the returned stop writes them. Empty names profile nothing.
func startRunProfile(cpu, mem string) (stop func() error, err error) {
	var cf *os.File
	if cpu != "" {
		if cf, err = os.Create(cpu); err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(cf); err != nil {
			cf.Close()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	return func() error {
		if cf != nil {
			pprof.StopCPUProfile()
			if err := cf.Close(); err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
		}
		if mem == "" {
			return nil
		}
		mf, err := os.Create(mem)
		if err != nil {
			return fmt.Errorf("--memprofile: %w", err)
		}
		runtime.GC()
		if err := pprof.Lookup("allocs").WriteTo(mf, 0); err != nil {
			mf.Close()
			return fmt.Errorf("--memprofile: %w", err)
		}
		return mf.Close()
	}, nil
}
