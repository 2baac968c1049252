package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/export"
	"github.com/lumina-go/lumina/resultsdir"
)

func newExportCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		out       string
		groupRows int64
	)
	cmd := &cobra.Command{
		Use:   "export RESULTS_DIR|CAPTURE... --parquet OUT",
		Short: "Write a results directory or captures as Parquet tables",
		Long: `export writes a results directory of 'lumina run' (its trace.pcapng, analysis.json and counters.json), or
pcap/pcapng captures (analyzed on the way as 'lumina analyze' analyzes them: several are merged, in
mirror-sequence order when they are Lumina dumps, and Lumina dumps get its integrity check first), as Parquet
tables for DuckDB, pandas, Spark or Arrow. OUT is a directory with one file per table:

  packets.parquet          one row per packet: time, connection, direction, PSN, opcode, ECN, sizes, ICRC
                           verdict, and Lumina's event, mirror sequence number, switch timestamp and ITER
                           (null for a capture without Lumina metadata)
  retransmissions.parquet  one row per lost data packet and its recovery
  connections.parquet      one row per connection (QP pair)
  counters.parquet         the NICs' counters at start and finish, with what the trace implies
  traffic.parquet          per connection: message completion times and goodput

The schema and its version (in every file's key-value metadata) are in docs/export.md. The export streams
the trace: memory does not grow with its size. The tables are written into a temporary directory beside OUT
and moved into place when complete; an existing OUT is replaced only when it is empty or an earlier export.

Exit status: 0 written (a plain capture cut short in the middle of a packet too, with lumina analyze's
warning), 2 bad input (unreadable or malformed capture, not a results directory, OUT not usable), 3 invalid
trace: captures that fail the integrity check of Lumina dumps (one dump of a pair, a dump cut short: what
'lumina analyze' exits 3 for), a results directory whose trace.pcapng is cut short or holds other than the
packets its analysis.json counted, or one that a run left incomplete. Nothing is written then; 130 stopped
by SIGINT or SIGTERM (the temporary directory is removed; a SIGKILL leaves it, as .OUT.export-*).`,
		Example: `  lumina export results/listing2 --parquet listing2.parquet
  lumina export capture.pcapng --parquet capture.parquet
  lumina export results/listing2/dump/dumper-0.pcap results/listing2/dump/dumper-1.pcap --parquet dumps.parquet
  duckdb -c "select conn, count(*) from 'listing2.parquet/packets.parquet' group by conn"`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return badInput("export: --parquet OUT is required (the directory to write %s and the other tables into)", export.FilePackets)
			}
			if groupRows <= 0 {
				return badInput("--row-group-rows %d: want a positive number of rows", groupRows)
			}
			// SIGINT or SIGTERM: the export stops, removes its temporary directory and exits 130, as lumina run.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := export.ExportAll(args, out, export.Options{RowGroupRows: groupRows, Context: ctx})
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return fail(130, fmt.Errorf("export: stopped by a signal; nothing written (%s unchanged)", out))
				}
				if errors.Is(err, resultsdir.ErrIncomplete) || errors.Is(err, export.ErrInvalidTrace) {
					return fail(exitInvalid, err)
				}
				return fail(exitBadArgs, err)
			}
			for _, w := range res.Warnings {
				fmt.Fprintf(stderr, "note: %s\n", w)
			}
			fmt.Fprintf(stdout, "wrote %s: %d packets, %d retransmissions, %d connections, %d counters, %d traffic rows (schema %d, metadata %s)\n",
				res.Dir, res.Packets, res.Retransmissions, res.Connections, res.Counters, res.Traffic, export.SchemaVersion, res.Metadata)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "parquet", "", "output directory, one Parquet file per table")
	cmd.Flags().Int64Var(&groupRows, "row-group-rows", export.DefaultRowGroupRows, "most rows per row group (bounds the memory the export holds)")
	return cmd
}
