// queue.go owns the `gpu-hold queue` subcommand. (stub: being written)
package main

import "github.com/spf13/cobra"

func newCmdQueue(g *globalOpts) *cobra.Command {
	return &cobra.Command{Use: "queue", Short: "(not yet)", RunE: func(*cobra.Command, []string) error { return usageErr("queue: not implemented yet") }}
}
