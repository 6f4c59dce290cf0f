package main

import (
	"fmt"
	"os"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// noticeLevel is gearmand's NOTICE as gearmand writes its own notices: past
// --verbose, whatever it says (only -l none silences them). It carries what
// an operator must see at the default level: the listeners, a protocol
// turned off, the data directory and the jobs restored, signals, shutdown.
// Above zap's Fatal, so that no standard level filter drops it; the level
// encoder prints it as NOTICE.
const noticeLevel = zapcore.FatalLevel + 1

// notice logs msg at noticeLevel.
func notice(log *zap.Logger, msg string, fields ...zap.Field) {
	log.Log(noticeLevel, msg, fields...)
}

// logFile is -l's file. SIGHUP reopens it at its path, as gearmand does for
// logrotate: the old file has been moved away, and the next line goes to a
// new one.
type logFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func openLogFile(path string) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &logFile{path: path, f: f}, nil
}

func (l *logFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

func (l *logFile) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Sync()
}

// reopen opens the path again and swaps the new file in. If the path cannot
// be opened (a directory made unwritable, the user switched by -u), the old
// file stays in use and the error says why.
func (l *logFile) reopen() error {
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	return old.Close()
}

func (l *logFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// logger is the process's log: zap over -l's destination at --verbose's
// level, with the file SIGHUP reopens (nil unless -l names a file).
type logger struct {
	*zap.Logger
	file *logFile
}

// newLogger builds the logger for -l/--log-file and --verbose.
func newLogger(path, verbose string) (*logger, error) {
	if path == "none" {
		return &logger{Logger: zap.NewNop()}, nil
	}
	l := &logger{}
	var out zapcore.WriteSyncer = zapcore.Lock(os.Stderr)
	if path != "stderr" {
		f, err := openLogFile(path)
		if err != nil {
			return nil, err
		}
		l.file, out = f, f
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	enc.EncodeLevel = encodeLevel
	min := zapLevel(verboseLevel(verbose))
	enabled := zap.LevelEnablerFunc(func(lvl zapcore.Level) bool { return lvl >= min })
	// No stack traces: zap would add them from the level above Fatal on,
	// which is noticeLevel.
	noStacks := zap.AddStacktrace(zap.LevelEnablerFunc(func(zapcore.Level) bool { return false }))
	l.Logger = zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(enc), out, enabled), noStacks)
	return l, nil
}

// reopen is SIGHUP: it notes the signal in the old file, then reopens the
// path and says so in the new one. Logging to stderr, there is nothing to
// reopen.
func (l *logger) reopen() {
	if l.file == nil {
		notice(l.Logger, "SIGHUP: nothing to reopen, the log goes to stderr")
		return
	}
	notice(l.Logger, "SIGHUP, reopening log file", zap.String("path", l.file.path))
	if err := l.file.reopen(); err != nil {
		l.Error("cannot reopen the log file: logging on to the old one", zap.String("path", l.file.path), zap.Error(err))
		return
	}
	notice(l.Logger, "log file reopened", zap.String("path", l.file.path))
}

// close flushes and closes the log file.
func (l *logger) close() {
	l.Sync()
	if l.file != nil {
		l.file.Close()
	}
}

func encodeLevel(lvl zapcore.Level, enc zapcore.PrimitiveArrayEncoder) {
	if lvl == noticeLevel {
		enc.AppendString("notice")
		return
	}
	zapcore.LowercaseLevelEncoder(lvl, enc)
}

// zapLevel maps gearmand's levels (0 FATAL .. 7 DEBUG) onto zap's.
func zapLevel(l int) zapcore.Level {
	switch {
	case l <= 3: // FATAL ALERT CRITICAL ERROR
		return zapcore.ErrorLevel
	case l == 4: // WARNING
		return zapcore.WarnLevel
	case l <= 6: // NOTICE INFO
		return zapcore.InfoLevel
	default:
		return zapcore.DebugLevel
	}
}

// stderrf is for what happens before there is a logger, or when it failed:
// the program's name and the message, as gearmand prints its own.
func stderrf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", os.Args[0], fmt.Sprintf(format, a...))
}
