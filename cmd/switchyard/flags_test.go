package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"switchyard/sched"
)

// isolate points the default configuration file at a path that does not
// exist, so that the machine's /etc/gearmand.conf cannot leak into a test.
func isolate(t *testing.T) string {
	t.Helper()
	old := defaultConfigFile
	defaultConfigFile = filepath.Join(t.TempDir(), "gearmand.conf")
	t.Cleanup(func() { defaultConfigFile = old })
	return defaultConfigFile
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// want builds the expected options: the defaults changed by f.
func want(f func(o *options)) func() *options {
	return func() *options {
		o := defaultOptions()
		if f != nil {
			f(o)
		}
		return o
	}
}

func checkOptions(t *testing.T, got, exp *options) {
	t.Helper()
	if !reflect.DeepEqual(got, exp) {
		gv, ev := reflect.ValueOf(*got), reflect.ValueOf(*exp)
		for i := 0; i < gv.NumField(); i++ {
			if !reflect.DeepEqual(gv.Field(i).Interface(), ev.Field(i).Interface()) {
				t.Errorf("%s = %#v, want %#v", gv.Type().Field(i).Name, gv.Field(i).Interface(), ev.Field(i).Interface())
			}
		}
	}
}

// withSSL sets --ssl and its three files.
func withSSL(ca, cert, key string) func(o *options) {
	return func(o *options) { o.SSL, o.SSLCAFile, o.SSLCertificate, o.SSLKey = true, ca, cert, key }
}

func TestDefaults(t *testing.T) {
	cfg := isolate(t)
	o, err := parseArgs(nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	exp := &options{
		Port: "4730", Verbose: "ERROR", LogFile: "stderr", Backlog: 32,
		KeepaliveIdle: -1, KeepaliveInterval: -1, KeepaliveCount: -1,
		QueueType: "durable", Fsync: "batch", ConfigFile: cfg, MaxPacket: 64 << 20, MaxMemory: -1, FunctionTTL: time.Hour,
		ShutdownTimeout: 30 * time.Second, SqliteTable: "gearman_queue",
		MemodbQueue: 10 * time.Second, MemodbHeartbeat: 10 * time.Second,
		HTTPPort: "8080", HTTPTimeout: 10 * time.Minute, FailuresKept: 20, WorkerWakeup: sched.WakeDemand,
	}
	checkOptions(t, o, exp)
}

// A size is digits and one unit: switchyard's own K, M, G, T (either
// case) or GOMEMLIMIT's B, KiB, MiB, GiB, TiB, all powers of 1024, within
// the option's range.
func TestParseBytes(t *testing.T) {
	const packet, memory = 1, 2 // the ranges of --max-packet and --max-memory
	ranges := map[int][2]int64{packet: {1, maxMaxPacket}, memory: {0, maxMaxMemory}}
	tests := []struct {
		in    string
		rng   int
		want  int64
		valid bool
	}{
		{"0", memory, 0, true},
		{"4096", memory, 4096, true},
		{"007", memory, 7, true},
		{"512M", memory, 512 << 20, true},
		{"2g", memory, 2 << 30, true},
		{"64k", memory, 64 << 10, true},
		{"1T", memory, 1 << 40, true},
		{"1024T", memory, 1 << 50, true},
		{"4096B", memory, 4096, true},
		{"0B", memory, 0, true},
		{"64KiB", memory, 64 << 10, true},
		{"256MiB", memory, 256 << 20, true},
		{"1GiB", memory, 1 << 30, true},
		{"1024TiB", memory, 1 << 50, true},
		{"1025T", memory, 0, false},
		{"1025TiB", memory, 0, false},
		{"99999999999999999999", memory, 0, false}, // over int64
		{"256MB", memory, 0, false},                // SI: not a 1024 unit
		{"256mb", memory, 0, false},
		{"1KB", memory, 0, false},
		{"256mib", memory, 0, false}, // GOMEMLIMIT's spelling only
		{"256Mi", memory, 0, false},
		{"256b", memory, 0, false},
		{"256 MiB", memory, 0, false},
		{"", memory, 0, false},
		{"M", memory, 0, false},
		{"MiB", memory, 0, false},
		{"-1", memory, 0, false},
		{"+5", memory, 0, false},
		{"1.5G", memory, 0, false},
		{"5X", memory, 0, false},
		{"1", packet, 1, true},
		{"1B", packet, 1, true},
		{"4G", packet, 4 << 30, true},
		{"4GiB", packet, 4 << 30, true},
		{"4194304KiB", packet, 4 << 30, true},
		{"0", packet, 0, false},
		{"0MiB", packet, 0, false},
		{"4294967297", packet, 0, false},
		{"5GiB", packet, 0, false},
		{"1T", packet, 0, false},
	}
	for _, tt := range tests {
		r := ranges[tt.rng]
		got, ok := parseBytes(tt.in, r[0], r[1])
		if got != tt.want || ok != tt.valid {
			t.Errorf("parseBytes(%q, %d, %d) = %d, %v; want %d, %v", tt.in, r[0], r[1], got, ok, tt.want, tt.valid)
		}
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want func() *options
	}{
		{"no args", nil, nil, want(nil)},

		// -p/--port in every syntax, service names, GEARMAND_PORT.
		{"-p N", []string{"-p", "4731"}, nil, want(func(o *options) { o.Port = "4731" })},
		{"--max-memory SIZE", []string{"--max-memory", "512M"}, nil, want(func(o *options) { o.MaxMemory = 512 << 20 })},
		{"--max-memory as GOMEMLIMIT", []string{"--max-memory", "256MiB"}, nil, want(func(o *options) { o.MaxMemory = 256 << 20 })},
		{"--max-memory=GiB", []string{"--max-memory=1GiB"}, nil, want(func(o *options) { o.MaxMemory = 1 << 30 })},
		{"--max-memory 0", []string{"--max-memory=0"}, nil, want(func(o *options) { o.MaxMemory = 0 })},
		{"--max-memory auto", []string{"--max-memory", "auto"}, nil, want(nil)},
		{"-pN", []string{"-p4731"}, nil, want(func(o *options) { o.Port = "4731" })},
		{"--port N", []string{"--port", "4731"}, nil, want(func(o *options) { o.Port = "4731" })},
		{"--port=N", []string{"--port=4731"}, nil, want(func(o *options) { o.Port = "4731" })},
		{"port 0", []string{"-p", "0"}, nil, want(func(o *options) { o.Port = "0" })},

		// -r http and its options.
		{"--recover", []string{"--recover"}, nil, want(func(o *options) { o.Recover = true })},
		{"-r http", []string{"-r", "http"}, nil, want(func(o *options) { o.HTTP = true })},
		{"--protocol=http", []string{"--protocol=http"}, nil, want(func(o *options) { o.HTTP = true })},
		{"-rhttp --http-port", []string{"-rhttp", "--http-port", "8081"}, nil, want(func(o *options) { o.HTTP, o.HTTPPort, o.HTTPPortGiven = true, "8081", true })},
		{"http port service name", []string{"-r", "http", "--http-port=http-alt"}, nil, want(func(o *options) { o.HTTP, o.HTTPPort, o.HTTPPortGiven = true, "8080", true })},
		{"http port 0", []string{"-r", "http", "--http-port=0"}, nil, want(func(o *options) { o.HTTP, o.HTTPPort, o.HTTPPortGiven = true, "0", true })},
		{"http port without -r http", []string{"--http-port", "x"}, nil, want(func(o *options) { o.HTTPPort, o.HTTPPortGiven = "x", true })},
		{"--http-timeout seconds", []string{"--http-timeout", "90"}, nil, want(func(o *options) { o.HTTPTimeout = 90 * time.Second })},
		{"--http-timeout duration", []string{"--http-timeout=1h"}, nil, want(func(o *options) { o.HTTPTimeout = time.Hour })},
		{"--http-timeout 0", []string{"--http-timeout=0"}, nil, want(func(o *options) { o.HTTPTimeout = 0 })},
		{"port 65535", []string{"-p", "65535"}, nil, want(func(o *options) { o.Port = "65535" })},
		{"port leading zero", []string{"-p", "04731"}, nil, want(func(o *options) { o.Port = "4731" })},
		{"port service name", []string{"-p", "http"}, nil, want(func(o *options) { o.Port = "80" })},
		{"empty port is the default", []string{"-p", ""}, nil, want(nil)},
		{"env port", nil, map[string]string{"GEARMAND_PORT": "5000"}, want(func(o *options) { o.Port = "5000" })},
		{"env port service", nil, map[string]string{"GEARMAND_PORT": "https"}, want(func(o *options) { o.Port = "443" })},
		{"empty env port", nil, map[string]string{"GEARMAND_PORT": ""}, want(nil)},
		{"flag beats env", []string{"-p", "4731"}, map[string]string{"GEARMAND_PORT": "5000"}, want(func(o *options) { o.Port = "4731" })},
		{"explicit default flag beats env", []string{"--port=4730"}, map[string]string{"GEARMAND_PORT": "5000"}, want(nil)},

		{"a cluster node", []string{"--node-id", "n1", "--cluster-listen", "10.0.0.1:7000", "--cluster-peers", "n1@10.0.0.1:7000,n2@10.0.0.2:7000"}, nil,
			want(func(o *options) {
				o.NodeID, o.ClusterListen, o.ClusterPeers = "n1", "10.0.0.1:7000", "n1@10.0.0.1:7000,n2@10.0.0.2:7000"
			})},
		{"-L", []string{"-L", "127.0.0.1"}, nil, want(func(o *options) { o.Listen = "127.0.0.1" })},
		{"-Laddr", []string{"-L127.0.0.1"}, nil, want(func(o *options) { o.Listen = "127.0.0.1" })},
		{"--listen=", []string{"--listen=::1"}, nil, want(func(o *options) { o.Listen = "::1" })},
		{"--listen ", []string{"--listen", "localhost"}, nil, want(func(o *options) { o.Listen = "localhost" })},

		{"-t", []string{"-t", "8"}, nil, want(func(o *options) { o.Threads = 8 })},
		{"-tN", []string{"-t8"}, nil, want(func(o *options) { o.Threads = 8 })},
		{"--threads N", []string{"--threads", "8"}, nil, want(func(o *options) { o.Threads = 8 })},
		{"--threads=N", []string{"--threads=8"}, nil, want(func(o *options) { o.Threads = 8 })},
		{"threads 0", []string{"-t", "0"}, nil, want(nil)},
		{"threads +4", []string{"-t", "+4"}, nil, want(func(o *options) { o.Threads = 4 })},
		{"threads 010 is decimal", []string{"-t", "010"}, nil, want(func(o *options) { o.Threads = 10 })},

		{"-j", []string{"-j", "3"}, nil, want(func(o *options) { o.JobRetries = 3 })},
		{"-jN", []string{"-j3"}, nil, want(func(o *options) { o.JobRetries = 3 })},
		{"--job-retries N", []string{"--job-retries", "3"}, nil, want(func(o *options) { o.JobRetries = 3 })},
		{"--job-retries=N", []string{"--job-retries=3"}, nil, want(func(o *options) { o.JobRetries = 3 })},

		{"-w", []string{"-w", "2"}, nil, want(func(o *options) { o.WorkerWakeup = 2 })},
		{"-wN", []string{"-w2"}, nil, want(func(o *options) { o.WorkerWakeup = 2 })},
		{"--worker-wakeup N", []string{"--worker-wakeup", "2"}, nil, want(func(o *options) { o.WorkerWakeup = 2 })},
		{"--worker-wakeup=N", []string{"--worker-wakeup=2"}, nil, want(func(o *options) { o.WorkerWakeup = 2 })},
		{"-w 0 wakes all, as gearmand", []string{"-w", "0"}, nil, want(func(o *options) { o.WorkerWakeup = 0 })},
		{"-w auto", []string{"-w", "auto"}, nil, want(func(o *options) { o.WorkerWakeup = sched.WakeDemand })},

		{"-R", []string{"-R"}, nil, want(func(o *options) { o.RoundRobin = true })},
		{"--round-robin", []string{"--round-robin"}, nil, want(func(o *options) { o.RoundRobin = true })},

		{"--job-handle-prefix X", []string{"--job-handle-prefix", "J:x"}, nil, want(func(o *options) { o.JobHandlePrefix = "J:x" })},
		{"--job-handle-prefix=X", []string{"--job-handle-prefix=J:x"}, nil, want(func(o *options) { o.JobHandlePrefix = "J:x" })},
		// boost takes the next word even if it looks like a long option.
		{"value looking like a long option", []string{"--job-handle-prefix", "--exceptions"}, nil,
			want(func(o *options) { o.JobHandlePrefix = "--exceptions" })},
		// ... or like an unknown short option.
		{"value looking like an unknown short option", []string{"-L", "-x"}, nil, want(func(o *options) { o.Listen = "-x" })},

		{"--exceptions", []string{"--exceptions"}, nil, want(func(o *options) { o.Exceptions = true })},

		{"-l path", []string{"-l", "/tmp/g.log"}, nil, want(func(o *options) { o.LogFile = "/tmp/g.log" })},
		{"-lpath", []string{"-l/tmp/g.log"}, nil, want(func(o *options) { o.LogFile = "/tmp/g.log" })},
		{"--log-file none", []string{"--log-file", "none"}, nil, want(func(o *options) { o.LogFile = "none" })},
		{"--log-file=stderr", []string{"--log-file=stderr"}, nil, want(nil)},
		{"-l empty is none", []string{"-l", ""}, nil, want(func(o *options) { o.LogFile = "none" })},
		{"-l STDERR is a file", []string{"-l", "STDERR"}, nil, want(func(o *options) { o.LogFile = "STDERR" })},

		{"-P", []string{"-P", "/run/g.pid"}, nil, want(func(o *options) { o.PidFile = "/run/g.pid" })},
		{"-Ppath", []string{"-P/run/g.pid"}, nil, want(func(o *options) { o.PidFile = "/run/g.pid" })},
		{"--pid-file N", []string{"--pid-file", "/run/g.pid"}, nil, want(func(o *options) { o.PidFile = "/run/g.pid" })},
		{"--pid-file=N", []string{"--pid-file=/run/g.pid"}, nil, want(func(o *options) { o.PidFile = "/run/g.pid" })},

		{"-d", []string{"-d"}, nil, want(func(o *options) { o.Daemon = true })},
		{"--daemon", []string{"--daemon"}, nil, want(func(o *options) { o.Daemon = true })},

		{"--verbose N", []string{"--verbose", "INFO"}, nil, want(func(o *options) { o.Verbose = "INFO" })},
		{"--verbose=N", []string{"--verbose=DEBUG"}, nil, want(func(o *options) { o.Verbose = "DEBUG" })},
		{"--verbose lower case", []string{"--verbose", "warning"}, nil, want(func(o *options) { o.Verbose = "WARNING" })},
		{"--verbose mixed case", []string{"--verbose=Critical"}, nil, want(func(o *options) { o.Verbose = "CRITICAL" })},
		{"--verbose FATAL", []string{"--verbose", "FATAL"}, nil, want(func(o *options) { o.Verbose = "FATAL" })},
		{"--verbose ALERT", []string{"--verbose", "ALERT"}, nil, want(func(o *options) { o.Verbose = "ALERT" })},
		{"--verbose NOTICE", []string{"--verbose", "NOTICE"}, nil, want(func(o *options) { o.Verbose = "NOTICE" })},
		{"--verbose ERROR", []string{"--verbose", "ERROR"}, nil, want(nil)},

		{"-V", []string{"-V"}, nil, want(func(o *options) { o.Version = true })},
		{"--version", []string{"--version"}, nil, want(func(o *options) { o.Version = true })},
		{"-h", []string{"-h"}, nil, want(func(o *options) { o.Help = true })},
		{"--help", []string{"--help"}, nil, want(func(o *options) { o.Help = true })},
		{"-h -V", []string{"-h", "-V"}, nil, want(func(o *options) { o.Help = true; o.Version = true })},
		{"--check-args", []string{"--check-args"}, nil, want(func(o *options) { o.CheckArgs = true })},

		{"-b", []string{"-b", "128"}, nil, want(func(o *options) { o.Backlog = 128 })},
		{"-bN", []string{"-b128"}, nil, want(func(o *options) { o.Backlog = 128 })},
		{"--backlog N", []string{"--backlog", "0"}, nil, want(func(o *options) { o.Backlog = 0 })},
		{"--backlog=N", []string{"--backlog=128"}, nil, want(func(o *options) { o.Backlog = 128 })},

		{"--keepalive", []string{"--keepalive"}, nil, want(func(o *options) { o.Keepalive = true })},
		{"--keepalive-idle N", []string{"--keepalive-idle", "60"}, nil, want(func(o *options) { o.KeepaliveIdle = 60 })},
		{"--keepalive-idle=N", []string{"--keepalive-idle=60"}, nil, want(func(o *options) { o.KeepaliveIdle = 60 })},
		{"--keepalive-idle -1", []string{"--keepalive-idle", "-1"}, nil, want(nil)},
		{"--keepalive-interval N", []string{"--keepalive-interval", "10"}, nil, want(func(o *options) { o.KeepaliveInterval = 10 })},
		{"--keepalive-interval=N", []string{"--keepalive-interval=32767"}, nil, want(func(o *options) { o.KeepaliveInterval = 32767 })},
		{"--keepalive-count N", []string{"--keepalive-count", "5"}, nil, want(func(o *options) { o.KeepaliveCount = 5 })},
		{"--keepalive-count=N", []string{"--keepalive-count=127"}, nil, want(func(o *options) { o.KeepaliveCount = 127 })},
		{"all keepalive", []string{"--keepalive", "--keepalive-idle=1", "--keepalive-interval", "2", "--keepalive-count=3"}, nil,
			want(func(o *options) { o.Keepalive, o.KeepaliveIdle, o.KeepaliveInterval, o.KeepaliveCount = true, 1, 2, 3 })},

		{"-u", []string{"-u", "nobody"}, nil, want(func(o *options) { o.User = "nobody" })},
		{"-uname", []string{"-unobody"}, nil, want(func(o *options) { o.User = "nobody" })},
		{"--user N", []string{"--user", "nobody"}, nil, want(func(o *options) { o.User = "nobody" })},
		{"--user=N", []string{"--user=nobody"}, nil, want(func(o *options) { o.User = "nobody" })},

		{"-q builtin", []string{"-q", "builtin"}, nil, want(func(o *options) { o.QueueType = "builtin" })},
		{"-q DURABLE", []string{"-q", "DURABLE"}, nil, want(nil)},
		{"--data-dir and --fsync", []string{"--data-dir", "/var/lib/switchyard", "--fsync=always"}, nil,
			want(func(o *options) { o.DataDir, o.Fsync = "/var/lib/switchyard", "always" })},
		{"-qbuiltin", []string{"-qbuiltin"}, nil, want(func(o *options) { o.QueueType = "builtin" })},
		{"--queue-type builtin", []string{"--queue-type", "builtin"}, nil, want(func(o *options) { o.QueueType = "builtin" })},
		{"--queue-type=BUILTIN", []string{"--queue-type=BUILTIN"}, nil, want(func(o *options) { o.QueueType = "builtin" })},

		{"-f", []string{"-f", "1024"}, nil, want(func(o *options) { o.FileDescriptors = 1024 })},
		{"-fN", []string{"-f1024"}, nil, want(func(o *options) { o.FileDescriptors = 1024 })},
		{"--file-descriptors N", []string{"--file-descriptors", "0"}, nil, want(nil)},
		{"--file-descriptors=N", []string{"--file-descriptors=65536"}, nil, want(func(o *options) { o.FileDescriptors = 65536 })},

		{"--max-packet bytes", []string{"--max-packet", "1000"}, nil, want(func(o *options) { o.MaxPacket = 1000 })},
		{"--max-packet=K", []string{"--max-packet=512K"}, nil, want(func(o *options) { o.MaxPacket = 512 << 10 })},
		{"--max-packet m", []string{"--max-packet", "16m"}, nil, want(func(o *options) { o.MaxPacket = 16 << 20 })},
		{"--max-packet G", []string{"--max-packet", "1G"}, nil, want(func(o *options) { o.MaxPacket = 1 << 30 })},
		{"--max-packet 4G", []string{"--max-packet", "4g"}, nil, want(func(o *options) { o.MaxPacket = 4 << 30 })},
		{"--max-packet 1", []string{"--max-packet", "1"}, nil, want(func(o *options) { o.MaxPacket = 1 })},
		{"--max-packet MiB", []string{"--max-packet", "16MiB"}, nil, want(func(o *options) { o.MaxPacket = 16 << 20 })},
		{"--max-packet 4GiB", []string{"--max-packet=4GiB"}, nil, want(func(o *options) { o.MaxPacket = 4 << 30 })},
		{"--max-packet B", []string{"--max-packet", "65536B"}, nil, want(func(o *options) { o.MaxPacket = 65536 })},

		{"--function-ttl seconds", []string{"--function-ttl", "90"}, nil, want(func(o *options) { o.FunctionTTL = 90 * time.Second })},
		{"--function-ttl=duration", []string{"--function-ttl=10m"}, nil, want(func(o *options) { o.FunctionTTL = 10 * time.Minute })},
		{"--function-ttl 0 keeps all", []string{"--function-ttl", "0"}, nil, want(func(o *options) { o.FunctionTTL = 0 })},
		{"--periodic-listen repeated", []string{"--periodic-listen", "tcp://127.0.0.1:0", "--periodic-listen=unix:///run/p.sock", "--periodic-listen", "tcp://:5000"}, nil,
			want(func(o *options) {
				o.PeriodicListen = []string{"tcp://127.0.0.1:0", "unix:///run/p.sock", "tcp://:5000"}
			})},
		{"--periodic-listen off", []string{"--periodic-listen", "off"}, nil, want(func(o *options) { o.PeriodicListen = []string{} })},
		{"-q libsqlite3", []string{"-q", "LIBSQLITE3", "--libsqlite3-db=/var/q.db", "--libsqlite3-table", "t", "--store-queue-on-shutdown"}, nil,
			want(func(o *options) {
				o.QueueType, o.SqliteDB, o.SqliteTable, o.StoreOnShutdown = "libsqlite3", "/var/q.db", "t", true
			})},
		{"controller", []string{"--controller-socket", "/run/c/main.sock", "--controller-func", "a", "--controller-func=b", "--controller-func", "a"}, nil,
			want(func(o *options) { o.ControllerSocket, o.ControllerFuncs = "/run/c/main.sock", []string{"a", "b"} })},
		{"controller off", []string{"--controller-socket=off"}, nil, want(func(o *options) { o.ControllerSocket = "off" })},
		{"--periodic-listen ipv6", []string{"--periodic-listen", "tcp://[::1]:5000"}, nil, want(func(o *options) { o.PeriodicListen = []string{"tcp://[::1]:5000"} })},
		{"--dwork-listen repeated", []string{"--dwork-listen", "tcp://127.0.0.1:0", "--dwork-listen=tcp://*:6125", "--dwork-listen", "tcp://[::1]:*"}, nil,
			want(func(o *options) { o.DworkListen = []string{"tcp://127.0.0.1:0", "tcp://*:6125", "tcp://[::1]:*"} })},
		{"--dwork-listen off", []string{"--dwork-listen", "off"}, nil, want(func(o *options) { o.DworkListen = []string{} })},
		{"--dwork-func", []string{"--dwork-func", "dag"}, nil, want(func(o *options) { o.DworkFunc = "dag" })},
		{"--dwork-host-timeout", []string{"--dwork-host-timeout", "90s"}, nil, want(func(o *options) { o.DworkHostTimeout = 90 * time.Second })},
		{"--dwork-host-timeout seconds", []string{"--dwork-host-timeout=600"}, nil, want(func(o *options) { o.DworkHostTimeout = 10 * time.Minute })},
		{"--dwork-host-timeout 0", []string{"--dwork-host-timeout", "0"}, nil, want(func(o *options) {})},
		{"--memodb-listen repeated", []string{"--memodb-listen", "tcp://127.0.0.1:0", "--memodb-listen=ipc:///tmp/m.sock", "--memodb-listen", "tcp://[::1]:12701"}, nil,
			want(func(o *options) {
				o.MemodbListen = []string{"tcp://127.0.0.1:0", "ipc:///tmp/m.sock", "tcp://[::1]:12701"}
			})},
		{"--memodb-listen off", []string{"--memodb-listen", "off"}, nil, want(func(o *options) { o.MemodbListen = []string{} })},
		{"--metrics-listen", []string{"--metrics-listen", "0.0.0.0:9100"}, nil, want(func(o *options) { o.MetricsListen = "0.0.0.0:9100" })},
		{"--metrics-listen ipv6", []string{"--metrics-listen=[::1]:0"}, nil, want(func(o *options) { o.MetricsListen = "[::1]:0" })},
		{"--metrics-listen off", []string{"--metrics-listen", "off"}, nil, want(func(o *options) { o.MetricsListen = "off" })},
		{"--ops-token-file", []string{"--ops-token-file", "/etc/switchyard/token"}, nil, want(func(o *options) { o.OpsTokenFile = "/etc/switchyard/token" })},
		{"--failures-kept", []string{"--failures-kept=0"}, nil, want(func(o *options) { o.FailuresKept = 0 })},
		{"--metrics-function-histograms", []string{"--metrics-function-histograms"}, nil, want(func(o *options) { o.FuncHistograms = true })},
		{"--memodb timeouts", []string{"--memodb-queue-timeout", "2", "--memodb-heartbeat=500ms"}, nil,
			want(func(o *options) { o.MemodbQueue, o.MemodbHeartbeat = 2*time.Second, 500*time.Millisecond })},
		{"--admin-shutdown", []string{"--admin-shutdown"}, nil, want(func(o *options) { o.AdminShutdown = true })},
		{"--shutdown-timeout seconds", []string{"--shutdown-timeout", "1"}, nil, want(func(o *options) { o.ShutdownTimeout = time.Second })},
		{"--shutdown-timeout=duration", []string{"--shutdown-timeout=1m30s"}, nil, want(func(o *options) { o.ShutdownTimeout = 90 * time.Second })},
		{"--shutdown-timeout 0", []string{"--shutdown-timeout", "0"}, nil, want(func(o *options) { o.ShutdownTimeout = 0 })},

		// --ssl: each file from its option, else its variable, else gearmand's path.
		{"--ssl", []string{"--ssl"}, nil,
			want(withSSL("/etc/ssl/certs/gearmand-ca.pem", "/etc/ssl/certs/gearmand.pem", "/etc/ssl/certs/gearmand.key"))},
		{"--ssl and files", []string{"--ssl", "--ssl-ca-file", "/ca.pem", "--ssl-certificate=/c.pem", "--ssl-key", "/k.pem"}, nil,
			want(withSSL("/ca.pem", "/c.pem", "/k.pem"))},
		{"--ssl and env", []string{"--ssl"},
			map[string]string{"GEARMAND_CA_CERTIFICATE": "/e/ca.pem", "GEARMAND_SERVER_PEM": "/e/c.pem", "GEARMAND_SERVER_KEY": "/e/k.pem"},
			want(withSSL("/e/ca.pem", "/e/c.pem", "/e/k.pem"))},
		{"options beat env", []string{"--ssl", "--ssl-key", "/k.pem"},
			map[string]string{"GEARMAND_SERVER_PEM": "/e/c.pem", "GEARMAND_SERVER_KEY": "/e/k.pem"},
			want(withSSL("/etc/ssl/certs/gearmand-ca.pem", "/e/c.pem", "/k.pem"))},
		{"empty file option is the default", []string{"--ssl", "--ssl-key", ""}, nil,
			want(withSSL("/etc/ssl/certs/gearmand-ca.pem", "/etc/ssl/certs/gearmand.pem", "/etc/ssl/certs/gearmand.key"))},
		{"env without --ssl is unused", nil, map[string]string{"GEARMAND_SERVER_PEM": "/e/c.pem"}, want(nil)},
		{"--plain-port", []string{"--plain-port", "4731"}, nil, want(func(o *options) { o.PlainPort = "4731" })},
		{"--plain-port service", []string{"--plain-port=http"}, nil, want(func(o *options) { o.PlainPort = "80" })},
		{"--ssl --plain-port, both 0", []string{"--ssl", "-p", "0", "--plain-port", "0", "--ssl-ca-file=/ca.pem", "--ssl-certificate=/c.pem", "--ssl-key=/k.pem"}, nil,
			want(func(o *options) { withSSL("/ca.pem", "/c.pem", "/k.pem")(o); o.Port, o.PlainPort = "0", "0" })},

		// Grouped short options, as boost allows.
		{"-dR", []string{"-dR"}, nil, want(func(o *options) { o.Daemon, o.RoundRobin = true, true })},
		{"-Rd", []string{"-Rd"}, nil, want(func(o *options) { o.Daemon, o.RoundRobin = true, true })},
		{"-Rp4731", []string{"-Rp4731"}, nil, want(func(o *options) { o.RoundRobin, o.Port = true, "4731" })},
		{"-Rp 4731", []string{"-Rp", "4731"}, nil, want(func(o *options) { o.RoundRobin, o.Port = true, "4731" })},
		{"-dRt2", []string{"-dRt2"}, nil, want(func(o *options) { o.Daemon, o.RoundRobin, o.Threads = true, true, 2 })},
		{"-pR is port R", []string{"-p", "http", "-Lx"}, nil, want(func(o *options) { o.Port, o.Listen = "80", "x" })},
		{"-- at the end", []string{"-R", "--"}, nil, want(func(o *options) { o.RoundRobin = true })},

		{"everything", []string{
			"-p", "4731", "-L", "127.0.0.1", "-t", "2", "-j", "3", "-w", "1", "-R", "--job-handle-prefix", "P",
			"--exceptions", "-l", "none", "-P", "/x.pid", "-d", "--verbose", "INFO", "-b", "64", "--keepalive",
			"--keepalive-idle", "30", "--keepalive-interval", "5", "--keepalive-count", "4", "-u", "nobody",
			"-q", "builtin", "-f", "4096", "--max-packet", "1M", "--config-file", "",
			"--admin-shutdown", "--shutdown-timeout", "5",
		}, nil, want(func(o *options) {
			o.Port, o.Listen, o.Threads, o.JobRetries, o.WorkerWakeup, o.RoundRobin = "4731", "127.0.0.1", 2, 3, 1, true
			o.JobHandlePrefix, o.Exceptions, o.LogFile, o.PidFile, o.Daemon, o.Verbose = "P", true, "none", "/x.pid", true, "INFO"
			o.Backlog, o.Keepalive, o.KeepaliveIdle, o.KeepaliveInterval, o.KeepaliveCount = 64, true, 30, 5, 4
			o.User, o.FileDescriptors, o.MaxPacket, o.ConfigFile = "nobody", 4096, 1<<20, ""
			o.AdminShutdown, o.ShutdownTimeout = true, 5*time.Second
			o.QueueType = "builtin"
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			isolate(t)
			o, err := parseArgs(tc.args, envOf(tc.env))
			if err != nil {
				t.Fatalf("parseArgs(%q): %v", tc.args, err)
			}
			checkOptions(t, o, tc.want())
		})
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		args []string
		warn []string
	}{
		{[]string{"--syslog"}, []string{"ignoring --syslog: switchyard does not log to syslog; use -l/--log-file"}},
		{[]string{"--dwork-keep-on-close"}, []string{"ignoring --dwork-keep-on-close: a dwork host always keeps its tasks when its connections close (see --dwork-host-timeout)"}},
		{[]string{"--coredump"}, []string{"ignoring --coredump: core dumps follow the Go runtime's GOTRACEBACK setting (GOTRACEBACK=crash)"}},
		{[]string{"--hashtable-buckets", "1733003"}, []string{"ignoring --hashtable-buckets: switchyard's job tables grow as needed"}},
		{[]string{"--hashtable-buckets=5"}, []string{"ignoring --hashtable-buckets: switchyard's job tables grow as needed"}},
		{[]string{"-r", "http"}, nil},
		{[]string{"-r", ""}, nil},
		{[]string{"--http-port", "8080"}, nil},
		{[]string{"--http-port=abc"}, nil}, // unused without -r http: gearmand does not look at it
		{[]string{"--libmemcached-servers", "a:1,b:2"}, []string{"ignoring --libmemcached-servers: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--libmemcached-prefix=x"}, []string{"ignoring --libmemcached-prefix: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--libsqlite3-db", "/q.db"}, nil},
		{[]string{"--libsqlite3-table=t"}, nil},
		{[]string{"--store-queue-on-shutdown"}, nil},
		{[]string{"--recover"}, nil},
		{[]string{"--recover", "-q", "builtin"}, []string{"ignoring --recover: only the durable queue (-q durable) checks itself at start"}},
		{[]string{"--recover", "-q", "libsqlite3", "--libsqlite3-db", "/q.db"}, []string{"ignoring --recover: only the durable queue (-q durable) checks itself at start"}},
		{[]string{"--libpq-conninfo", "host=x"}, []string{"ignoring --libpq-conninfo: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--libpq-table=t"}, []string{"ignoring --libpq-table: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--redis-server", "r"}, []string{"ignoring --redis-server: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--redis-port=abc"}, []string{"ignoring --redis-port: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--redis-password", "secret"}, []string{"ignoring --redis-password: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--redis-prefix=p"}, []string{"ignoring --redis-prefix: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--mysql-host", "h"}, []string{"ignoring --mysql-host: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--mysql-port=3306"}, []string{"ignoring --mysql-port: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--mysql-user", "u"}, []string{"ignoring --mysql-user: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--mysql-password", "secret"}, []string{"ignoring --mysql-password: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--mysql-db=d"}, []string{"ignoring --mysql-db: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--mysql-table", "t"}, []string{"ignoring --mysql-table: only the builtin, durable and libsqlite3 queues are supported"}},
		{[]string{"--ssl-certificate", "/c.pem", "--ssl-key=/k.pem"}, []string{
			"ignoring --ssl-certificate: --ssl is not given",
			"ignoring --ssl-key: --ssl is not given",
		}},
		{[]string{"--syslog", "-R", "--coredump"}, []string{
			"ignoring --syslog: switchyard does not log to syslog; use -l/--log-file",
			"ignoring --coredump: core dumps follow the Go runtime's GOTRACEBACK setting (GOTRACEBACK=crash)",
		}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			isolate(t)
			o, err := parseArgs(tc.args, envOf(nil))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(o.Warnings, tc.warn) {
				t.Errorf("warnings = %q, want %q", o.Warnings, tc.warn)
			}
			for _, w := range o.Warnings {
				if strings.Contains(w, "secret") {
					t.Errorf("warning leaks a value: %q", w)
				}
			}
		})
	}
}

func TestParseArgsErrors(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		msg  string
	}{
		{[]string{"--controller-func", ""}, nil, "the argument ('') for option '--controller-func' is invalid: a function has a name"},
		// Syntax, with boost's wording.
		{[]string{"--foo"}, nil, "unrecognised option '--foo'"},
		{[]string{"--foo=1"}, nil, "unrecognised option '--foo=1'"},
		{[]string{"-x"}, nil, "unrecognised option '-x'"},
		{[]string{"-v"}, nil, "unrecognised option '-v'"},
		{[]string{"-vvv"}, nil, "unrecognised option '-vvv'"},
		{[]string{"-Rx"}, nil, "unrecognised option '-Rx'"},
		{[]string{"-dRx"}, nil, "unrecognised option '-dRx'"},
		{[]string{"-R1"}, nil, "unrecognised option '-R1'"},
		{[]string{"-R=1"}, nil, "unrecognised option '-R=1'"},
		{[]string{"positional"}, nil, "unrecognised option 'positional'"},
		{[]string{"-"}, nil, "unrecognised option '-'"},
		{[]string{"@"}, nil, "unrecognised option '@'"},
		{[]string{"--", "-R"}, nil, "unrecognised option '-R'"},
		{[]string{"--=5"}, nil, "unrecognised option '--=5'"},
		{[]string{"---port=1"}, nil, "unrecognised option '---port=1'"},
		{[]string{"--por", "4731"}, nil, "unrecognised option '--por'"}, // no abbreviations on the command line
		{[]string{"--PORT=4731"}, nil, "unrecognised option '--PORT=4731'"},
		{[]string{"--check-args=1"}, nil, "option '--check-args' does not take any arguments"},
		{[]string{"--port"}, nil, "the required argument for option '--port' is missing"},
		{[]string{"-p"}, nil, "the required argument for option '--port' is missing"},
		{[]string{"-p", "-R"}, nil, "the required argument for option '--port' is missing"},
		{[]string{"-l", "-L", "x"}, nil, "the required argument for option '--log-file' is missing"},
		{[]string{"-Rt"}, nil, "the required argument for option '--threads' is missing"},
		{[]string{"--verbose"}, nil, "the required argument for option '--verbose' is missing"},
		{[]string{"--ssl-key"}, nil, "the required argument for option '--ssl-key' is missing"},
		{[]string{"--port="}, nil, "the argument for option '--port' should follow immediately after the equal sign"},
		{[]string{"--foo="}, nil, "the argument for option '--foo' should follow immediately after the equal sign"},
		{[]string{"--exceptions="}, nil, "the argument for option '--exceptions' should follow immediately after the equal sign"},
		{[]string{"--exceptions=1"}, nil, "option '--exceptions' does not take any arguments"},
		{[]string{"--round-robin=yes"}, nil, "option '--round-robin' does not take any arguments"},
		{[]string{"--store-queue-on-shutdown=1"}, nil, "option '--store-queue-on-shutdown' does not take any arguments"},

		// Repeated options.
		{[]string{"-p", "1", "-p", "2"}, nil, "option '--port' cannot be specified more than once"},
		{[]string{"-p", "1", "--port=2"}, nil, "option '--port' cannot be specified more than once"},
		{[]string{"-R", "-R"}, nil, "option '--round-robin' cannot be specified more than once"},
		{[]string{"-RR"}, nil, "option '--round-robin' cannot be specified more than once"},
		{[]string{"--exceptions", "--exceptions"}, nil, "option '--exceptions' cannot be specified more than once"},
		{[]string{"--syslog", "--syslog"}, nil, "option '--syslog' cannot be specified more than once"},
		{[]string{"-h", "--help"}, nil, "option '--help' cannot be specified more than once"},
		{[]string{"-V", "-V"}, nil, "option '--version' cannot be specified more than once"},
		{[]string{"--config-file", "a", "--config-file", "b"}, nil, "option '--config-file' cannot be specified more than once"},
		{[]string{"@a", "--config-file=b"}, nil, "option '--config-file' cannot be specified more than once"},

		// The cluster's options.
		{[]string{"--node-id", "n1"}, nil, "--node-id needs --cluster-listen, the address the other nodes reach this one at"},
		{[]string{"--cluster-listen", "127.0.0.1:7000"}, nil, "--cluster-listen and --cluster-peers need --node-id"},
		{[]string{"--node-id", "n@1", "--cluster-listen", "127.0.0.1:7000"}, nil, "the argument ('n@1') for option '--node-id' is invalid: a name without '@', ',' or spaces"},
		{[]string{"--node-id", "n1", "--cluster-listen", "7000"}, nil, "the argument ('7000') for option '--cluster-listen' is invalid: want HOST:PORT"},
		{[]string{"--node-id", "n1", "--cluster-listen", ":7000"}, nil, "the argument (':7000') for option '--cluster-listen' is invalid: want HOST:PORT"},
		{[]string{"--node-id", "n1", "--cluster-listen", "h:1", "--cluster-peers", "n1@h:1,n1@h:2"}, nil,
			`the argument ('n1@h:1,n1@h:2') for option '--cluster-peers' is invalid: node "n1" given twice`},
		{[]string{"--node-id", "n1", "--cluster-listen", "h:1", "--cluster-peers", "h:1"}, nil,
			`the argument ('h:1') for option '--cluster-peers' is invalid: "h:1": want NAME@HOST:PORT`},
		{[]string{"--node-id", "n1", "--cluster-listen", "h:1", "-q", "builtin"}, nil,
			"a cluster node keeps its jobs in the replicated log: -q builtin cannot be used with --node-id"},

		// Invalid values.
		{[]string{"-p", "abc"}, nil, "the argument ('abc') for option '--port' is invalid"},
		{[]string{"-p", "65536"}, nil, "the argument ('65536') for option '--port' is invalid"},
		{[]string{"-p", "-1"}, nil, "the argument ('-1') for option '--port' is invalid"},
		{[]string{"-p", "+80"}, nil, "the argument ('+80') for option '--port' is invalid"},
		{[]string{"-p", "-x"}, nil, "the argument ('-x') for option '--port' is invalid"},
		{[]string{"-t", "abc"}, nil, "the argument ('abc') for option '--threads' is invalid"},
		{[]string{"-t", "-1"}, nil, "the argument ('-1') for option '--threads' is invalid"},
		{[]string{"-t", "0x10"}, nil, "the argument ('0x10') for option '--threads' is invalid"},
		{[]string{"-t", " 4"}, nil, "the argument (' 4') for option '--threads' is invalid"},
		{[]string{"-t", ""}, nil, "the argument ('') for option '--threads' is invalid"},
		{[]string{"-t", "99999999999"}, nil, "the argument ('99999999999') for option '--threads' is invalid"},
		{[]string{"-t", "-dR"}, nil, "the argument ('-dR') for option '--threads' is invalid"},
		{[]string{"-t", "--"}, nil, "the argument ('--') for option '--threads' is invalid"},
		{[]string{"-j", "1.5"}, nil, "the argument ('1.5') for option '--job-retries' is invalid"},
		{[]string{"-j", "-1"}, nil, "the argument ('-1') for option '--job-retries' is invalid"},
		{[]string{"-w", "x"}, nil, "the argument ('x') for option '--worker-wakeup' is invalid"},
		{[]string{"-w", "-1"}, nil, "the argument ('-1') for option '--worker-wakeup' is invalid"},
		{[]string{"-w", "Auto"}, nil, "the argument ('Auto') for option '--worker-wakeup' is invalid"},
		{[]string{"-b", "-1"}, nil, "the argument ('-1') for option '--backlog' is invalid"},
		{[]string{"-b", "abc"}, nil, "the argument ('abc') for option '--backlog' is invalid"},
		{[]string{"-b", "99999999999"}, nil, "the argument ('99999999999') for option '--backlog' is invalid"},
		{[]string{"-f", "abc"}, nil, "the argument ('abc') for option '--file-descriptors' is invalid"},
		{[]string{"-f", "-1"}, nil, "the argument ('-1') for option '--file-descriptors' is invalid"},
		{[]string{"--keepalive-idle", "abc"}, nil, "the argument ('abc') for option '--keepalive-idle' is invalid"},
		{[]string{"--keepalive-idle", "0"}, nil, "the argument ('0') for option '--keepalive-idle' is invalid"},
		{[]string{"--keepalive-idle", "-5"}, nil, "the argument ('-5') for option '--keepalive-idle' is invalid"},
		{[]string{"--keepalive-idle", "32768"}, nil, "the argument ('32768') for option '--keepalive-idle' is invalid"},
		{[]string{"--keepalive-interval", "0"}, nil, "the argument ('0') for option '--keepalive-interval' is invalid"},
		{[]string{"--keepalive-count", "128"}, nil, "the argument ('128') for option '--keepalive-count' is invalid"},
		{[]string{"--keepalive-count", "x"}, nil, "the argument ('x') for option '--keepalive-count' is invalid"},
		{[]string{"--hashtable-buckets", "abc"}, nil, "the argument ('abc') for option '--hashtable-buckets' is invalid"},
		{[]string{"--hashtable-buckets", "-1"}, nil, "the argument ('-1') for option '--hashtable-buckets' is invalid"},
		{[]string{"--hashtable-buckets", "0"}, nil, "hashtable-buckets has to be greater than 0"},
		{[]string{"--mysql-port", "abc"}, nil, "the argument ('abc') for option '--mysql-port' is invalid"},
		{[]string{"--fsync", "sometimes"}, nil, "the argument ('sometimes') for option '--fsync' is invalid"},
		{[]string{"--periodic-listen", "5000"}, nil, "the argument ('5000') for option '--periodic-listen' is invalid: want tcp://HOST:PORT or unix:///path"},
		{[]string{"--periodic-listen", "unix://rel.sock"}, nil, "the argument ('unix://rel.sock') for option '--periodic-listen' is invalid: a unix socket path must be absolute"},
		{[]string{"--periodic-listen", "tcp://h:99999"}, nil, "the argument ('tcp://h:99999') for option '--periodic-listen' is invalid: bad port \"99999\""},
		{[]string{"--periodic-listen", "udp://h:1"}, nil, "the argument ('udp://h:1') for option '--periodic-listen' is invalid: unknown scheme \"udp\""},
		{[]string{"--periodic-listen", "off", "--periodic-listen", "tcp://h:1"}, nil, "the argument ('tcp://h:1') for option '--periodic-listen' cannot be combined with 'off'"},
		{[]string{"--periodic-listen", "tcp://h:1", "--periodic-listen", "off"}, nil, "the argument ('off') for option '--periodic-listen' cannot be combined with addresses"},
		{[]string{"--periodic-listen", "tcp://h:1", "--periodic-listen", "tcp://h:1"}, nil, "the argument ('tcp://h:1') for option '--periodic-listen' is given twice"},
		{[]string{"--dwork-listen", "6125"}, nil, "the argument ('6125') for option '--dwork-listen' is invalid: want tcp://HOST:PORT"},
		{[]string{"--dwork-listen", "ipc:///tmp/hub"}, nil, "the argument ('ipc:///tmp/hub') for option '--dwork-listen' is invalid: want tcp://HOST:PORT"},
		{[]string{"--dwork-listen", "tcp://h:99999"}, nil, "the argument ('tcp://h:99999') for option '--dwork-listen' is invalid: bad port \"99999\""},
		{[]string{"--dwork-listen", "tcp://h"}, nil, "the argument ('tcp://h') for option '--dwork-listen' is invalid: want tcp://HOST:PORT"},
		{[]string{"--dwork-listen", "off", "--dwork-listen", "tcp://h:1"}, nil, "the argument ('tcp://h:1') for option '--dwork-listen' cannot be combined with 'off'"},
		{[]string{"--dwork-listen", "tcp://h:1", "--dwork-listen", "off"}, nil, "the argument ('off') for option '--dwork-listen' cannot be combined with addresses"},
		{[]string{"--dwork-listen", "tcp://h:1", "--dwork-listen", "tcp://h:1"}, nil, "the argument ('tcp://h:1') for option '--dwork-listen' is given twice"},
		{[]string{"--memodb-listen", "12703"}, nil, "the argument ('12703') for option '--memodb-listen' is invalid: want tcp://HOST:PORT or ipc:///path"},
		{[]string{"--memodb-listen", "tcp://h:99999"}, nil, "the argument ('tcp://h:99999') for option '--memodb-listen' is invalid: bad port \"99999\""},
		{[]string{"--memodb-listen", "ipc://rel"}, nil, "the argument ('ipc://rel') for option '--memodb-listen' is invalid: an ipc path must be absolute"},
		{[]string{"--memodb-listen", "off", "--memodb-listen", "tcp://h:1"}, nil, "the argument ('tcp://h:1') for option '--memodb-listen' cannot be combined with 'off'"},
		{[]string{"--failures-kept", "1001"}, nil, "the argument ('1001') for option '--failures-kept' is invalid"},
		{[]string{"--metrics-listen", "9418"}, nil, "the argument ('9418') for option '--metrics-listen' is invalid: want HOST:PORT or off"},
		{[]string{"--metrics-listen", "localhost:http"}, nil, "the argument ('localhost:http') for option '--metrics-listen' is invalid: want HOST:PORT or off"},
		{[]string{"--metrics-listen", "localhost:70000"}, nil, "the argument ('localhost:70000') for option '--metrics-listen' is invalid: want HOST:PORT or off"},
		{[]string{"--memodb-listen", "tcp://h:1", "--memodb-listen", "tcp://h:1"}, nil, "the argument ('tcp://h:1') for option '--memodb-listen' is given twice"},
		{[]string{"--memodb-heartbeat", "0"}, nil, "the argument ('0') for option '--memodb-heartbeat' is invalid (seconds, or a duration such as 500ms, 1m; more than 0)"},
		{[]string{"--dwork-host-timeout", "-1s"}, nil, "the argument ('-1s') for option '--dwork-host-timeout' is invalid (seconds, or a duration such as 90s, 10m; 0 never takes a host as exited)"},
		{[]string{"--dwork-host-timeout", "soon"}, nil, "the argument ('soon') for option '--dwork-host-timeout' is invalid (seconds, or a duration such as 90s, 10m; 0 never takes a host as exited)"},
		{[]string{"--memodb-queue-timeout", "soon"}, nil, "the argument ('soon') for option '--memodb-queue-timeout' is invalid (seconds, or a duration such as 500ms, 1m; more than 0)"},
		{[]string{"--dwork-func", ""}, nil, "the argument ('') for option '--dwork-func' is invalid: a function has a name"},
		{[]string{"--function-ttl", "-1"}, nil, "the argument ('-1') for option '--function-ttl' is invalid (seconds, or a duration such as 90s, 10m, 1h; 0 keeps every function)"},
		{[]string{"--function-ttl", "soon"}, nil, "the argument ('soon') for option '--function-ttl' is invalid (seconds, or a duration such as 90s, 10m, 1h; 0 keeps every function)"},
		{[]string{"--function-ttl", "99999999999999999"}, nil, "the argument ('99999999999999999') for option '--function-ttl' is invalid (seconds, or a duration such as 90s, 10m, 1h; 0 keeps every function)"},
		{[]string{"--max-packet", "0"}, nil, "the argument ('0') for option '--max-packet' is invalid (bytes: a number, alone or with B, K, M, G, KiB, MiB or GiB, where 1K = 1KiB = 1024; from 1 to 4G)"},
		{[]string{"--max-packet", "5X"}, nil, "the argument ('5X') for option '--max-packet' is invalid (bytes: a number, alone or with B, K, M, G, KiB, MiB or GiB, where 1K = 1KiB = 1024; from 1 to 4G)"},
		{[]string{"--max-packet", "K"}, nil, "the argument ('K') for option '--max-packet' is invalid (bytes: a number, alone or with B, K, M, G, KiB, MiB or GiB, where 1K = 1KiB = 1024; from 1 to 4G)"},
		{[]string{"--max-packet", "-1M"}, nil, "the argument ('-1M') for option '--max-packet' is invalid (bytes: a number, alone or with B, K, M, G, KiB, MiB or GiB, where 1K = 1KiB = 1024; from 1 to 4G)"},
		{[]string{"--max-packet", "5G"}, nil, "the argument ('5G') for option '--max-packet' is invalid (bytes: a number, alone or with B, K, M, G, KiB, MiB or GiB, where 1K = 1KiB = 1024; from 1 to 4G)"},
		{[]string{"--max-packet", "4294967297"}, nil, "the argument ('4294967297') for option '--max-packet' is invalid (bytes: a number, alone or with B, K, M, G, KiB, MiB or GiB, where 1K = 1KiB = 1024; from 1 to 4G)"},
		{[]string{"--max-packet", "1.5M"}, nil, "the argument ('1.5M') for option '--max-packet' is invalid (bytes: a number, alone or with B, K, M, G, KiB, MiB or GiB, where 1K = 1KiB = 1024; from 1 to 4G)"},
		{[]string{"--max-packet", "64MB"}, nil, "the argument ('64MB') for option '--max-packet' is invalid (bytes: a number, alone or with B, K, M, G, KiB, MiB or GiB, where 1K = 1KiB = 1024; MB is not one of them: 64M or 64MiB; from 1 to 4G)"},
		{[]string{"--max-packet", "5GiB"}, nil, "the argument ('5GiB') for option '--max-packet' is invalid (bytes: a number, alone or with B, K, M, G, KiB, MiB or GiB, where 1K = 1KiB = 1024; from 1 to 4G)"},
		{[]string{"--max-packet", "0B"}, nil, "the argument ('0B') for option '--max-packet' is invalid (bytes: a number, alone or with B, K, M, G, KiB, MiB or GiB, where 1K = 1KiB = 1024; from 1 to 4G)"},
		{[]string{"--max-memory", "256MB"}, nil, "the argument ('256MB') for option '--max-memory' is invalid (auto, 0, or bytes: a number, alone or with B, K, M, G, T, KiB, MiB, GiB or TiB, where 1K = 1KiB = 1024; MB is not one of them: 256M or 256MiB)"},
		{[]string{"--max-memory", "1gb"}, nil, "the argument ('1gb') for option '--max-memory' is invalid (auto, 0, or bytes: a number, alone or with B, K, M, G, T, KiB, MiB, GiB or TiB, where 1K = 1KiB = 1024; gb is not one of them: 1G or 1GiB)"},
		{[]string{"--max-memory", "256mib"}, nil, "the argument ('256mib') for option '--max-memory' is invalid (auto, 0, or bytes: a number, alone or with B, K, M, G, T, KiB, MiB, GiB or TiB, where 1K = 1KiB = 1024)"},
		{[]string{"--max-memory", "1.5GiB"}, nil, "the argument ('1.5GiB') for option '--max-memory' is invalid (auto, 0, or bytes: a number, alone or with B, K, M, G, T, KiB, MiB, GiB or TiB, where 1K = 1KiB = 1024)"},
		{[]string{"--max-memory", "-1"}, nil, "the argument ('-1') for option '--max-memory' is invalid (auto, 0, or bytes: a number, alone or with B, K, M, G, T, KiB, MiB, GiB or TiB, where 1K = 1KiB = 1024)"},
		{[]string{"--max-memory", "1025TiB"}, nil, "the argument ('1025TiB') for option '--max-memory' is invalid (auto, 0, or bytes: a number, alone or with B, K, M, G, T, KiB, MiB, GiB or TiB, where 1K = 1KiB = 1024)"},
		{[]string{"--shutdown-timeout", "-1"}, nil, "the argument ('-1') for option '--shutdown-timeout' is invalid (seconds, or a duration such as 90s, 10m, 1h)"},
		{[]string{"--shutdown-timeout", "-5s"}, nil, "the argument ('-5s') for option '--shutdown-timeout' is invalid (seconds, or a duration such as 90s, 10m, 1h)"},
		{[]string{"--shutdown-timeout", "soon"}, nil, "the argument ('soon') for option '--shutdown-timeout' is invalid (seconds, or a duration such as 90s, 10m, 1h)"},
		{[]string{"--shutdown-timeout", "99999999999999999"}, nil, "the argument ('99999999999999999') for option '--shutdown-timeout' is invalid (seconds, or a duration such as 90s, 10m, 1h)"},
		{[]string{"--admin-shutdown=1"}, nil, "option '--admin-shutdown' does not take any arguments"},
		{[]string{"--admin-shutdown", "--admin-shutdown"}, nil, "option '--admin-shutdown' cannot be specified more than once"},
		{[]string{"--verbose", "bad"}, nil, "Invalid value for --verbose supplied"},
		{[]string{"--verbose", ""}, nil, "Invalid value for --verbose supplied"},
		{[]string{"-q", "mysql"}, nil, "unknown queue type 'mysql': use durable, builtin or libsqlite3"},
		{[]string{"-q", ""}, nil, "unknown queue type '': use durable, builtin or libsqlite3"},
		{[]string{"-r", "gear"}, nil, "Unknown protocol module : gear"},
		{[]string{"--protocol=HTTP"}, nil, "Unknown protocol module : HTTP"},
		{[]string{"-r", "http", "--http-port", "abc"}, nil, "the argument ('abc') for option '--http-port' is invalid"},
		{[]string{"-r", "http", "--http-port", "70000"}, nil, "the argument ('70000') for option '--http-port' is invalid"},
		{[]string{"-r", "http", "--http-port", ""}, nil, "the argument ('') for option '--http-port' is invalid"},
		{[]string{"--http-timeout", "-1"}, nil, "the argument ('-1') for option '--http-timeout' is invalid (seconds, or a duration such as 90s, 10m, 1h; 0 waits as long as the job takes)"},
		{[]string{"--http-timeout", "soon"}, nil, "the argument ('soon') for option '--http-timeout' is invalid (seconds, or a duration such as 90s, 10m, 1h; 0 waits as long as the job takes)"},
		{nil, map[string]string{"GEARMAND_PORT": "abc"}, "the GEARMAND_PORT environment variable ('abc') is not a valid port"},
		{nil, map[string]string{"GEARMAND_PORT": "70000"}, "the GEARMAND_PORT environment variable ('70000') is not a valid port"},

		// TLS.
		{[]string{"--ssl=1"}, nil, "option '--ssl' does not take any arguments"},
		{[]string{"--ssl", "--ssl"}, nil, "option '--ssl' cannot be specified more than once"},
		{[]string{"--ssl-ca-file="}, nil, "the argument for option '--ssl-ca-file' should follow immediately after the equal sign"},
		{[]string{"--plain-port", "abc"}, nil, "the argument ('abc') for option '--plain-port' is invalid"},
		{[]string{"--plain-port", ""}, nil, "the argument ('') for option '--plain-port' is invalid"},
		{[]string{"--plain-port", "70000"}, nil, "the argument ('70000') for option '--plain-port' is invalid"},
		{[]string{"-p", "4731", "--plain-port", "4731"}, nil, "--plain-port 4731 is also the --port"},
		{[]string{"--plain-port", "4730"}, nil, "--plain-port 4730 is also the --port"},
		{[]string{"--ssl", "--plain-port", "4730"}, nil, "--plain-port 4730 is also the --port"},
		{[]string{"-p", "0", "--plain-port", "0"}, nil, "--plain-port 0 is also the --port"},

		// gearmand's order: syntax errors first, then in argument order.
		{[]string{"-t", "abc", "--foo"}, nil, "unrecognised option '--foo'"},
		{[]string{"positional", "--foo"}, nil, "unrecognised option '--foo'"},
		{[]string{"-t", "abc", "-t", "5"}, nil, "the argument ('abc') for option '--threads' is invalid"},
		{[]string{"-t", "5", "-t", "abc"}, nil, "option '--threads' cannot be specified more than once"},
		{[]string{"-t", "1", "positional", "-t", "2"}, nil, "unrecognised option 'positional'"},
		{[]string{"-t", "abc", "positional"}, nil, "the argument ('abc') for option '--threads' is invalid"},
		{[]string{"-t", "abc", "-b", "xyz"}, nil, "the argument ('abc') for option '--threads' is invalid"},
		{[]string{"--verbose", "x", "-t", "abc"}, nil, "the argument ('abc') for option '--threads' is invalid"},
		{[]string{"--check-args", "-t", "x"}, nil, "the argument ('x') for option '--threads' is invalid"},
		{[]string{"-h", "--verbose", "x"}, nil, "Invalid value for --verbose supplied"},
		{[]string{"--verbose", "x", "-q", "mysql"}, nil, "Invalid value for --verbose supplied"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			isolate(t)
			o, err := parseArgs(tc.args, envOf(tc.env))
			if err == nil {
				t.Fatalf("parseArgs(%q) = %+v, want error %q", tc.args, o, tc.msg)
			}
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %T %v is not a *usageError", err, err)
			}
			if err.Error() != tc.msg {
				t.Errorf("error %q, want %q", err.Error(), tc.msg)
			}
		})
	}
}

