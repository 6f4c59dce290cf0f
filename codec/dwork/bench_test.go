package dwork

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// BenchmarkDecodeValidate is what the server does with each request it
// reads: decode it into a reused message and validate it. (The messages are
// built here, not in package variables: those are initialized before
// dwork.pb.go's init registers the message types.)
func BenchmarkDecodeValidate(b *testing.B) {
	create := &QueryMsg{Type: typ(QueryMsg_Create)}
	for i := range 16 { // dquery's block of 16
		t := &TaskMsg{Name: proto.String("task-000" + string(rune('a'+i))), Origin: proto.String("client.example.org")}
		if i > 0 {
			t.Pred = []*TaskMsg_Dep{{Name: create.Task[i-1].Name}}
		}
		create.Task = append(create.Task, t)
	}
	for _, bc := range []struct {
		name string
		m    *QueryMsg
	}{
		{"Steal", &QueryMsg{Type: typ(QueryMsg_Steal), N: proto.Int32(1), Location: proto.String("worker-17.example.org")}},
		{"Complete", &QueryMsg{Type: typ(QueryMsg_Transfer), Task: []*TaskMsg{stolen("task-0001")}, Location: proto.String("worker-17.example.org")}},
		{"Create16", create},
	} {
		msg := Append(nil, bc.m)
		b.Run(bc.name, func(b *testing.B) {
			var m QueryMsg
			b.ReportAllocs()
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if err := Decode(msg, &m); err != nil {
					b.Fatal(err)
				}
				if err := ValidateRequest(&m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendReply writes the reply to a Steal of one task into a
// reused buffer.
func BenchmarkAppendReply(b *testing.B) {
	reply := &QueryMsg{Type: typ(QueryMsg_Transfer), Task: []*TaskMsg{stolen("task-0001")}}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = Append(buf[:0], reply)
	}
}
