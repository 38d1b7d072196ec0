// host.go owns the host name a ticket carries, which tests may override
// to simulate several hosts on one.
package fleetenv

import "os"

// HostEnv overrides the host name tickets carry (tests simulate hosts).
const HostEnv = "GPU_HOLD_HOSTNAME"

// TicketHost is the host name put in tickets: $GPU_HOLD_HOSTNAME, else
// the kernel's.
func TicketHost() string {
	if h := os.Getenv(HostEnv); h != "" {
		return h
	}
	h, _ := os.Hostname()
	return h
}
