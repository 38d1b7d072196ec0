// doctor.go owns the `gpu-hold doctor` subcommand. (stub: being written)
package main

import "github.com/spf13/cobra"

func newCmdDoctor(g *globalOpts) *cobra.Command {
	return &cobra.Command{Use: "doctor", Short: "(not yet)", RunE: func(*cobra.Command, []string) error { return usageErr("doctor: not implemented yet") }}
}
