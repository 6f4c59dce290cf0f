package gearman

import "strconv"

// Magic tells requests (to the server) from responses (from the server).
type Magic uint8

const (
	Req Magic = 1 // "\x00REQ"
	Res Magic = 2 // "\x00RES"
)

func (m Magic) String() string {
	switch m {
	case Req:
		return "REQ"
	case Res:
		return "RES"
	}
	return "Magic(" + strconv.Itoa(int(m)) + ")"
}

// Type is a binary packet's type, numbered as in gearmand/libgearman.
type Type uint32

const (
	CanDo                     Type = 1
	CantDo                    Type = 2
	ResetAbilities            Type = 3
	PreSleep                  Type = 4
	Noop                      Type = 6 // 5 was never used
	SubmitJob                 Type = 7
	JobCreated                Type = 8
	GrabJob                   Type = 9
	NoJob                     Type = 10
	JobAssign                 Type = 11
	WorkStatus                Type = 12
	WorkComplete              Type = 13
	WorkFail                  Type = 14
	GetStatus                 Type = 15
	EchoReq                   Type = 16
	EchoRes                   Type = 17
	SubmitJobBg               Type = 18
	Error                     Type = 19
	StatusRes                 Type = 20
	SubmitJobHigh             Type = 21
	SetClientID               Type = 22
	CanDoTimeout              Type = 23
	AllYours                  Type = 24
	WorkException             Type = 25
	OptionReq                 Type = 26
	OptionRes                 Type = 27
	WorkData                  Type = 28
	WorkWarning               Type = 29
	GrabJobUniq               Type = 30
	JobAssignUniq             Type = 31
	SubmitJobHighBg           Type = 32
	SubmitJobLow              Type = 33
	SubmitJobLowBg            Type = 34
	SubmitJobSched            Type = 35
	SubmitJobEpoch            Type = 36
	SubmitReduceJob           Type = 37
	SubmitReduceJobBackground Type = 38
	GrabJobAll                Type = 39
	JobAssignAll              Type = 40
	GetStatusUnique           Type = 41
	StatusResUnique           Type = 42
)

// maxType is the highest type gearmand 1.1.20 knows.
const maxType = StatusResUnique

// typeInfo is libgearman's command table (libgearman/command.cc,
// gearmand_command_info_list). That table stores the number of NUL-terminated
// arguments plus a flag for a trailing opaque "data" part; argc here is the
// total count of arguments on the wire, i.e. its count plus one when the flag
// is set. Where the spec and the real table differ, the table wins:
//
//   - SUBMIT_REDUCE_JOB(_BACKGROUND) is {4, data}: five arguments,
//     FUNC\0UNIQ\0REDUCER\0AGGREGATE\0DATA. libgearman always sends AGGREGATE
//     empty and gearmand ignores it, but it is on the wire, so a four-argument
//     split would put "\0DATA" into the payload.
//   - JOB_ASSIGN_ALL is {4, data}: HANDLE\0FUNC\0UNIQ\0REDUCER\0DATA.
//   - STATUS_RES_UNIQUE is {6}: UNIQUE\0KNOWN\0RUNNING\0NUM\0DENOM\0CLIENTS.
//   - ECHO_REQ/ECHO_RES are {0, data}: one argument, the whole body.
//
// Type 5 (libgearman's UNUSED) and 0 (its internal TEXT) are not valid on the
// wire and are reported as unknown.
var typeInfo = [maxType + 1]struct {
	name string
	argc int8
}{
	0:                         {"", -1},
	CanDo:                     {"CAN_DO", 1},
	CantDo:                    {"CANT_DO", 1},
	ResetAbilities:            {"RESET_ABILITIES", 0},
	PreSleep:                  {"PRE_SLEEP", 0},
	5:                         {"", -1},
	Noop:                      {"NOOP", 0},
	SubmitJob:                 {"SUBMIT_JOB", 3},
	JobCreated:                {"JOB_CREATED", 1},
	GrabJob:                   {"GRAB_JOB", 0},
	NoJob:                     {"NO_JOB", 0},
	JobAssign:                 {"JOB_ASSIGN", 3},
	WorkStatus:                {"WORK_STATUS", 3},
	WorkComplete:              {"WORK_COMPLETE", 2},
	WorkFail:                  {"WORK_FAIL", 1},
	GetStatus:                 {"GET_STATUS", 1},
	EchoReq:                   {"ECHO_REQ", 1},
	EchoRes:                   {"ECHO_RES", 1},
	SubmitJobBg:               {"SUBMIT_JOB_BG", 3},
	Error:                     {"ERROR", 2},
	StatusRes:                 {"STATUS_RES", 5},
	SubmitJobHigh:             {"SUBMIT_JOB_HIGH", 3},
	SetClientID:               {"SET_CLIENT_ID", 1},
	CanDoTimeout:              {"CAN_DO_TIMEOUT", 2},
	AllYours:                  {"ALL_YOURS", 0},
	WorkException:             {"WORK_EXCEPTION", 2},
	OptionReq:                 {"OPTION_REQ", 1},
	OptionRes:                 {"OPTION_RES", 1},
	WorkData:                  {"WORK_DATA", 2},
	WorkWarning:               {"WORK_WARNING", 2},
	GrabJobUniq:               {"GRAB_JOB_UNIQ", 0},
	JobAssignUniq:             {"JOB_ASSIGN_UNIQ", 4},
	SubmitJobHighBg:           {"SUBMIT_JOB_HIGH_BG", 3},
	SubmitJobLow:              {"SUBMIT_JOB_LOW", 3},
	SubmitJobLowBg:            {"SUBMIT_JOB_LOW_BG", 3},
	SubmitJobSched:            {"SUBMIT_JOB_SCHED", 8},
	SubmitJobEpoch:            {"SUBMIT_JOB_EPOCH", 4},
	SubmitReduceJob:           {"SUBMIT_REDUCE_JOB", 5},
	SubmitReduceJobBackground: {"SUBMIT_REDUCE_JOB_BACKGROUND", 5},
	GrabJobAll:                {"GRAB_JOB_ALL", 0},
	JobAssignAll:              {"JOB_ASSIGN_ALL", 5},
	GetStatusUnique:           {"GET_STATUS_UNIQUE", 1},
	StatusResUnique:           {"STATUS_RES_UNIQUE", 6},
}

// String returns libgearman's name for t ("CAN_DO", "SUBMIT_JOB_BG", ...), or
// "UNKNOWN(n)" for a type gearmand does not know.
func (t Type) String() string {
	if t <= maxType && typeInfo[t].name != "" {
		return typeInfo[t].name
	}
	return "UNKNOWN(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// Argc returns how many NUL-separated arguments a packet of type t carries,
// or -1 if gearmand does not know the type.
func (t Type) Argc() int {
	if t > maxType {
		return -1
	}
	return int(typeInfo[t].argc)
}

// Known reports whether gearmand 1.1.20 knows t.
func (t Type) Known() bool { return t.Argc() >= 0 }
