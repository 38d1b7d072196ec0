// reap_trust.go owns what a reap believes of an etcd ticket: its fields
// are the claim of whoever may write the prefix, so a dead holder's uid is
// believed only when the record file it names confirms it.
package hold

import (
	"github.com/rs/zerolog"

	"github.com/gpu-hold/gpu-hold/queue"
)

// confirmDead checks, for a dead holder an etcd ticket names, what the
// directory gets from a ticket file's owner: that its uid is its own. The
// ticket's fields are anyone's claim (whoever may write the prefix), so
// its record must be a file of that uid, only its, naming the same hold
// and holder; otherwise nothing is ended on its word.
func (h *holdRun) confirmDead(d queue.Ticket) bool { return confirmDead(d, h.o.Log) }

func confirmDead(d queue.Ticket, log zerolog.Logger) bool {
	rec, _, why := holderRecord(d)
	if rec != nil {
		return true
	}
	log.Error().Uint64("dead_ticket", d.Seq).Int("dead_uid", d.UID).Str("record", d.Record).
		Msgf("the etcd ticket of dead holder %s cannot be confirmed on this host (its record: %s): ending nothing on its word and clearing it", d.Describe(), why)
	return false
}
