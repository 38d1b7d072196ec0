// scan_ahead.go owns the partial read of the queue a place-only waiter
// (WaitAhead) makes: the nearest tickets ahead of it, not the queue.
package queue

import "sort"

// scanAhead reads the tickets ahead of ticket me, nearest first, until it
// has found need live waiting tickets that do not yield: all WaitAhead
// needs to know (whether more than need-1 are ahead, and which one's
// going moves it), whatever the queue's length. A sweep that queues
// hundreds would otherwise have each waiter read every ticket ahead of
// its own. The snapshot holds what was read, by seq; markers are not read
// (a place-only waiter reaps no one).
func (q *dirQueue) scanAhead(me uint64, need int) (*snapshot, error) {
	names, err := q.names()
	if err != nil {
		return nil, err
	}
	type cand struct {
		seq  uint64
		name string
	}
	var ahead []cand
	for _, name := range names {
		if seq, rest, ok := parseSeq(name, ticketPrefix); ok && rest == "" && seq < me {
			ahead = append(ahead, cand{seq, name})
		}
	}
	sort.Slice(ahead, func(i, j int) bool { return ahead[i].seq > ahead[j].seq })
	s := &snapshot{markers: map[uint64][]markerFile{}}
	for i, found := 0, 0; i < len(ahead) && found < need; i++ {
		e, ok := q.readTicket(ahead[i].name, ahead[i].seq)
		if !ok {
			if e.name != "" {
				s.skipped = append(s.skipped, e.name)
			}
			continue
		}
		s.tickets = append(s.tickets, e)
		if e.live && !e.granted() && !e.Yield {
			found++
		}
	}
	sort.Slice(s.tickets, func(i, j int) bool { return s.tickets[i].Seq < s.tickets[j].Seq })
	return s, nil
}
