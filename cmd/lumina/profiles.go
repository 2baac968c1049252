package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lumina-go/lumina/rnic"
)

func newProfilesCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "profiles",
		Short: "List the embedded NIC profiles of the simulated testbed",
		Long: `profiles lists the NIC profiles the simulated testbed embeds. Every profile runs scenarios
(lumina run); SEARCH says which ones lumina search can search: only a profile with a micro section
(a model of the NIC's caches, PCIe and packet processor) can show Collie's anomalies.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVENDOR\tLINK\tTRANSPORT\tSEARCH\tDESCRIPTION")
			var searchable []string
			for _, n := range rnic.ProfileNames() {
				p, err := rnic.LoadProfile(n)
				if err != nil {
					return err
				}
				search := "-"
				if p.Micro != nil {
					search = "yes"
					searchable = append(searchable, p.Name)
				}
				fmt.Fprintf(tw, "%s\t%s\t%g Gb/s\t%s\t%s\t%s\n", p.Name, p.Vendor, p.LinkGbps, p.Transport, search, p.Description)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err := fmt.Fprintf(stdout, "\nlumina search --profile takes %s (profiles with a micro-architecture model), or a profile file with a micro section.\n",
				strings.Join(searchable, " or "))
			return err
		},
	}
}
