package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/rnic"
)

func newProfilesCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "profiles",
		Short: "List the embedded NIC profiles of the simulated testbed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVENDOR\tLINK\tTRANSPORT\tDESCRIPTION")
			for _, n := range rnic.ProfileNames() {
				p, err := rnic.LoadProfile(n)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "%s\t%s\t%g Gb/s\t%s\t%s\n", p.Name, p.Vendor, p.LinkGbps, p.Transport, p.Description)
			}
			return tw.Flush()
		},
	}
}
