package periodic

import "testing"

func TestCommandString(t *testing.T) {
	for _, tc := range []struct {
		c    Command
		want string
	}{
		{Noop, "NOOP"}, {GrabJob, "GRAB_JOB"}, {SchedLater, "SCHED_LATER"}, {WorkDone, "WORK_DONE"},
		{WorkFail, "WORK_FAIL"}, {JobAssign, "JOB_ASSIGN"}, {NoJob, "NO_JOB"}, {CanDo, "CAN_DO"},
		{CantDo, "CANT_DO"}, {Ping, "PING"}, {Pong, "PONG"}, {Sleep, "SLEEP"}, {Unknown, "UNKNOWN"},
		{SubmitJob, "SUBMIT_JOB"}, {Status, "STATUS"}, {DropFunc, "DROP_FUNC"}, {Success, "SUCCESS"},
		{RemoveJob, "REMOVE_JOB"}, {Dump, "DUMP"}, {Load, "LOAD"},
		{20, "Command(20)"}, {255, "Command(255)"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("Command(%d).String() = %q, want %q", uint8(tc.c), got, tc.want)
		}
	}
}

// TestCommandValues pins the byte values: they are the wire format.
func TestCommandValues(t *testing.T) {
	want := []Command{Noop, GrabJob, SchedLater, WorkDone, WorkFail, JobAssign, NoJob, CanDo, CantDo,
		Ping, Pong, Sleep, Unknown, SubmitJob, Status, DropFunc, Success, RemoveJob, Dump, Load}
	for i, c := range want {
		if int(c) != i {
			t.Errorf("%v = %d, want %d", c, c, i)
		}
	}
}
