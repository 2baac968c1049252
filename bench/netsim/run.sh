#!/bin/sh
# Simulator speed (issue item 7): events per second on one core, and two hosts at 100 Gb/s for 1 s of simulated
# time (~11.4 M data packets; target < 10 s of wall time with flat memory). Run from anywhere in the repository.
set -eu
cd "$(dirname "$0")/../.."
GOMAXPROCS=1 go test ./netsim/ -run '^$' -bench 'BenchmarkEvents' -benchtime 5x -benchmem
GOMAXPROCS=1 go test ./netsim/ -run '^$' -bench 'BenchmarkLineRate100G' -benchtime 1x -benchmem -timeout 120s
