// Package load generates Gearman load over raw TCP: pipelined clients that
// keep a fixed number of jobs in flight, workers that behave like libgearman
// workers (CAN_DO, then GRAB_JOB / PRE_SLEEP / NOOP), and idle connections.
//
// It speaks the wire format itself, independently of switchyard's codec, so
// that a codec bug cannot hide itself and so that nothing but a read, a parse
// and a buffered write sits in the hot loop. Each connection is served by one
// goroutine that reads every packet already received, answers into a buffered
// writer and flushes only before it would block: one write per burst, as a
// pipelining client library would do.
package load
