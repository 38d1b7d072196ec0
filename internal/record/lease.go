// lease.go owns what a record says of a token held through a lease (the
// etcd queue backend): its fencing number and, if it was lost, when the
// holder knew and why. The cause of such an end is CauseLeaseLost.
package record

import "time"

// LeaseInfo is the token as the fleet queue granted it.
type LeaseInfo struct {
	Queue string `json:"queue"`           // etcd://endpoints/prefix (no credentials)
	Fence int64  `json:"fence"`           // the ticket's create revision: the fencing token
	TTLMS int64  `json:"ttl_ms,omitzero"` // the lease's TTL
	// Lost is when the holder knew the token was no longer surely its own;
	// LostReason says why.
	Lost       time.Time `json:"lost,omitzero"`
	LostReason string    `json:"lost_reason,omitempty"`
}
