package gearman

import (
	"strings"
	"testing"
)

func TestTypeTable(t *testing.T) {
	// Argc per libgearman's command table (see typeInfo).
	want := map[int][]Type{
		0: {ResetAbilities, PreSleep, Noop, GrabJob, NoJob, GrabJobUniq, GrabJobAll, AllYours},
		1: {CanDo, CantDo, JobCreated, WorkFail, GetStatus, EchoReq, EchoRes, SetClientID,
			OptionReq, OptionRes, GetStatusUnique},
		2: {WorkComplete, WorkException, WorkData, WorkWarning, Error, CanDoTimeout},
		3: {SubmitJob, SubmitJobBg, SubmitJobHigh, SubmitJobHighBg, SubmitJobLow, SubmitJobLowBg,
			JobAssign, WorkStatus},
		4: {JobAssignUniq, SubmitJobEpoch},
		5: {StatusRes, JobAssignAll, SubmitReduceJob, SubmitReduceJobBackground},
		6: {StatusResUnique},
		8: {SubmitJobSched},
	}
	seen := 0
	for argc, types := range want {
		for _, typ := range types {
			seen++
			if typ.Argc() != argc || !typ.Known() {
				t.Errorf("%v.Argc() = %d, want %d", typ, typ.Argc(), argc)
			}
			if typ.Argc() > MaxArgs {
				t.Errorf("%v.Argc() > MaxArgs", typ)
			}
		}
	}
	if seen != 41 { // 1..42 without 5
		t.Errorf("table lists %d types, want 41", seen)
	}
	for _, typ := range []Type{0, 5, 43, 1000, 0xffffffff} {
		if typ.Argc() != -1 || typ.Known() {
			t.Errorf("%d.Argc() = %d, want -1", uint32(typ), typ.Argc())
		}
	}
}

func TestTypeString(t *testing.T) {
	for _, tc := range []struct {
		typ  Type
		name string
	}{
		{CanDo, "CAN_DO"},
		{SubmitJobBg, "SUBMIT_JOB_BG"},
		{SetClientID, "SET_CLIENT_ID"},
		{SubmitJobEpoch, "SUBMIT_JOB_EPOCH"},
		{SubmitReduceJobBackground, "SUBMIT_REDUCE_JOB_BACKGROUND"},
		{StatusResUnique, "STATUS_RES_UNIQUE"},
		{0, "UNKNOWN(0)"},
		{5, "UNKNOWN(5)"},
		{43, "UNKNOWN(43)"},
		{0xffffffff, "UNKNOWN(4294967295)"},
	} {
		if got := tc.typ.String(); got != tc.name {
			t.Errorf("Type(%d).String() = %q, want %q", uint32(tc.typ), got, tc.name)
		}
	}
	for typ := Type(1); typ <= maxType; typ++ {
		if typ != 5 && strings.HasPrefix(typ.String(), "UNKNOWN") {
			t.Errorf("type %d has no name", uint32(typ))
		}
	}
	if Req.String() != "REQ" || Res.String() != "RES" || Magic(7).String() != "Magic(7)" {
		t.Errorf("Magic.String: %s %s %s", Req, Res, Magic(7))
	}
}
