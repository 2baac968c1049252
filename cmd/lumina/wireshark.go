package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/wireshark"
)

func newWiresharkCmd(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wireshark",
		Short: "The Wireshark dissector for Lumina's mirror metadata and RoCEv2 CNPs",
		Long: `Lumina ships lumina.lua, a Wireshark post-dissector on top of Wireshark's infiniband dissector. It decodes
Lumina's mirror metadata (lumina.event, lumina.event_code, lumina.seq, lumina.ts_ns; from the TTL and MAC
addresses of mirrored copies, or from a results trace's comments, with lumina.iter and lumina.qp), the original
UDP source port of RSS-rewritten copies (lumina.rss.original_sport), and the CNP fields Wireshark leaves
undecoded (lumina.cnp, lumina.cnp.fecn, lumina.cnp.becn, lumina.cnp.reserved, lumina.cnp.icrc).`,
		Args: cobra.NoArgs,
	}
	var (
		dir       string
		printPath bool
		force     bool
	)
	install := &cobra.Command{
		Use:   "install",
		Short: "Install lumina.lua into Wireshark's personal Lua plugins folder",
		Long: `install writes lumina.lua into Wireshark's personal Lua plugins folder (as 'tshark -G folders' names it, else
~/.local/lib/wireshark/plugins), replacing an older copy (a file whose first line is the script's header);
running it again changes nothing. A lumina.lua there that is not a copy of the script (another first line, a
symbolic link) is left alone unless --force. Restart Wireshark, or press Ctrl+Shift+L, to load it.
--print-path only prints where it would go.

Exit status: 0 installed or already current, 2 the folder cannot be found or written, or it holds a
lumina.lua that is not ours (without --force).`,
		Example: `  lumina wireshark install
  lumina wireshark install --print-path
  tshark -r results/listing2/trace.pcapng -Y 'lumina.event == "drop"' -T fields -e lumina.seq -e lumina.iter`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				d, _, err := wireshark.PluginDir()
				if err != nil {
					return fail(exitBadArgs, err)
				}
				dir = d
			}
			if printPath {
				fmt.Fprintln(stdout, filepath.Join(dir, wireshark.FileName))
				return nil
			}
			path, changed, err := wireshark.Install(dir, force)
			if err != nil {
				return fail(exitBadArgs, err)
			}
			if changed {
				fmt.Fprintf(stdout, "installed %s\n", path)
			} else {
				fmt.Fprintf(stdout, "%s is already current\n", path)
			}
			return nil
		},
	}
	install.Flags().StringVar(&dir, "dir", "", "the plugins folder (default: Wireshark's personal Lua plugins folder)")
	install.Flags().BoolVar(&force, "force", false, "replace a lumina.lua that is not a copy of the script (or a symbolic link)")
	install.Flags().BoolVar(&printPath, "print-path", false, "print the path the script is installed at, and do nothing")
	script := &cobra.Command{
		Use:   "script",
		Short: "Print lumina.lua (for tshark -X lua_script:FILE)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := stdout.Write(wireshark.Script)
			return err
		},
	}
	cmd.AddCommand(install, script)
	return cmd
}