func TestConfigFile(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		args    []string // the file is given with --config-file before these
		env     map[string]string
		want    func() *options // ConfigFile is filled in by the test
		warn    []string        // "%s" is replaced by the file's path
		wantErr string          // ditto
	}{
		{name: "--port=N", file: "--port=4731\n", want: want(func(o *options) { o.Port = "4731" })},
		{name: "--port N", file: "--port 4731\n", want: want(func(o *options) { o.Port = "4731" })},
		{name: "-p N", file: "-p 4731", want: want(func(o *options) { o.Port = "4731" })},
		{name: "-pN", file: "-p4731", want: want(func(o *options) { o.Port = "4731" })},
		{name: "value on the next line", file: "--port\n4731\n", want: want(func(o *options) { o.Port = "4731" })},
		{name: "CRLF and blank lines", file: "\r\n-p 4731\r\n\r\n-R\r\n", want: want(func(o *options) { o.Port, o.RoundRobin = "4731", true })},
		{name: "several per line", file: "--port=4731 -R --exceptions -t 3 -dj2\n",
			want: want(func(o *options) {
				o.Port, o.RoundRobin, o.Exceptions, o.Threads, o.Daemon, o.JobRetries = "4731", true, true, 3, true, 2
			})},
		{name: "abbreviation", file: "--por=4731 --round\n--exc", want: want(func(o *options) { o.Port, o.RoundRobin, o.Exceptions = "4731", true, true })},
		{name: "exact name wins over longer ones", file: "--keepalive", want: want(func(o *options) { o.Keepalive = true })},
		{name: "ignored options warn", file: "--syslog --mysql-host=db\n",
			warn: []string{
				"ignoring --syslog: switchyard does not log to syslog; use -l/--log-file",
				"ignoring --mysql-host: only the builtin, durable and libsqlite3 queues are supported",
			},
			want: want(nil)},
		{name: "port=N is not an option", file: "port=4731\n", want: want(nil),
			warn: []string{"ignoring 'port=4731' in configuration file %s (line 1): not an option; write options as on the command line, e.g. --port=4730"}},
		{name: "comment line", file: "# gearmand settings\n--port=4731\n", want: want(func(o *options) { o.Port = "4731" })},
		{name: "option after # on a line", file: "-R # round robin -p 4731\n-t 2",
			want: want(func(o *options) { o.Port, o.RoundRobin, o.Threads = "4731", true, 2 }),
			warn: []string{"configuration file %s (line 1): '#' does not start a comment in gearmand's format; option '--port' on that line is applied"}},
		{name: "commented-out option still applies", file: "# -p 4731\n-R\n",
			want: want(func(o *options) { o.Port, o.RoundRobin = "4731", true }),
			warn: []string{"configuration file %s (line 1): '#' does not start a comment in gearmand's format; option '--port' on that line is applied"}},
		{name: "help in the file", file: "--help", want: want(func(o *options) { o.Help = true })},
		{name: "config-file in the file is ignored", file: "--config-file=/nonexistent -R", want: want(func(o *options) { o.RoundRobin = true })},
		{name: "empty file", file: "", want: want(nil)},

		// Precedence: the command line wins, silently, without validating the file's value.
		{name: "command line wins", file: "-p 4731 -t 3\n", args: []string{"-p", "4732"},
			want: want(func(o *options) { o.Port, o.Threads = "4732", 3 })},
		{name: "command line wins over bad file values", file: "-t abc -t 2 -b x\n", args: []string{"-t", "1", "-b", "5"},
			want: want(func(o *options) { o.Threads, o.Backlog = 1, 5 })},
		{name: "file flag and command-line flag", file: "-R --syslog", args: []string{"-R", "--syslog"},
			want: want(func(o *options) { o.RoundRobin = true }),
			warn: []string{"ignoring --syslog: switchyard does not log to syslog; use -l/--log-file"}},
		{name: "file port beats env", file: "-p 4731", env: map[string]string{"GEARMAND_PORT": "5000"},
			want: want(func(o *options) { o.Port = "4731" })},
		{name: "env when neither sets the port", file: "-R", env: map[string]string{"GEARMAND_PORT": "5000"},
			want: want(func(o *options) { o.Port, o.RoundRobin = "5000", true })},
		{name: "file verbose", file: "--verbose=info", want: want(func(o *options) { o.Verbose = "INFO" })},
		{name: "tls", file: "--ssl --ssl-key=/k.pem", env: map[string]string{"GEARMAND_SERVER_PEM": "/e/c.pem"},
			want: want(withSSL("/etc/ssl/certs/gearmand-ca.pem", "/e/c.pem", "/k.pem"))},

		// Errors, with gearmand's text and the file named.
		{name: "tab is not a separator", file: "--port\t4731\n", wantErr: "unrecognised option '--port\t4731' (in configuration file %s)"},
		{name: "unknown option", file: "--foo=1", wantErr: "unrecognised option '--foo=1' (in configuration file %s)"},
		{name: "ambiguous", file: "--keepalive-i=5", wantErr: "option '--keepalive-i=5' is ambiguous and matches '--keepalive-idle', and '--keepalive-interval' (in configuration file %s)"},
		{name: "ambiguous, four", file: "--p 1", wantErr: "option '--p' is ambiguous and matches '--periodic-listen', '--pid-file', '--plain-port', '--port', and '--protocol' (in configuration file %s)"},
		{name: "hidden option", file: "--check-args", wantErr: "unrecognised option '--check-args' (in configuration file %s)"},
		{name: "repeated in the file", file: "--port=4731\n--port=4732\n", wantErr: "option '--port' cannot be specified more than once (in configuration file %s)"},
		{name: "missing value", file: "-t\n-p\n", wantErr: "the required argument for option '--threads' is missing (in configuration file %s)"},
		{name: "invalid value", file: "-t abc", wantErr: "the argument ('abc') for option '--threads' is invalid (in configuration file %s)"},
		{name: "flag with value", file: "--exceptions=1", wantErr: "option '--exceptions' does not take any arguments (in configuration file %s)"},
		{name: "bad verbose", file: "--verbose bad", wantErr: "Invalid value for --verbose supplied"},
		{name: "queue", file: "-q redis", wantErr: "unknown queue type 'redis': use durable, builtin or libsqlite3"},
		{name: "command-line errors come first", file: "--foo", args: []string{"-t", "x"},
			wantErr: "the argument ('x') for option '--threads' is invalid"},
	}
	for _, tc := range tests {
		for _, spelling := range []string{"--config-file", "--config-file=", "@"} {
			t.Run(tc.name+"/"+spelling, func(t *testing.T) {
				isolate(t)
				path := writeFile(t, t.TempDir(), "g.conf", tc.file)
				var args []string
				switch spelling {
				case "--config-file":
					args = []string{"--config-file", path}
				default:
					args = []string{spelling + path}
				}
				args = append(args, tc.args...)
				o, err := parseArgs(args, envOf(tc.env))
				if tc.wantErr != "" {
					msg := strings.ReplaceAll(tc.wantErr, "%s", path)
					if err == nil || err.Error() != msg {
						t.Fatalf("error %v, want %q", err, msg)
					}
					var ue *usageError
					if !errors.As(err, &ue) {
						t.Fatalf("error %T is not a *usageError", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				exp := tc.want()
				exp.ConfigFile = path
				for _, w := range tc.warn {
					exp.Warnings = append(exp.Warnings, strings.ReplaceAll(w, "%s", path))
				}
				checkOptions(t, o, exp)
			})
		}
	}
}

func TestDefaultConfigFile(t *testing.T) {
	t.Run("absent", func(t *testing.T) {
		path := isolate(t)
		o, err := parseArgs([]string{"-R"}, envOf(nil))
		if err != nil {
			t.Fatal(err)
		}
		checkOptions(t, o, want(func(o *options) { o.RoundRobin = true; o.ConfigFile = path })())
	})
	t.Run("present", func(t *testing.T) {
		path := isolate(t)
		writeFile(t, filepath.Dir(path), filepath.Base(path), "-p 4731 -t 2\n")
		o, err := parseArgs([]string{"-t", "3"}, envOf(nil))
		if err != nil {
			t.Fatal(err)
		}
		checkOptions(t, o, want(func(o *options) { o.Port, o.Threads, o.ConfigFile = "4731", 3, path })())
	})
	t.Run("disabled with an empty --config-file", func(t *testing.T) {
		path := isolate(t)
		writeFile(t, filepath.Dir(path), filepath.Base(path), "-p 4731\n")
		o, err := parseArgs([]string{"--config-file="}, envOf(nil))
		if err == nil || err.Error() != "the argument for option '--config-file' should follow immediately after the equal sign" {
			t.Fatalf("--config-file=: %v, %+v", err, o)
		}
		o, err = parseArgs([]string{"--config-file", ""}, envOf(nil))
		if err != nil {
			t.Fatal(err)
		}
		checkOptions(t, o, want(func(o *options) { o.ConfigFile = "" })())
	})
	t.Run("named explicitly and absent", func(t *testing.T) {
		path := isolate(t)
		o, err := parseArgs([]string{"--config-file", path}, envOf(nil))
		if err != nil {
			t.Fatal(err) // gearmand only complains about a file other than the default
		}
		checkOptions(t, o, want(func(o *options) { o.ConfigFile = path })())
	})
	t.Run("unreadable", func(t *testing.T) {
		path := isolate(t)
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		o, err := parseArgs(nil, envOf(nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(o.Warnings) != 1 || !strings.HasPrefix(o.Warnings[0], "ignoring configuration file "+path+": ") {
			t.Errorf("warnings = %q", o.Warnings)
		}
	})
	t.Run("other file absent", func(t *testing.T) {
		isolate(t)
		missing := filepath.Join(t.TempDir(), "missing.conf")
		for _, args := range [][]string{{"--config-file", missing}, {"--config-file=" + missing}, {"@" + missing}} {
			_, err := parseArgs(args, envOf(nil))
			var ue *usageError
			if !errors.As(err, &ue) || err.Error() != "Could not open configuration file." {
				t.Errorf("%q: error %v", args, err)
			}
		}
	})
	t.Run("@ in --config-file is part of the name", func(t *testing.T) {
		isolate(t)
		dir := t.TempDir()
		path := writeFile(t, dir, "g.conf", "-R")
		if _, err := parseArgs([]string{"--config-file=@" + path}, envOf(nil)); err == nil {
			t.Error("--config-file=@FILE read FILE; gearmand opens \"@FILE\"")
		}
	})
}

func TestVerboseLevel(t *testing.T) {
	for name, want := range map[string]int{
		"FATAL": 0, "ALERT": 1, "CRITICAL": 2, "ERROR": 3, "WARNING": 4, "NOTICE": 5, "INFO": 6, "DEBUG": 7,
		"debug": 7, "Info": 6, "": 3, "bogus": 3, "WARN": 3,
	} {
		if got := verboseLevel(name); got != want {
			t.Errorf("verboseLevel(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestUsage(t *testing.T) {
	var b strings.Builder
	usage(&b)
	help := b.String()
	if !strings.HasPrefix(help, "Allowed options:\n\nGeneral options:\n  -b [ --backlog ] arg (=32)            Number of backlog connections for \n") {
		t.Errorf("help starts:\n%s", help[:min(len(help), 300)])
	}
	for _, d := range optTable {
		if d.hidden {
			if strings.Contains(help, "--"+d.long) {
				t.Errorf("help shows hidden --%s", d.long)
			}
			continue
		}
		if !strings.Contains(help, helpFirstColumn(d)) {
			t.Errorf("help lacks %q", helpFirstColumn(d))
		}
	}
	for _, s := range []string{
		"  -t [ --threads ] arg (=0)", "gearmand's default is 4",
		"  -l [ --log-file ] arg (=stderr)", "  -P [ --pid-file ] arg  ",
		"  --max-packet arg (=64M)", "  -p [ --port ] arg (=4730)", "GEARMAND_PORT",
		"  --admin-shutdown  ", "  --shutdown-timeout arg (=30s)",
		"\nHTTP:\n", "\nGear:\n", "\nMySQL:\n", "  --config-file arg (=/etc/gearmand.conf)\n",
	} {
		if !strings.Contains(help, s) {
			t.Errorf("help lacks %q", s)
		}
	}
	for _, line := range strings.Split(help, "\n") {
		if len(line) > 80 {
			t.Errorf("help line longer than 80 columns: %q", line)
		}
	}
}

// TestHelpLayout checks the formatter against gearmand 1.1.20's own help
// for the same descriptions.
func TestHelpLayout(t *testing.T) {
	tests := []struct {
		d    *optDef
		want string
	}{
		{&optDef{long: "job-retries", short: 'j', value: true, dflt: "0",
			help: "Number of attempts to run the job before the job server removes it. This is helpful to ensure a bad job does not crash all available workers. Default is no limit."},
			"  -j [ --job-retries ] arg (=0)         Number of attempts to run the job \n" +
				"                                        before the job server removes it. This \n" +
				"                                        is helpful to ensure a bad job does not\n" +
				"                                        crash all available workers. Default is\n" +
				"                                        no limit."},
		{&optDef{long: "file-descriptors", short: 'f', value: true,
			help: "Number of file descriptors to allow for the process (total connections will be slightly less). Default is max allowed for user."},
			"  -f [ --file-descriptors ] arg         Number of file descriptors to allow for\n" +
				"                                        the process (total connections will be \n" +
				"                                        slightly less). Default is max allowed \n" +
				"                                        for user."},
		{&optDef{long: "log-file", short: 'l', value: true, dflt: "/var/log/gearmand.log",
			help: "Log file to write errors and information to. If the log-file parameter is specified as 'stderr', then output will go to stderr. If 'none', then no logfile will be generated."},
			"  -l [ --log-file ] arg (=/var/log/gearmand.log)\n" +
				"                                        Log file to write errors and \n" +
				"                                        information to. If the log-file \n" +
				"                                        parameter is specified as 'stderr', \n" +
				"                                        then output will go to stderr. If \n" +
				"                                        'none', then no logfile will be \n" +
				"                                        generated."},
		{&optDef{long: "daemon", short: 'd', help: "Daemon, detach and run in the background."},
			"  -d [ --daemon ]                       Daemon, detach and run in the \n" +
				"                                        background."},
		{&optDef{long: "exceptions", help: "Enable protocol exceptions by default."},
			"  --exceptions                          Enable protocol exceptions by default."},
	}
	for _, tc := range tests {
		var b strings.Builder
		formatOption(&b, tc.d, 40)
		if b.String() != tc.want {
			t.Errorf("--%s:\n%s\nwant:\n%s", tc.d.long, b.String(), tc.want)
		}
	}
	if w := helpColumnWidth(); w != 40 {
		t.Errorf("column width %d, want 40", w)
	}
}

// Every option in the table can be parsed in both syntaxes.
func TestEveryOptionParses(t *testing.T) {
	values := map[string]string{
		"protocol": "http", "queue-type": "builtin", "verbose": "INFO", "port": "4731",
		"max-packet": "1M", "hashtable-buckets": "5", "mysql-port": "3306",
		"keepalive-idle": "5", "keepalive-interval": "5", "keepalive-count": "5",
		"periodic-listen": "tcp://127.0.0.1:0", "fsync": "never", "dwork-listen": "tcp://127.0.0.1:0",
		"memodb-listen": "tcp://127.0.0.1:0", "metrics-listen": "127.0.0.1:0",
		"node-id": "n1", "cluster-listen": "127.0.0.1:7000", "cluster-peers": "n1@127.0.0.1:7000",
	}
	// The options that need others.
	with := map[string][]string{
		"node-id":        {"--cluster-listen", "127.0.0.1:7000"},
		"cluster-listen": {"--node-id", "n1"},
		"cluster-peers":  {"--node-id", "n1", "--cluster-listen", "127.0.0.1:7000"},
	}
	for _, d := range optTable {
		if d.refused != "" {
			continue
		}
		v := values[d.long]
		if v == "" && d.value {
			v = "7"
		}
		var forms [][]string
		if d.value {
			forms = [][]string{{"--" + d.long, v}, {"--" + d.long + "=" + v}}
			if d.short != 0 {
				forms = append(forms, []string{"-" + string(d.short), v}, []string{"-" + string(d.short) + v})
			}
		} else {
			forms = [][]string{{"--" + d.long}}
			if d.short != 0 {
				forms = append(forms, []string{"-" + string(d.short)})
			}
		}
		for _, args := range forms {
			isolate(t)
			if d.long == "config-file" {
				args[len(args)-1] = strings.Replace(args[len(args)-1], v, writeFile(t, t.TempDir(), "c", ""), 1)
			}
			args = append(args, with[d.long]...)
			if _, err := parseArgs(args, envOf(nil)); err != nil {
				t.Errorf("%q: %v", args, err)
			}
		}
	}
}

// Unset, -w wakes on demand; gearmand's default, all, is -w 0.
func TestWorkerWakeupDefault(t *testing.T) {
	o, err := parseArgs(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if o.WorkerWakeup != sched.WakeDemand {
		t.Errorf("default -w %d, want sched.WakeDemand", o.WorkerWakeup)
	}
}
