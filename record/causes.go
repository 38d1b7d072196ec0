// causes.go owns the causes added after the first set (record.go): each a
// way a hold can end that the record names.
package record

// CauseCancelled: `gpu-hold cancel` ended the running hold (its owner or
// root), through the hold's own teardown.
const CauseCancelled Cause = "cancelled"
