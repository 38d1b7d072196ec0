// Package fleetenv is the environment every gpu-hold subcommand shares
// (the role of gh's cmdutil.Factory): the queue directory (its choice, its
// checks, the resources it knows and declares), the logger, and the host
// name a ticket carries. cmd/gpu-hold's subcommands call it directly, and
// hold, one hold's engine, uses it too; it knows nothing of a hold.
package fleetenv
