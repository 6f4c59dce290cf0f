package periodic

import "strconv"

// Command is a message's command byte, numbered as in the real server's
// protocol package.
type Command uint8

const (
	Noop       Command = 0
	GrabJob    Command = 1
	SchedLater Command = 2
	WorkDone   Command = 3
	WorkFail   Command = 4
	JobAssign  Command = 5
	NoJob      Command = 6
	CanDo      Command = 7
	CantDo     Command = 8
	Ping       Command = 9
	Pong       Command = 10
	Sleep      Command = 11
	Unknown    Command = 12
	SubmitJob  Command = 13
	Status     Command = 14
	DropFunc   Command = 15
	Success    Command = 16
	RemoveJob  Command = 17
	Dump       Command = 18
	Load       Command = 19
)

// The client types of the handshake frame.
const (
	TypeClient = 1
	TypeWorker = 2
)

var commandNames = [...]string{
	Noop:       "NOOP",
	GrabJob:    "GRAB_JOB",
	SchedLater: "SCHED_LATER",
	WorkDone:   "WORK_DONE",
	WorkFail:   "WORK_FAIL",
	JobAssign:  "JOB_ASSIGN",
	NoJob:      "NO_JOB",
	CanDo:      "CAN_DO",
	CantDo:     "CANT_DO",
	Ping:       "PING",
	Pong:       "PONG",
	Sleep:      "SLEEP",
	Unknown:    "UNKNOWN",
	SubmitJob:  "SUBMIT_JOB",
	Status:     "STATUS",
	DropFunc:   "DROP_FUNC",
	Success:    "SUCCESS",
	RemoveJob:  "REMOVE_JOB",
	Dump:       "DUMP",
	Load:       "LOAD",
}

// String returns the spec's name of c, or "Command(N)" for a byte the
// protocol does not define (the real server panics there; a log line should
// not).
func (c Command) String() string {
	if int(c) < len(commandNames) {
		return commandNames[c]
	}
	return "Command(" + strconv.Itoa(int(c)) + ")"
}
