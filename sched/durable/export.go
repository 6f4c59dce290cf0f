package durable

import "switchyard/sched"

// EncodeRecord is the bytes a job's record is kept as, here and in every
// store that keeps the same records elsewhere (the replicated store).
func EncodeRecord(r *sched.Record) []byte { return encode(r) }

// DecodeRecord fills r from b, which EncodeRecord made; r's strings and
// payload are copies.
func DecodeRecord(b []byte, r *sched.Record) error { return decode(b, r) }
