// cause_yield.go owns the cause of a yielding hold's end.
package record

// CauseYielded: a yielding hold (gpu-hold --yield) was ended because a
// ticket that does not yield queued for its resource.
const CauseYielded Cause = "yielded"
