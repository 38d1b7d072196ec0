// devnum.go owns how the cgroup device programs (devfilter.bpf.c,
// guard.bpf.c) name a device: its type and number.
package bpf

// Device types as the cgroup device hook names them.
const (
	DevBlock = 1 // BPF_DEVCG_DEV_BLOCK
	DevChar  = 2 // BPF_DEVCG_DEV_CHAR
)

// DevID is one device number.
type DevID struct {
	Type         uint32 // DevChar or DevBlock
	Major, Minor uint32
}
