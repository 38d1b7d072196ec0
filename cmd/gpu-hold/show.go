// show.go owns the `gpu-hold show` subcommand. (stub: being written)
package main

import "github.com/spf13/cobra"

func newCmdShow(g *globalOpts) *cobra.Command {
	return &cobra.Command{Use: "show", Short: "(not yet)", RunE: func(*cobra.Command, []string) error { return usageErr("show: not implemented yet") }}
}
