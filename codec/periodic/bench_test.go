package periodic

import (
	"testing"
)

// The hot frames: what every job costs the server.
var (
	benchID     = []byte("Nk8mL2-Gg")
	benchSubmit = AppendRequest(nil, benchID, SubmitJob, []byte(submitJSON))
	benchJob    = Job{ID: 123456, Name: []byte("report-2017-06-23"), Func: []byte("mail"),
		Workload: []byte(`{"to":"a@b.example","subject":"daily report","id":42}`),
		Timeout:  30, SchedAt: 1500000000, RunAt: 1499999970, Counter: 3}
)

// BenchmarkParseSubmitJob is what the server does with each SUBMIT_JOB:
// frame and message, then also the job JSON.
func BenchmarkParseSubmitJob(b *testing.B) {
	for _, withJob := range []bool{false, true} {
		name := "frame+message"
		if withJob {
			name += "+job"
		}
		b.Run(name, func(b *testing.B) {
			var m Message
			var j Job
			b.ReportAllocs()
			b.SetBytes(int64(len(benchSubmit)))
			for b.Loop() {
				p, n, _, err := ParseFrame(benchSubmit, ReqMagic, 0)
				if n != len(benchSubmit) || err != nil {
					b.Fatal(n, err)
				}
				if err := ParseMessage(p, &m); err != nil || m.Cmd != SubmitJob {
					b.Fatal(m.Cmd, err)
				}
				if withJob {
					if err := DecodeJob(m.Data, &j); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func BenchmarkDecodeJob(b *testing.B) {
	for _, bc := range []struct {
		name string
		data []byte
	}{
		{"submit", []byte(submitJSON)},
		{"assign", AppendJob(nil, &benchJob)},
		{"escapes", []byte(`{"job_id":1,"name":"a\u003cb","func":"f","workload":"{\"x\":\"\u00e9\\n\"}","timeout":0,"sched_at":0,"run_at":0,"counter":0,"status":"ready"}`)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var j Job
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				if err := DecodeJob(bc.data, &j); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeJobEncodingJSON is the same work by encoding/json, for
// comparison.
func BenchmarkDecodeJobEncodingJSON(b *testing.B) {
	data := []byte(submitJSON)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	var j Job
	for b.Loop() {
		if err := decodeJobSlow(data, &j); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendJob(b *testing.B) {
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	b.SetBytes(int64(len(AppendJob(nil, &benchJob))))
	for b.Loop() {
		buf = AppendJob(buf[:0], &benchJob)
	}
}

func BenchmarkAppendJobAssign(b *testing.B) {
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJobAssign(buf[:0], benchID, &benchJob)
	}
}

func BenchmarkAppendReply(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendReply(buf[:0], benchID, Success)
	}
}

// BenchmarkDecodeJobList is a LOAD of 1000 jobs, both passes.
func BenchmarkDecodeJobList(b *testing.B) {
	data := bigList(1000)
	fn := func(*Job) error { return nil }
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := DecodeJobList(data, fn); err != nil {
			b.Fatal(err)
		}
	}
}
