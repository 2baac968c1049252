//go:build !verbs

// Command lumina-verbs is Lumina's RDMA traffic generator. This build has no libibverbs: build it with
// `CGO_ENABLED=1 go build -tags verbs ./verbs/cmd/lumina-verbs` (needs libibverbs-dev).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "lumina-verbs: built without the verbs tag (no libibverbs); rebuild with -tags verbs")
	os.Exit(2)
}
