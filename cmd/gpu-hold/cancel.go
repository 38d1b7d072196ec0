// cancel.go owns the `gpu-hold cancel` subcommand. (stub: being written)
package main

import "github.com/spf13/cobra"

func newCmdCancel(g *globalOpts) *cobra.Command {
	return &cobra.Command{Use: "cancel", Short: "(not yet)", RunE: func(*cobra.Command, []string) error { return usageErr("cancel: not implemented yet") }}
}
