package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/lumina-go/lumina/live"
)

// checkOutputFile makes sure a file can be written at path (and its .stats.json beside it): not a directory,
// in a directory that exists and takes new files.
func checkOutputFile(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory; expected a file name", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".lumina-write-check-*")
	if err != nil {
		return fmt.Errorf("cannot write in %s: %w", filepath.Dir(path), err)
	}
	f.Close()
	return os.Remove(f.Name())
}

func newDumpCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		iface, out, fanout, netns string
		workers, snap, maxPkts    int
		rewrite                   uint16
	)
	cmd := &cobra.Command{
		Use:   "dump --iface IF --out FILE.pcap",
		Short: "Capture the switch's mirrored packets and write them as a nanosecond pcap when stopped",
		Long: `dump captures the mirrored copies arriving on an interface with PACKET_FANOUT across --workers
sockets (one goroutine each), keeps the first --snaplen bytes of each in memory (at most --max-packets),
undoes the switch's RSS port rewrite, and on SIGINT or SIGTERM writes them, ordered by mirror sequence
number and stamped with the switch's ingress timestamp, as a nanosecond pcap. Its own losses (kernel ring
drops and freezes, buffer-full drops) go to FILE.stats.json beside the pcap, so that the integrity check can
tell a lossy dump from a complete one.`,
		Example: `  ip netns exec dump0 lumina dump --iface eth0 --out /tmp/dumper-0.pcap --rewrite-port 9741`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if iface == "" || out == "" {
				return badInput("--iface and --out are required")
			}
			if err := checkOutputFile(out); err != nil {
				return badInput("--out: %v", err) // before capturing, not when the capture is lost
			}
			mode := unix.PACKET_FANOUT_HASH
			switch fanout {
			case "hash":
			case "cpu":
				mode = unix.PACKET_FANOUT_CPU
			case "lb":
				mode = unix.PACKET_FANOUT_LB
			default:
				return badInput("--fanout %q; expected hash, cpu or lb", fanout)
			}
			var d *live.Dumper
			err := live.InNetns(netns, func() (e error) {
				d, e = live.NewDumper(live.DumpConfig{Iface: iface, Workers: workers, FanoutMode: mode, SnapLen: snap,
					MaxPackets: maxPkts, RewritePort: rewrite})
				return e
			})
			if err != nil {
				return err
			}
			defer d.Close()
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(stderr, "lumina dump: capturing on %s; SIGINT or SIGTERM writes %s\n", iface, out)
			if err := d.Run(ctx); err != nil {
				return err
			}
			st, err := d.Write(out)
			if err != nil {
				return err
			}
			return writeIndentedJSON(stdout, st)
		},
	}
	f := cmd.Flags()
	f.StringVar(&iface, "iface", "", "interface the mirrored copies arrive on")
	f.StringVar(&out, "out", "", "pcap file to write (stats go to the same name with .stats.json)")
	f.IntVar(&workers, "workers", 0, "fan-out sockets, one goroutine each (default: number of CPUs)")
	f.StringVar(&fanout, "fanout", "hash", "kernel fan-out: hash (flow hash), cpu (receiving CPU) or lb (round robin)")
	f.IntVar(&snap, "snaplen", 128, "bytes kept per packet")
	f.IntVar(&maxPkts, "max-packets", 1<<20, "packets kept in memory at most; the excess is counted as buffer-full drops")
	f.Uint16Var(&rewrite, "rewrite-port", 0, "the switch's RSS rewrite UDP port to undo (0: none)")
	f.StringVar(&netns, "netns", "", "open the sockets in this named network namespace")
	return cmd
}
