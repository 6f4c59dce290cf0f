// Package load generates Gearman and Periodic load over raw TCP and dwork
// load over ZeroMQ, and runs Worker–Controller workers on unix sockets.
//
// Gearman: pipelined clients that keep a fixed number of jobs in flight,
// workers that behave like libgearman workers (CAN_DO, then GRAB_JOB /
// PRE_SLEEP / NOOP), and idle connections. Periodic (Lupino's periodic
// v0.1.7): clients that pipeline SUBMIT_JOB with a bounded window of
// SUCCESS replies matched by message id, optionally paced or bounded by a
// Pool of jobs in the server, and workers that keep several GRAB_JOBs
// parked and answer each JOB_ASSIGN with WORK_DONE and a new GRAB_JOB.
// Worker–Controller: many workers in one process (ControllerWorkers), each
// listening on its own socket, pulsing on a schedule and finishing every
// task at once (SET_TASK, FETCH_ME, FETCH). dwork (frobnitzem/dwork's hub
// protocol): a client that creates a whole DAG, and hosts, ZeroMQ REQ
// sockets, that steal ready tasks and report them done until the DAG is
// run, checking that none came before its ancestors (DworkHosts).
//
// It speaks every wire format itself, independently of switchyard's codecs,
// so that a codec bug cannot hide itself and so that nothing but a read, a
// parse and a buffered write sits in the hot loop. The exception is dwork,
// whose messages are protobuf and whose transport is ZeroMQ: it uses zmq4
// and the types generated from dwork's .proto, not switchyard's checks. Each connection is
// served by one goroutine that reads every packet already received, answers
// into a buffered writer and flushes only before it would block: one write
// per burst, as a pipelining client library would do.
package load
