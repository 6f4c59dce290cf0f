// Package sched is switchyard's scheduler: one instance serves every
// protocol. It knows nothing about wire formats or sockets; the engine
// packages translate frames into calls on it and its callbacks into frames.
//
// # Shape
//
// A function name hashes to one of N shards (a power of two). A shard owns
// the functions that hash to it, their jobs, their (function, unique) index
// and a hierarchical timer wheel, all behind one mutex that is only ever held for
// in-memory work. A job id carries its shard index in its low bits, so a
// result that arrives by id finds its shard without a global map.
//
// Each function keeps three intrusive FIFO lists (high, normal, low), the
// count of running jobs, its registered workers and the workers sleeping on
// it. Delayed jobs sit in the shard's wheel until they come due.
//
// # Roles
//
//   - A Client (NewClient) submits jobs and listens to the foreground ones:
//     every Update a worker reports is delivered to each attached Listener,
//     outside all scheduler locks. A job with no listener is background.
//   - A Worker (NewWorker) registers abilities (function + optional run
//     timeout) and pulls work with Grab. When it sleeps (Sleep), sched calls
//     its Waker once new work may be there; the frontend then pulls in its
//     own context. Pull with wake-ups is the one model for every protocol.
//   - Timers: a run timeout (the job's own SubmitReq.Timeout, else the
//     ability's) requeues a job as a retry, and the overrunning worker may
//     still report: the first result wins, the other attempts' are dropped
//     (Worker.Update returns nil); a delayed job (SubmitReq.When, or a
//     Requeue with a Delay) enters its list when due and wakes sleepers;
//     a job that waits in its queue longer than its QueueTimeout ends.
//     A worker's deadline (Worker.ExpectWithin, moved on every sign of
//     life) sits in a wheel too: when it passes, the worker's jobs go back
//     as retries and its Waker, if an Expirer, hears Expired.
//     One ticker (or the caller, via Advance) drives every wheel. Time
//     comes from a Clock: timers run on its monotonic Now, and a requested
//     unix time is turned into a due tick once, at submit, so a wall-clock
//     step later moves nothing.
//   - Retry policy is the job's: by default a lost attempt (timeout,
//     worker gone) counts against Config.JobRetries and Fail ends the job;
//     a job submitted with RetryForever goes back to its queue on Fail,
//     Exception, timeout or worker loss, uncounted, until it completes or
//     is removed. A worker may also hand a held job back itself
//     (Worker.Requeue), at once or after a delay, adding to its counter, or
//     at the head of its queue (turned down unstarted); Worker.Retry gives
//     one back as a lost attempt, counted. Worker.Holding lists what it
//     holds.
//   - A (function, unique) names one live job. A submit naming a live job
//     joins it, or with SubmitReq.Replace replaces it; Find and Remove
//     reach a job by that name, Purge a whole function, and JobViewsChunked
//     shows every job with its payload, due time and counter.
//   - Dependencies: a job submitted with SubmitReq.After waits, blocked,
//     until every job it names has ended (a name with no live job has). A
//     predecessor keeps its successors' ids; ending it releases each under
//     that successor's shard lock alone, in O(1), so predecessors may live
//     in any shard and no two shard locks are ever held together (deps.go).
//     Edges are in the stored records: Replay rebuilds the graph.
//   - A job submitted with Remember leaves a note when it ends (id, time,
//     the name of the worker that ran it: Worker.SetName), kept for
//     Config.EndedRetention and bounded by Config.EndedMax: EndedJob reads
//     it, and a later submit of the name gets ErrEnded (ended.go). Remember
//     is in the job's record, so a replayed job still leaves its note; the
//     notes themselves live in memory only.
//   - A job with no listener is background: it runs whoever leaves. A
//     background submit that coalesces with a foreground job makes it
//     background too, since that submitter was told it exists.
//   - Memory is bounded by what is live: a function with no job, no worker
//     and no admin setting is forgotten after Config.FunctionTTL
//     (ForgetIdle), and emptied indexes that grew large are dropped.
//   - A Store sees every job that must survive a restart (one with no
//     listener): its record is queued (Put) under the shard lock as the
//     job is made or changed, and removed (Delete) when it ends; writes
//     are answered once durable (or, for a job that ended before its
//     record was written, once the store drops it: see Store), and a
//     frontend that set SubmitReq.Stored acknowledges the submit then,
//     without waiting on an event loop.
//     Replay puts the jobs back at start under their ids (or new ones, for a
//     store that keeps none, such as gearmand's SQLite table). Ids name their shard,
//     so the shard count is fixed (DefaultShards) and a function's shard is
//     a fixed hash of its name, the same in every process.
//   - Counts: what happens to jobs (EventSubmitted, EventCompleted,
//     EventFailed, EventException, EventRetried, EventTimedOut) is counted
//     with a plain increment under the shard lock already held where it
//     happens: per function (FuncStat.Events, read with FuncsChunked) and
//     per shard, by the Source of the job's submitter, a small number a
//     frontend gives its clients (Client.SetSource); sched knows no names
//     for them. With Config.Latency each attempt's wait in its queue and
//     its run time go into fixed-bucket histograms kept per shard the same
//     way (one monotonic clock read as a job is queued, taken and let go).
//     Stats adds the shards up, one short lock hold each: reading the
//     counters never walks the jobs.
//   - Payloads are copied on Submit, except that a frontend may hand over a
//     buffer of its own (SubmitReq.OwnPayload) and have it back through
//     the release it set for its Source (SetRelease) when the job ends (a frontend that reads large
//     requests straight into buffers of its own reuses them).
//
// How each frontend maps its protocol onto these calls is in its own
// package (engine/*) and in docs/architecture.md.
package sched
