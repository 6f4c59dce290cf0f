// Package driver holds a copy of the real Periodic server's job struct
// (github.com/Lupino/periodic/driver.Job at v0.1.7), for encoding/json to
// decode into where the codec's own scanner is not sure.
//
// The package is named driver on purpose: encoding/json's errors name the
// type ("... into Go value of type driver.Job", "... Go struct field
// Job.job_id ..."), and the real server sends that text to its clients. The
// struct has no methods, as none of the real one's change how encoding/json
// treats it.
package driver

// Job is the real server's job struct, field for field and tag for tag.
type Job struct {
	ID      int64  `json:"job_id"`
	Name    string `json:"name"`
	Func    string `json:"func"`
	Args    string `json:"workload"`
	Timeout int64  `json:"timeout"`
	SchedAt int64  `json:"sched_at"`
	RunAt   int64  `json:"run_at"`
	Counter int64  `json:"counter"`
	Status  string `json:"status"`
}
