package main

// Command line and configuration file, compatible with gearmand 1.1.20.
//
// gearmand parses its arguments with boost::program_options and switchyard
// reproduces what a script or an init file can observe of that:
//
//   - Long options: --name value, --name=value. No abbreviations on the
//     command line (gearmand turns allow_guessing off). "--name=" is an error.
//   - Short options: -p value, -pvalue, and grouped flags -dR, -Rp4730.
//   - A value taken from the next argument may start with '-' (-t -1 reads
//     "-1", --port --exceptions reads "--exceptions"), unless the next
//     argument is exactly a known short option such as -R: then the value is
//     missing.
//   - Every option may appear once: a second occurrence is an error, even for
//     flags (-R -R).
//   - Anything that is not an option is an error ("unrecognised option
//     'word'"), except "@FILE", our spelling of --config-file=FILE (gearmand's
//     help advertises it but gearmand rejects it).
//   - After "--" every argument is a non-option, hence an error.
//
// The configuration file (--config-file, default /etc/gearmand.conf, read only
// if it exists when it is the default) holds command-line arguments separated
// by spaces, CR or LF (not tabs), parsed like the command line except that:
// long options may be abbreviated to a unique prefix (--por=4730), words that
// are not options are ignored (so "port=4730" does nothing, and "# comment"
// works by accident), and an option already given on the command line is
// skipped, without even validating the file's value. '#' does not start a
// comment: "# --port=1" sets the port. switchyard does the same but adds a
// warning for it and for every ignored word outside a "#" line.
//
// Errors are detected in gearmand's order: syntax errors (unknown option,
// missing value) in argument order first, then, again in argument order,
// repeated options, invalid values and stray words; the command line fully
// before the file; then --verbose; then the checks gearmand only makes at
// startup (queue type, protocol module).
//
// Deliberate departures from gearmand: -p, and --http-port with -r http,
// are checked here (gearmand fails when it binds); negative -t/-j/-w/-b/-f
// and keepalive values outside what
// setsockopt takes are refused (gearmand wraps or fails at startup); --verbose
// is case-insensitive; "@FILE" works; -q takes durable (ours, the default)
// or builtin, anything else is refused; an
// explicit -p 4730 beats GEARMAND_PORT (gearmand lets the variable replace
// any port equal to 4730), and likewise --ssl-ca-file, --ssl-certificate and
// --ssl-key beat GEARMAND_CA_CERTIFICATE, GEARMAND_SERVER_PEM and
// GEARMAND_SERVER_KEY (gearmand lets them replace the options); errors found
// in the file name it. --ssl is gearmand's built with TLS (Debian's is not,
// and ignores it: see tls.go).

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"switchyard/engine/cluster"
	"switchyard/engine/dwork"
	"switchyard/engine/gearhttp"
	"switchyard/engine/memodb"
	"switchyard/sched"
	"switchyard/sched/durable"
	"switchyard/sched/sqlite"
)

const (
	defaultPort      = "4730"
	defaultMaxPacket = 64 << 20
	maxMaxPacket     = 4 << 30 // the size field of a packet is a uint32
	defaultBacklog   = 32
	defaultVerbose   = "ERROR"
	defaultLogFile   = "stderr"
	defaultQueueType = "durable"
	// defaultDataDir holds one directory per Gearman port (see
	// dataDirPath).
	defaultDataDir = "switchyard-data"
	defaultFsync   = "batch"
	// defaultShutdownTimeout is how long "shutdown graceful" waits for
	// running jobs.
	defaultShutdownTimeout = 30 * time.Second
	// The other protocols' default ports, on -L's address: the real
	// Periodic server's, dwork's hub's (its ROUTER socket), memodb-broker's
	// (its REP socket).
	defaultPeriodicPort = "5000"
	defaultDworkPort    = "6125"
	defaultMemodbPort   = "12703"
	// defaultControllerSocket is the Worker–Controller main socket; the
	// workers' sockets go beside it.
	defaultControllerSocket = "/run/switchyard/controller.sock"
	defaultControllerFunc   = "controller"
	defaultDworkFunc        = "dwork"
	// defaultHTTPPort is gearmand's HTTP protocol module's.
	defaultHTTPPort = "8080"
	// defaultMetricsListen is gearman-exporter's default address.
	defaultMetricsListen = "127.0.0.1:9418"
)

// defaultConfigFile is read when it exists and --config-file is not given.
// A variable so that tests can point it elsewhere.
var defaultConfigFile = "/etc/gearmand.conf"

// options is the parsed command line and configuration file.
type options struct {
	Port              string        // -p/--port, default "4730", normalised to a decimal number; env GEARMAND_PORT overrides the default
	Listen            string        // -L/--listen, "" = all addresses
	SSL               bool          // --ssl: the port speaks TLS
	SSLCAFile         string        // --ssl-ca-file; with --ssl, "" becomes $GEARMAND_CA_CERTIFICATE or defaultSSLCAFile
	SSLCertificate    string        // --ssl-certificate; with --ssl, "" becomes $GEARMAND_SERVER_PEM or defaultSSLCertificate
	SSLKey            string        // --ssl-key; with --ssl, "" becomes $GEARMAND_SERVER_KEY or defaultSSLKey
	PlainPort         string        // --plain-port (ours), normalised like Port; "" = none
	Threads           int           // -t/--threads, 0 = one event loop per core
	JobRetries        int           // -j/--job-retries, 0 = unlimited
	WorkerWakeup      int           // -w/--worker-wakeup, 0 = all, sched.WakeDemand = auto
	RoundRobin        bool          // -R/--round-robin
	JobHandlePrefix   string        // --job-handle-prefix, "" = "H:<hostname>"
	Exceptions        bool          // --exceptions
	LogFile           string        // -l/--log-file: a path, "stderr" or "none" (both exact, lower case); default "stderr"; "" becomes "none"
	PidFile           string        // -P/--pid-file, "" = none
	Daemon            bool          // -d/--daemon
	Verbose           string        // --verbose, upper case: FATAL ALERT CRITICAL ERROR WARNING NOTICE INFO DEBUG
	Version           bool          // -V/--version
	Help              bool          // -h/--help
	Backlog           int           // -b/--backlog, default 32
	Keepalive         bool          // --keepalive
	KeepaliveIdle     int           // --keepalive-idle, seconds; -1 (default) = the system's
	KeepaliveInterval int           // --keepalive-interval, seconds; -1 (default) = the system's
	KeepaliveCount    int           // --keepalive-count; -1 (default) = the system's
	User              string        // -u/--user
	QueueType         string        // -q/--queue-type: "durable" (default, the embedded store), "builtin" (memory only) or "libsqlite3" (gearmand's SQLite table), lower case
	SqliteDB          string        // --libsqlite3-db: the database file of -q libsqlite3
	SqliteTable       string        // --libsqlite3-table, default gearman_queue
	StoreOnShutdown   bool          // --store-queue-on-shutdown: -q libsqlite3 writes its table only at shutdown
	DataDir           string        // --data-dir (ours): where the durable queue lives; "" = defaultDataDir/PORT
	Fsync             string        // --fsync (ours): always, batch or never
	Recover           bool          // --recover (ours): open a damaged durable queue with what can be read
	ConfigFile        string        // --config-file or @FILE; default "/etc/gearmand.conf"; "" = none
	FileDescriptors   int           // -f/--file-descriptors, 0 = leave the limit alone
	MaxPacket         int64         // --max-packet (ours), default 64 MiB
	MaxMemory         int64         // --max-memory (ours): the memory budget in bytes; -1 (default) = a quarter of the machine's or the cgroup's memory; 0 = count only
	FunctionTTL       time.Duration // --function-ttl (ours), default 1h; 0 = keep every function
	AdminShutdown     bool          // --admin-shutdown (ours): the "shutdown" admin command works
	ShutdownTimeout   time.Duration // --shutdown-timeout (ours), how long "shutdown graceful" waits for running jobs; default 30s
	PeriodicListen    []string      // --periodic-listen (ours, repeatable): tcp://HOST:PORT or unix:///path; nil = defaultPeriodicPort on -L's address; empty = off
	ControllerSocket  string        // --controller-socket (ours): the Worker–Controller main socket; "" = defaultControllerSocket; "off"
	ControllerFuncs   []string      // --controller-func (ours, repeatable): what controller workers serve; nil = defaultControllerFunc
	DworkListen       []string      // --dwork-listen (ours, repeatable): tcp://HOST:PORT, ZeroMQ style (HOST or PORT may be *); nil = defaultDworkPort on -L's address; empty = off
	DworkFunc         string        // --dwork-func (ours): the function dwork tasks belong to; "" = defaultDworkFunc
	DworkHostTimeout  time.Duration // --dwork-host-timeout (ours): a dwork host silent this long is taken as exited; 0 = never (the hub's way)
	MemodbListen      []string      // --memodb-listen (ours, repeatable): tcp://HOST:PORT or ipc:///path; nil = defaultMemodbPort on -L's address (127.0.0.1 without -L); empty = off
	MemodbQueue       time.Duration // --memodb-queue-timeout (ours): how long a MemoDB client's job waits for a worker; default 10s
	MemodbHeartbeat   time.Duration // --memodb-heartbeat (ours): idle MemoDB workers get HEARTBEAT after it, and must answer within it; default 10s
	HTTP              bool          // -r/--protocol http: serve gearmand's HTTP protocol on HTTPPort
	HTTPPort          string        // --http-port, default "8080"; normalised like Port when HTTP is on, kept as given otherwise (gearmand ignores it then)
	HTTPPortGiven     bool          // --http-port was given: a port that cannot be bound is then an error, not the protocol off
	HTTPTimeout       time.Duration // --http-timeout (ours): how long a foreground HTTP request waits for its result; 0 = as long as the job takes; default 10m
	MetricsListen     string        // --metrics-listen (ours): HOST:PORT of the metrics endpoints; "" = defaultMetricsListen; "off"
	OpsTokenFile      string        // --ops-token-file (ours): the file holding the token the operator actions need; "" = actions off
	FailuresKept      int           // --failures-kept (ours): each function's latest failures kept for the status page; default 20
	FuncHistograms    bool          // --metrics-function-histograms (ours): per-function queue wait and run time histograms in /metrics
	NodeID            string        // --node-id (ours): this node's name in a cluster; "" = a single server
	ClusterListen     string        // --cluster-listen (ours): HOST:PORT of the Raft transport
	ClusterPeers      string        // --cluster-peers (ours): NAME@HOST:PORT,... to bootstrap a new cluster
	Warnings          []string      // one line per accepted but ignored option or word, for main to log
	CheckArgs         bool          // hidden --check-args (command line only): validate, then exit 0; checked before Help and Version
}

// usageError is returned for anything the user got wrong on the command line
// or in the configuration file. Its text is gearmand's (boost's) wording
// without the "program: " prefix gearmand puts in front of it.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...)}
}

// errInvalid from a setter means "the argument is invalid"; the caller words
// it as boost does, naming the option.
var errInvalid = errors.New("invalid argument")

// parseState is what parseArgs accumulates beyond options.
type parseState struct {
	o        *options
	protocol string // -r/--protocol
	buckets  int64  // --hashtable-buckets
	portSet  bool   // -p given on the command line or in the file
	// fromCmdline marks the options given on the command line; the file's
	// occurrences of them are skipped.
	fromCmdline map[*optDef]bool
}

// optDef describes one option.
type optDef struct {
	long  string
	short byte   // 0: none
	value bool   // takes an argument
	dflt  string // default shown in the help
	group string // help group
	help  string
	// hidden: command line only and not in the help (--check-args).
	hidden bool
	// set validates and stores the value ("" for a flag). It returns
	// errInvalid or a *usageError.
	set func(s *parseState, v string) error
	// ignored: accepted, then a warning "ignoring --long: <ignored>".
	ignored string
	// refused: a usage error "<refused> (option '--long')".
	refused string
	// multi: may be given more than once; each value is set in turn.
	multi bool
}

// Help groups, in gearmand's order.
const (
	gGeneral   = "General options"
	gHTTP      = "HTTP"
	gGear      = "Gear"
	gMemcached = "libmemcached"
	gSqlite    = "libsqlite3"
	gPostgres  = "Postgres"
	gRedis     = "redis"
	gMySQL     = "MySQL"
	gPeriodic  = "Periodic (switchyard only)"
	gCtl       = "Worker-Controller (switchyard only)"
	gDwork     = "dwork (switchyard only)"
	gMemodb    = "MemoDB (switchyard only)"
	gMetrics   = "Metrics (switchyard only)"
	gCluster   = "Cluster (switchyard only)"
)

var groupOrder = []string{gGeneral, gHTTP, gGear, gMemcached, gSqlite, gPostgres, gRedis, gMySQL, gPeriodic, gCtl, gDwork, gMemodb, gMetrics, gCluster}

const noQueue = "only the builtin, durable and libsqlite3 queues are supported"

// optTable lists every option in the order of gearmand's help.
var optTable = []*optDef{
	{long: "backlog", short: 'b', value: true, dflt: "32", group: gGeneral,
		help: "Number of backlog connections for listen. Accepted for compatibility: the event loops always listen with the kernel's maximum backlog (net.core.somaxconn).",
		set:  setInt(func(o *options) *int { return &o.Backlog }, 0, 1<<31-1)},
	{long: "daemon", short: 'd', group: gGeneral,
		help: "Daemon, detach and run in the background.",
		set:  setBool(func(o *options) *bool { return &o.Daemon })},
	{long: "exceptions", group: gGeneral,
		help: "Enable protocol exceptions by default.",
		set:  setBool(func(o *options) *bool { return &o.Exceptions })},
	{long: "file-descriptors", short: 'f', value: true, group: gGeneral,
		help: "Number of file descriptors to allow for the process (total connections will be slightly less). Default is to leave the limit alone.",
		set:  setInt(func(o *options) *int { return &o.FileDescriptors }, 0, 1<<62)},
	{long: "help", short: 'h', group: gGeneral,
		help: "Print this help menu.",
		set:  setBool(func(o *options) *bool { return &o.Help })},
	{long: "job-retries", short: 'j', value: true, dflt: "0", group: gGeneral,
		help: "Number of attempts to run the job before the job server removes it. This is helpful to ensure a bad job does not crash all available workers. Default is no limit.",
		set:  setInt(func(o *options) *int { return &o.JobRetries }, 0, 1<<32-1)},
	{long: "job-handle-prefix", value: true, group: gGeneral,
		help: "Prefix used to generate a job handle string. If not provided, the default \"H:<host_name>\" is used.",
		set:  setString(func(o *options) *string { return &o.JobHandlePrefix })},
	{long: "hashtable-buckets", value: true, dflt: "991", group: gGeneral,
		help:    "Ignored: switchyard's job tables grow as needed. Must be greater than 0.",
		set:     setHashtableBuckets,
		ignored: "switchyard's job tables grow as needed"},
	{long: "keepalive", group: gGeneral,
		help: "Enable keepalive on sockets.",
		set:  setBool(func(o *options) *bool { return &o.Keepalive })},
	{long: "keepalive-idle", value: true, dflt: "-1", group: gGeneral,
		help: "If keepalive is enabled, set the value for TCP_KEEPIDLE (seconds, 1 to 32767). A value of -1 keeps the system's default.",
		set:  setKeepalive(func(o *options) *int { return &o.KeepaliveIdle }, 32767)},
	{long: "keepalive-interval", value: true, dflt: "-1", group: gGeneral,
		help: "If keepalive is enabled, set the value for TCP_KEEPINTVL (seconds, 1 to 32767). A value of -1 keeps the system's default.",
		set:  setKeepalive(func(o *options) *int { return &o.KeepaliveInterval }, 32767)},
	{long: "keepalive-count", value: true, dflt: "-1", group: gGeneral,
		help: "If keepalive is enabled, set the value for TCP_KEEPCNT (1 to 127). A value of -1 keeps the system's default.",
		set:  setKeepalive(func(o *options) *int { return &o.KeepaliveCount }, 127)},
	{long: "log-file", short: 'l', value: true, dflt: defaultLogFile, group: gGeneral,
		help: "Log file to write errors and information to. If the log-file parameter is specified as 'stderr', then output will go to stderr. If 'none', then no logfile will be generated. (gearmand's default is /var/log/gearmand.log.)",
		set:  setLogFile},
	{long: "listen", short: 'L', value: true, group: gGeneral,
		help: "Address the server should listen on. Default is INADDR_ANY. It is also the address of every other protocol's TCP listener whose address is not given (Periodic, dwork, MemoDB, HTTP); the metrics endpoints stay on 127.0.0.1 unless --metrics-listen says otherwise.",
		set:  setString(func(o *options) *string { return &o.Listen })},
	{long: "pid-file", short: 'P', value: true, group: gGeneral,
		help: "File to write process ID out to. Default is to write none. (gearmand's default is /var/gearmand.pid.)",
		set:  setString(func(o *options) *string { return &o.PidFile })},
	{long: "protocol", short: 'r', value: true, group: gGeneral,
		help: "Load protocol module. Only 'http' is known: gearmand's HTTP protocol, on --http-port.",
		set:  func(s *parseState, v string) error { s.protocol = v; return nil }},
	{long: "round-robin", short: 'R', group: gGeneral,
		help: "Assign work in round-robin order per worker connection. The default is to assign work in the order of functions added by the worker.",
		set:  setBool(func(o *options) *bool { return &o.RoundRobin })},
	{long: "data-dir", value: true, dflt: defaultDataDir + "/PORT", group: gGeneral,
		help: "Directory of the durable queue (-q durable); made if missing. The default is relative to the working directory and named after the -p port, so that servers on different ports never share a queue. One server at a time holds a directory. switchyard only.",
		set:  setString(func(o *options) *string { return &o.DataDir })},
	{long: "fsync", value: true, dflt: defaultFsync, group: gGeneral,
		help: "When the durable queue forces writes to disk: 'batch' (one fsync for every job that arrived meanwhile, before they are acknowledged), 'always' (one fsync per job) or 'never' (the kernel decides; a machine crash may lose acknowledged jobs). switchyard only.",
		set:  setFsync},
	{long: "recover", group: gGeneral,
		help: "Start on a damaged durable queue with the jobs that can be read, where switchyard would refuse to start and name the damaged file; the log says how many jobs could not be read. For one start: without it the next start checks the queue again. switchyard only.",
		set:  setBool(func(o *options) *bool { return &o.Recover })},
	{long: "queue-type", short: 'q', value: true, dflt: defaultQueueType, group: gGeneral,
		help: "Persistent queue type to use: 'durable' (the default: background jobs are kept on disk in --data-dir and survive a restart), 'builtin' (memory only, as gearmand's builtin) or 'libsqlite3' (gearmand's SQLite queue: the same file and table, see --libsqlite3-db).",
		set:  setString(func(o *options) *string { return &o.QueueType })},
	{long: "config-file", value: true, dflt: "/etc/gearmand.conf", group: gGeneral,
		help: "Can be specified with '@name', too. It holds options written as on the command line, separated by spaces or newlines; the command line wins. The default file is read only if it exists.",
		set:  setString(func(o *options) *string { return &o.ConfigFile })},
	{long: "syslog", group: gGeneral,
		help:    "Ignored: switchyard does not log to syslog.",
		ignored: "switchyard does not log to syslog; use -l/--log-file"},
	{long: "coredump", group: gGeneral,
		help:    "Ignored: core dumps follow the Go runtime's GOTRACEBACK setting.",
		ignored: "core dumps follow the Go runtime's GOTRACEBACK setting (GOTRACEBACK=crash)"},
	{long: "threads", short: 't', value: true, dflt: "0", group: gGeneral,
		help: "Number of I/O event loops to use, 0 means one per CPU core. Default=0. (gearmand's default is 4.)",
		set:  setInt(func(o *options) *int { return &o.Threads }, 0, 1<<32-1)},
	{long: "user", short: 'u', value: true, group: gGeneral,
		help: "Switch to given user after startup.",
		set:  setString(func(o *options) *string { return &o.User })},
	{long: "verbose", value: true, dflt: defaultVerbose, group: gGeneral,
		help: "Set verbose level (FATAL, ALERT, CRITICAL, ERROR, WARNING, NOTICE, INFO, DEBUG).",
		set:  setString(func(o *options) *string { return &o.Verbose })},
	{long: "version", short: 'V', group: gGeneral,
		help: "Display the version of gearmand and exit.",
		set:  setBool(func(o *options) *bool { return &o.Version })},
	{long: "worker-wakeup", short: 'w', value: true, dflt: "auto", group: gGeneral,
		help: "Number of workers to wakeup for each job received; 0 wakes all available workers, gearmand's default. " +
			"auto wakes one per job waiting, and the rest if a woken worker does not ask for work within 10ms; auto is switchyard only.",
		set: setWakeup},
	{long: "max-packet", value: true, dflt: "64M", group: gGeneral,
		help: "Largest binary packet body to accept, in bytes: a number, alone or with a K, M or G suffix, or with B, KiB, MiB or GiB as GOMEMLIMIT writes them (1K = 1KiB = 1024; 64MB is refused: write 64M or 64MiB), at most 4G. switchyard only.",
		set:  setMaxPacket},
	{long: "max-memory", value: true, dflt: "auto", group: gGeneral,
		help: "Memory budget for what peers make the server hold (partial packets, request bodies, replies not yet read), in bytes: a number, alone or with a K, M, G or T suffix, or with B, KiB, MiB, GiB or TiB as GOMEMLIMIT writes them (1K = 1KiB = 1024; 256MB is refused: write 256M or 256MiB). Near it, large packets and bodies are refused with the protocol's error and the connections that hold the most are closed first. 'auto' is a quarter of the machine's memory or of the cgroup's limit, whichever is smaller; 0 only counts. switchyard only.",
		set:  setMaxMemory},
	{long: "function-ttl", value: true, dflt: "1h", group: gGeneral,
		help: "Forget a function that has had no job, no worker and no admin setting (create function, maxqueue) for this long: seconds, or a duration such as 90s, 10m, 1h. 0 keeps every function, as gearmand does. switchyard only.",
		set:  setFunctionTTL},
	{long: "admin-shutdown", group: gGeneral,
		help: "Accept the admin commands 'shutdown' (stop now) and 'shutdown graceful' (stop accepting connections, let running jobs finish, then stop) from any connection. gearmand 1.1.20 has neither. switchyard only.",
		set:  setBool(func(o *options) *bool { return &o.AdminShutdown })},
	{long: "shutdown-timeout", value: true, dflt: "30s", group: gGeneral,
		help: "How long 'shutdown graceful' waits for running jobs to finish before it stops anyway: seconds, or a duration such as 90s, 10m, 1h. switchyard only.",
		set:  setShutdownTimeout},
	{long: "check-args", hidden: true,
		set: setBool(func(o *options) *bool { return &o.CheckArgs })},

	{long: "http-port", value: true, dflt: defaultHTTPPort, group: gHTTP,
		help: "Port to listen on, a number or a service name, with -r http; on the address of -L/--listen. If the default port cannot be used, the protocol is off, with a notice; a port given here must work.",
		set:  setHTTPPort},
	{long: "http-timeout", value: true, dflt: "10m", group: gHTTP,
		help: "How long a foreground HTTP request waits for its job's result before it is answered 504 and left to run without it: seconds, or a duration such as 90s, 10m, 1h. 0 waits as long as the job takes, as gearmand does. switchyard only.",
		set:  setHTTPTimeout},

	{long: "port", short: 'p', value: true, dflt: defaultPort, group: gGear,
		help: "Port the server should listen on: a number or a service name. The environment variable GEARMAND_PORT replaces the default.",
		set:  setPort},
	{long: "ssl", group: gGear,
		help: "Enable ssl connections: the port speaks TLS only (see --plain-port). Client certificates are not asked for.",
		set:  setBool(func(o *options) *bool { return &o.SSL })},
	{long: "ssl-ca-file", value: true, group: gGear,
		help: "CA file (PEM). Default $GEARMAND_CA_CERTIFICATE, else " + defaultSSLCAFile + ". Its certificates complete the chain sent to clients.",
		set:  setString(func(o *options) *string { return &o.SSLCAFile })},
	{long: "ssl-certificate", value: true, group: gGear,
		help: "SSL certificate (PEM). Default $GEARMAND_SERVER_PEM, else " + defaultSSLCertificate + ".",
		set:  setString(func(o *options) *string { return &o.SSLCertificate })},
	{long: "ssl-key", value: true, group: gGear,
		help: "SSL key for certificate (PEM). Default $GEARMAND_SERVER_KEY, else " + defaultSSLKey + ".",
		set:  setString(func(o *options) *string { return &o.SSLKey })},
	{long: "plain-port", value: true, group: gGear,
		help: "Also serve plain text on this port (a number or a service name), e.g. for clients without TLS beside --ssl. switchyard only.",
		set:  setPlainPort},

	{long: "libmemcached-servers", value: true, group: gMemcached, help: "Ignored.", ignored: noQueue},
	{long: "libmemcached-prefix", value: true, dflt: "gear_", group: gMemcached, help: "Ignored.", ignored: noQueue},

	{long: "libsqlite3-db", value: true, group: gSqlite, help: "Database file to use.",
		set: setString(func(o *options) *string { return &o.SqliteDB })},
	{long: "store-queue-on-shutdown", group: gSqlite, help: "Store queue on shutdown: the table is written only when the server stops, and a crash loses the jobs queued since it started.",
		set: setBool(func(o *options) *bool { return &o.StoreOnShutdown })},
	{long: "libsqlite3-table", value: true, dflt: "gearman_queue", group: gSqlite, help: "Table to use.",
		set: setString(func(o *options) *string { return &o.SqliteTable })},

	{long: "libpq-conninfo", value: true, group: gPostgres, help: "Ignored.", ignored: noQueue},
	{long: "libpq-table", value: true, dflt: "queue", group: gPostgres, help: "Ignored.", ignored: noQueue},

	{long: "redis-server", value: true, group: gRedis, help: "Ignored.", ignored: noQueue},
	{long: "redis-port", value: true, group: gRedis, help: "Ignored.", ignored: noQueue},
	{long: "redis-password", value: true, group: gRedis, help: "Ignored.", ignored: noQueue},
	{long: "redis-prefix", value: true, group: gRedis, help: "Ignored.", ignored: noQueue},

	{long: "mysql-host", value: true, dflt: "localhost", group: gMySQL, help: "Ignored.", ignored: noQueue},
	{long: "mysql-port", value: true, dflt: "3306", group: gMySQL, help: "Ignored.", ignored: noQueue,
		set: validateOnly(-1<<31, 1<<31-1)}, // gearmand parses it as an int
	{long: "mysql-user", value: true, group: gMySQL, help: "Ignored.", ignored: noQueue},
	{long: "mysql-password", value: true, group: gMySQL, help: "Ignored.", ignored: noQueue},
	{long: "mysql-db", value: true, group: gMySQL, help: "Ignored.", ignored: noQueue},
	{long: "mysql-table", value: true, dflt: "gearman_queue", group: gMySQL, help: "Ignored.", ignored: noQueue},

	{long: "periodic-listen", value: true, multi: true, dflt: "tcp://0.0.0.0:" + defaultPeriodicPort, group: gPeriodic,
		help: "Serve the Periodic protocol (Lupino's periodic 0.1.7) on tcp://HOST:PORT or unix:///path; give it again for more listeners, or 'off' for none. The default is port " + defaultPeriodicPort + " on -L's address; if it cannot be used, the protocol is off, with a notice; an address given here must work. A stale unix socket file is replaced, a live one is an error; the file is removed at exit.",
		set:  setListen("periodic-listen", func(o *options) *[]string { return &o.PeriodicListen }, checkListenURL)},

	{long: "controller-socket", value: true, dflt: defaultControllerSocket, group: gCtl,
		help: "The Worker-Controller protocol's main socket, or 'off'. Its directory is made if missing and holds the workers' sockets (WORKER_ID.sock); stale ones are removed at start. If the default path cannot be used (no /run/switchyard for this user, another switchyard on it), the protocol is off, with a notice; a path given here must work.",
		set:  setControllerSocket},
	{long: "controller-func", value: true, multi: true, dflt: defaultControllerFunc, group: gCtl,
		help: "A function that Worker-Controller workers serve: its jobs, from any protocol, are pushed to them as tasks. Give it again for more.",
		set:  setControllerFunc},

	{long: "dwork-listen", value: true, multi: true, dflt: "tcp://*:" + defaultDworkPort, group: gDwork,
		help: "Serve dwork's hub protocol (a ZeroMQ ROUTER socket) on tcp://HOST:PORT; HOST * is every address, PORT * or 0 one the kernel picks. Give it again for more addresses, or 'off' for none. The default is port " + defaultDworkPort + " on -L's address; if it cannot be used, the protocol is off, with a notice; an address given here must work.",
		set: setListen("dwork-listen", func(o *options) *[]string { return &o.DworkListen }, func(v string) error {
			_, err := dwork.ListenAddr(v)
			return err
		})},
	{long: "dwork-func", value: true, dflt: defaultDworkFunc, group: gDwork,
		help: "The function dwork tasks belong to: any worker of it, from any protocol, can run them (the task's name is the job's unique and payload).",
		set:  setDworkFunc},
	{long: "dwork-host-timeout", value: true, dflt: "0", group: gDwork,
		help: "Take a dwork host that has sent nothing naming it (a Steal, a completion) for this long as exited, as if it had sent Exit: its tasks go back to the head of the queue. Seconds, or a duration such as 90s, 10m; 0 (the default, as with dwork's hub) keeps a host's tasks until it completes them or sends Exit. A closed connection never counts: dwork's clients open one per command.",
		set:  setDworkHostTimeout},
	{long: "dwork-keep-on-close", group: gDwork,
		ignored: "a dwork host always keeps its tasks when its connections close (see --dwork-host-timeout)",
		help:    "Accepted and ignored: a dwork host keeps its tasks when its connections close, as with dwork's hub; --dwork-host-timeout bounds how long a silent host holds them."},

	{long: "memodb-listen", value: true, multi: true, dflt: "tcp://127.0.0.1:" + defaultMemodbPort, group: gMemodb,
		help: "Serve the MemoDB broker protocol (an NNG REP socket) on tcp://HOST:PORT or ipc:///path; port 0 is one the kernel picks, which the 'listening' log line names. Give it again for more addresses, or 'off' for none. The default is port " + defaultMemodbPort + " on -L's address, 127.0.0.1 without -L; if it cannot be used, the protocol is off, with a notice; an address given here must work.",
		set:  setListen("memodb-listen", func(o *options) *[]string { return &o.MemodbListen }, memodb.CheckURL)},
	{long: "memodb-queue-timeout", value: true, dflt: "10s", group: gMemodb,
		help: "How long a MemoDB client's job waits for a worker before it is dropped (its request is not answered, and the client sends it again): seconds, or a duration such as 500ms, 1m.",
		set:  setMemodbDuration("memodb-queue-timeout", func(o *options) *time.Duration { return &o.MemodbQueue })},
	{long: "memodb-heartbeat", value: true, dflt: "10s", group: gMemodb,
		help: "An idle MemoDB worker is sent a HEARTBEAT after this long, and is forgotten if it does not answer within as long: seconds, or a duration such as 500ms, 1m.",
		set:  setMemodbDuration("memodb-heartbeat", func(o *options) *time.Duration { return &o.MemodbHeartbeat })},

	{long: "metrics-listen", value: true, dflt: defaultMetricsListen, group: gMetrics,
		help: "Serve Prometheus metrics (/metrics), a health check (/healthz), a live status page (/) and Go's profiler (/debug/pprof/) over HTTP on HOST:PORT, or 'off'. Port 0 is one the kernel picks, which the 'listening' log line names. They stay on 127.0.0.1 whatever -L says. If the default address cannot be used, they are off, with a notice; an address given here must work.",
		set:  setMetricsListen},
	{long: "ops-token-file", value: true, group: gMetrics,
		help: "Turn on the operator actions (pause, resume, drop a function's waiting jobs, cancel a job) on the status page and POST /api/actions/, with the token this file holds (surrounding white space ignored): each action must carry it. Off without it.",
		set:  setString(func(o *options) *string { return &o.OpsTokenFile })},
	{long: "metrics-function-histograms", group: gMetrics,
		help: "Serve each function's queue wait and run time histograms (switchyard_function_queue_wait_seconds, switchyard_function_run_seconds): 48 series per function that has had a job taken, so 480,000 for 10,000 functions; off, the status page still shows each function's recent percentiles.",
		set:  setBool(func(o *options) *bool { return &o.FuncHistograms })},
	{long: "failures-kept", value: true, dflt: "20", group: gMetrics,
		help: "How many of each function's latest failures (a worker's fail or exception, retries used up, a queue timeout) are kept, with their error text, for the status page and /api/failures, 1000 at most; 0 keeps none.",
		set:  setInt(func(o *options) *int { return &o.FailuresKept }, 0, 1000)},

	{long: "node-id", value: true, group: gCluster,
		help: "Run as a node of a cluster, under this name: the background jobs are kept in a Raft log replicated to the other nodes, and acknowledged once a majority has them on disk. The leader runs the scheduler; every other node relays its clients' connections to it. Needs --cluster-listen.",
		set:  setNodeID},
	{long: "cluster-listen", value: true, group: gCluster,
		help: "HOST:PORT of this node's Raft traffic, which the other nodes dial: a host they can reach, not every address. Port 0 is one the kernel picks, which the 'cluster node' log line names (this node's own entry in --cluster-peers then stands for it).",
		set:  setHostPort("cluster-listen", func(o *options) *string { return &o.ClusterListen })},
	{long: "cluster-peers", value: true, group: gCluster,
		help: "Bootstrap a new cluster of these nodes, this one included: NAME@HOST:PORT, comma-separated, the same on every node. Ignored by a node that has cluster state already; a node to be added to a running cluster is started without it, then added with the admin command 'cluster add NAME HOST:PORT' or the operator API.",
		set:  setClusterPeers},
}

var (
	longOpts      = map[string]*optDef{}
	shortOpts     = map[byte]*optDef{}
	optConfigFile *optDef
)

func init() {
	for _, d := range optTable {
		longOpts[d.long] = d
		if d.short != 0 {
			shortOpts[d.short] = d
		}
	}
	optConfigFile = longOpts["config-file"]
}

// ---- setters ----

func setBool(field func(*options) *bool) func(*parseState, string) error {
	return func(s *parseState, _ string) error {
		*field(s.o) = true
		return nil
	}
}

func setString(field func(*options) *string) func(*parseState, string) error {
	return func(s *parseState, v string) error {
		*field(s.o) = v
		return nil
	}
}

func setInt(field func(*options) *int, lo, hi int64) func(*parseState, string) error {
	return func(s *parseState, v string) error {
		n, ok := parseDecimal(v)
		if !ok || n < lo || n > hi {
			return errInvalid
		}
		*field(s.o) = int(n)
		return nil
	}
}

// setWakeup takes -w: auto (sched.WakeDemand) or a count, 0 for all.
func setWakeup(s *parseState, v string) error {
	if v == "auto" {
		s.o.WorkerWakeup = sched.WakeDemand
		return nil
	}
	return setInt(func(o *options) *int { return &o.WorkerWakeup }, 0, 1<<32-1)(s, v)
}

func validateOnly(lo, hi int64) func(*parseState, string) error {
	return func(_ *parseState, v string) error {
		if n, ok := parseDecimal(v); !ok || n < lo || n > hi {
			return errInvalid
		}
		return nil
	}
}

// setKeepalive accepts -1 (system default) or 1..hi; gearmand hands other
// values to setsockopt, which refuses them at startup.
func setKeepalive(field func(*options) *int, hi int64) func(*parseState, string) error {
	return func(s *parseState, v string) error {
		n, ok := parseDecimal(v)
		if !ok || (n != -1 && (n < 1 || n > hi)) {
			return errInvalid
		}
		*field(s.o) = int(n)
		return nil
	}
}

func setHashtableBuckets(s *parseState, v string) error {
	n, ok := parseDecimal(v)
	if !ok || n < 0 || n > 1<<32-1 {
		return errInvalid
	}
	s.buckets = n
	return nil
}

func setPort(s *parseState, v string) error {
	p, ok := normalizePort(v)
	if !ok {
		return errInvalid
	}
	s.o.Port = p
	s.portSet = true
	return nil
}

func setHTTPPort(s *parseState, v string) error {
	s.o.HTTPPort, s.o.HTTPPortGiven = v, true
	return nil
}

func setPlainPort(s *parseState, v string) error {
	p, ok := normalizePort(v)
	if v == "" || !ok {
		return errInvalid
	}
	s.o.PlainPort = p
	return nil
}

func setLogFile(s *parseState, v string) error {
	if v == "" {
		v = "none" // gearmand logs nowhere with -l ""
	}
	s.o.LogFile = v
	return nil
}

func setMaxPacket(s *parseState, v string) error {
	n, ok := parseBytes(v, 1, maxMaxPacket)
	if !ok {
		return usagef("the argument ('%s') for option '--max-packet' is invalid (bytes: a number, alone or with B, K, M, G, KiB, MiB or GiB, where 1K = 1KiB = 1024%s; from 1 to 4G)", v, siHint(v))
	}
	s.o.MaxPacket = n
	return nil
}

// maxMaxMemory bounds --max-memory: 1 PiB.
const maxMaxMemory = 1 << 50

func setMaxMemory(s *parseState, v string) error {
	if v == "auto" {
		s.o.MaxMemory = -1
		return nil
	}
	n, ok := parseBytes(v, 0, maxMaxMemory)
	if !ok {
		return usagef("the argument ('%s') for option '--max-memory' is invalid (auto, 0, or bytes: a number, alone or with B, K, M, G, T, KiB, MiB, GiB or TiB, where 1K = 1KiB = 1024%s)", v, siHint(v))
	}
	s.o.MaxMemory = n
	return nil
}

// byteUnits are the suffixes of a size option: K, M, G and T in either
// case, as switchyard has always read them, and B, KiB, MiB, GiB and TiB,
// spelt as GOMEMLIMIT spells them. All are powers of 1024. SI's KB, MB,
// GB and TB (powers of 1000) are none of them: GOMEMLIMIT refuses them
// too, and read as 1024s they would not mean what they say.
var byteUnits = map[string]int64{
	"": 1, "B": 1,
	"k": 1 << 10, "K": 1 << 10, "KiB": 1 << 10,
	"m": 1 << 20, "M": 1 << 20, "MiB": 1 << 20,
	"g": 1 << 30, "G": 1 << 30, "GiB": 1 << 30,
	"t": 1 << 40, "T": 1 << 40, "TiB": 1 << 40,
}

// parseBytes parses a size: decimal digits and a unit of byteUnits
// ("123", "64K", "16m", "256MiB", "4096B"), from lo to hi bytes.
func parseBytes(v string, lo, hi int64) (int64, bool) {
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	mult, ok := byteUnits[v[i:]]
	if i == 0 || !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:i], 10, 64)
	if err != nil || n > hi/mult || n*mult < lo {
		return 0, false
	}
	return n * mult, true
}

// siHint says, for a size written with an SI unit (256MB), what to write
// instead.
func siHint(v string) string {
	i := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if i <= 0 {
		return ""
	}
	switch unit := strings.ToUpper(v[i:]); unit {
	case "KB", "MB", "GB", "TB":
		return fmt.Sprintf("; %s is not one of them: %s%s or %s%siB", v[i:], v[:i], unit[:1], v[:i], unit[:1])
	}
	return ""
}

func setFsync(s *parseState, v string) error {
	if _, err := durable.ParseSync(v); err != nil {
		return errInvalid
	}
	s.o.Fsync = v
	return nil
}

func setControllerSocket(s *parseState, v string) error {
	if v == "" {
		return errInvalid
	}
	s.o.ControllerSocket = v
	return nil
}

func setControllerFunc(s *parseState, v string) error {
	if v == "" {
		return usagef("the argument ('') for option '--controller-func' is invalid: a function has a name")
	}
	if !slices.Contains(s.o.ControllerFuncs, v) {
		s.o.ControllerFuncs = append(s.o.ControllerFuncs, v)
	}
	return nil
}

func setMetricsListen(s *parseState, v string) error {
	if v != "off" {
		host, port, err := net.SplitHostPort(v)
		if err == nil {
			_, err = strconv.ParseUint(port, 10, 16)
		}
		if err != nil || strings.ContainsAny(host, "/ ") {
			return usagef("the argument ('%s') for option '--metrics-listen' is invalid: want HOST:PORT or off", v)
		}
	}
	s.o.MetricsListen = v
	return nil
}

func setNodeID(s *parseState, v string) error {
	if v == "" || strings.ContainsAny(v, "@, \t") {
		return usagef("the argument ('%s') for option '--node-id' is invalid: a name without '@', ',' or spaces", v)
	}
	s.o.NodeID = v
	return nil
}

// setHostPort takes HOST:PORT, both given.
func setHostPort(name string, field func(*options) *string) func(*parseState, string) error {
	return func(s *parseState, v string) error {
		host, port, err := net.SplitHostPort(v)
		if err == nil {
			_, err = strconv.ParseUint(port, 10, 16)
		}
		if err != nil || host == "" || strings.ContainsAny(host, "/ ") {
			return usagef("the argument ('%s') for option '--%s' is invalid: want HOST:PORT", v, name)
		}
		*field(s.o) = v
		return nil
	}
}

func setClusterPeers(s *parseState, v string) error {
	if _, err := cluster.ParsePeers(v); err != nil {
		return usagef("the argument ('%s') for option '--cluster-peers' is invalid: %v", v, err)
	}
	s.o.ClusterPeers = v
	return nil
}

// setListen takes a repeatable listener option's addresses, each checked
// by check, or "off" (alone) for none: Periodic's, dwork's, MemoDB's.
func setListen(name string, field func(*options) *[]string, check func(string) error) func(*parseState, string) error {
	return func(s *parseState, v string) error {
		addrs := field(s.o)
		if v == "off" {
			if len(*addrs) > 0 {
				return usagef("the argument ('off') for option '--%s' cannot be combined with addresses", name)
			}
			*addrs = []string{}
			return nil
		}
		if *addrs != nil && len(*addrs) == 0 {
			return usagef("the argument ('%s') for option '--%s' cannot be combined with 'off'", v, name)
		}
		if err := check(v); err != nil {
			return usagef("the argument ('%s') for option '--%s' is invalid: %v", v, name, err)
		}
		if slices.Contains(*addrs, v) {
			return usagef("the argument ('%s') for option '--%s' is given twice", v, name)
		}
		*addrs = append(*addrs, v)
		return nil
	}
}

func setDworkFunc(s *parseState, v string) error {
	if v == "" {
		return usagef("the argument ('') for option '--dwork-func' is invalid: a function has a name")
	}
	s.o.DworkFunc = v
	return nil
}

func setDworkHostTimeout(s *parseState, v string) error {
	d, ok := parseDuration(v)
	if !ok {
		return usagef("the argument ('%s') for option '--dwork-host-timeout' is invalid (seconds, or a duration such as 90s, 10m; 0 never takes a host as exited)", v)
	}
	s.o.DworkHostTimeout = d
	return nil
}

// setMemodbDuration parses a positive duration: whole seconds or a Go
// duration.
func setMemodbDuration(name string, field func(*options) *time.Duration) func(*parseState, string) error {
	return func(s *parseState, v string) error {
		d, ok := parseDuration(v)
		if !ok || d <= 0 {
			return usagef("the argument ('%s') for option '--%s' is invalid (seconds, or a duration such as 500ms, 1m; more than 0)", v, name)
		}
		*field(s.o) = d
		return nil
	}
}

// checkListenURL accepts tcp://HOST:PORT (HOST may be empty for every
// address, PORT 0 for one the kernel picks) and unix:///absolute/path.
func checkListenURL(v string) error {
	scheme, rest, ok := strings.Cut(v, "://")
	switch {
	case !ok:
		return errors.New("want tcp://HOST:PORT or unix:///path")
	case scheme == "unix":
		if !strings.HasPrefix(rest, "/") {
			return errors.New("a unix socket path must be absolute")
		}
		return nil
	case scheme == "tcp":
		_, port, err := net.SplitHostPort(rest)
		if err != nil {
			return err
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || port != strconv.FormatUint(n, 10) {
			return fmt.Errorf("bad port %q", port)
		}
		return nil
	}
	return fmt.Errorf("unknown scheme %q", scheme)
}

func setFunctionTTL(s *parseState, v string) error {
	d, ok := parseDuration(v)
	if !ok {
		return usagef("the argument ('%s') for option '--function-ttl' is invalid (seconds, or a duration such as 90s, 10m, 1h; 0 keeps every function)", v)
	}
	s.o.FunctionTTL = d
	return nil
}

func setHTTPTimeout(s *parseState, v string) error {
	d, ok := parseDuration(v)
	if !ok {
		return usagef("the argument ('%s') for option '--http-timeout' is invalid (seconds, or a duration such as 90s, 10m, 1h; 0 waits as long as the job takes)", v)
	}
	s.o.HTTPTimeout = d
	return nil
}

func setShutdownTimeout(s *parseState, v string) error {
	d, ok := parseDuration(v)
	if !ok {
		return usagef("the argument ('%s') for option '--shutdown-timeout' is invalid (seconds, or a duration such as 90s, 10m, 1h)", v)
	}
	s.o.ShutdownTimeout = d
	return nil
}

// parseDuration parses a whole number of seconds or a Go duration ("90s",
// "1h30m"), not negative.
func parseDuration(v string) (time.Duration, bool) {
	d, err := time.ParseDuration(v)
	if n, ok := parseDecimal(v); ok {
		d, err = time.Duration(n)*time.Second, nil
		if n > int64(maxDuration/time.Second) {
			err = errInvalid
		}
	}
	return d, err == nil && d >= 0
}

const maxDuration = time.Duration(1<<63 - 1)

// parseDecimal parses an integer as boost's lexical_cast does: an optional
// sign, then decimal digits only (no spaces, no hexadecimal).
func parseDecimal(v string) (int64, bool) {
	digits := v
	if digits != "" && (digits[0] == '+' || digits[0] == '-') {
		digits = digits[1:]
	}
	if digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// normalizePort turns a port number or a service name into a decimal port
// number. An empty string is gearmand's "the gearman service, else 4730".
func normalizePort(v string) (string, bool) {
	if v == "" {
		if n, err := net.LookupPort("tcp", "gearman"); err == nil {
			return strconv.Itoa(n), true
		}
		return defaultPort, true
	}
	if n, ok := parseDecimal(v); ok {
		if v[0] == '+' || v[0] == '-' || n > 65535 {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	}
	if strings.ContainsAny(v, " \t/") {
		return "", false
	}
	n, err := net.LookupPort("tcp", v)
	if err != nil {
		return "", false
	}
	return strconv.Itoa(n), true
}

// ---- parsing ----

// token is one word of the command line or of the configuration file.
type token struct {
	text string
	line int // line in the configuration file (from 1); 0 on the command line
	// commented: on its line, a word starting with '#' came before it (or
	// it is that word).
	commented bool
}

// item is an option occurrence, or a word that is not an option (def nil).
type item struct {
	def   *optDef
	value string
	tok   token // the token the item starts at
}

// tokenizeFile splits a configuration file as gearmand does: on spaces, CR
// and LF only.
func tokenizeFile(data string) []token {
	var toks []token
	line, commented := 1, false
	start := -1
	flush := func(end int) {
		if start >= 0 {
			w := data[start:end]
			if w[0] == '#' {
				commented = true
			}
			toks = append(toks, token{text: w, line: line, commented: commented})
			start = -1
		}
	}
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case ' ', '\r':
			flush(i)
		case '\n':
			flush(i)
			line++
			commented = false
		default:
			if start < 0 {
				start = i
			}
		}
	}
	flush(len(data))
	return toks
}

func unrecognised(tok string) error {
	return usagef("unrecognised option '%s'", tok)
}

func missingArg(d *optDef) error {
	return usagef("the required argument for option '--%s' is missing", d.long)
}

// findLong looks a long option up. inFile: abbreviations allowed (a unique
// prefix) and hidden options unknown, as in gearmand's file parser.
func findLong(name, tok string, inFile bool) (*optDef, error) {
	if name == "" {
		return nil, unrecognised(tok)
	}
	if d := longOpts[name]; d != nil && !(inFile && d.hidden) {
		return d, nil
	}
	if !inFile {
		return nil, unrecognised(tok)
	}
	var matches []string
	for _, d := range optTable {
		if !d.hidden && strings.HasPrefix(d.long, name) {
			matches = append(matches, d.long)
		}
	}
	switch len(matches) {
	case 0:
		return nil, unrecognised(tok)
	case 1:
		return longOpts[matches[0]], nil
	}
	sort.Strings(matches)
	var b strings.Builder
	fmt.Fprintf(&b, "option '%s' is ambiguous and matches ", tok)
	for _, m := range matches[:len(matches)-1] {
		fmt.Fprintf(&b, "'--%s', ", m)
	}
	fmt.Fprintf(&b, "and '--%s'", matches[len(matches)-1])
	return nil, &usageError{msg: b.String()}
}

// nextValue takes the argument of d from toks[i]. Like boost, it takes any
// word, even one starting with '-', unless the word is exactly a known short
// option ("-R").
func nextValue(toks []token, i int, d *optDef) (string, error) {
	if i >= len(toks) {
		return "", missingArg(d)
	}
	t := toks[i].text
	if len(t) == 2 && t[0] == '-' && shortOpts[t[1]] != nil {
		return "", missingArg(d)
	}
	return t, nil
}

// parseTokens does the syntax pass: it finds the options and their values
// and reports, in order, unknown options, missing or unexpected arguments and
// (in the file) ambiguous abbreviations.
func parseTokens(toks []token, inFile bool) ([]item, error) {
	var items []item
	afterTerminator := false
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		t := tk.text
		if afterTerminator || len(t) < 2 || t[0] != '-' {
			items = append(items, item{tok: tk})
			continue
		}
		if t == "--" {
			afterTerminator = true
			continue
		}
		if strings.HasPrefix(t, "--") {
			name, val, hasEq := strings.Cut(t[2:], "=")
			if hasEq && val == "" {
				return nil, usagef("the argument for option '--%s' should follow immediately after the equal sign", name)
			}
			d, err := findLong(name, t, inFile)
			if err != nil {
				return nil, err
			}
			if !d.value {
				if hasEq {
					return nil, usagef("option '--%s' does not take any arguments", d.long)
				}
				items = append(items, item{def: d, tok: tk})
				continue
			}
			if !hasEq {
				if val, err = nextValue(toks, i+1, d); err != nil {
					return nil, err
				}
				i++
			}
			items = append(items, item{def: d, value: val, tok: tk})
			continue
		}
		// A group of short options: flags, then possibly one option that
		// takes the rest of the word, or the next word, as its value.
		for rest := t[1:]; rest != ""; {
			d := shortOpts[rest[0]]
			if d == nil {
				return nil, unrecognised(t)
			}
			rest = rest[1:]
			if !d.value {
				items = append(items, item{def: d, tok: tk})
				continue
			}
			val := rest
			if val == "" {
				var err error
				if val, err = nextValue(toks, i+1, d); err != nil {
					return nil, err
				}
				i++
			}
			items = append(items, item{def: d, value: val, tok: tk})
			break
		}
	}
	return items, nil
}

// store applies the items of one source: the command line (file == "") or
// the configuration file named file.
func (s *parseState) store(items []item, file string) error {
	inFile := file != ""
	seen := map[*optDef]bool{}
	for _, it := range items {
		d, v := it.def, it.value
		if d == nil {
			switch {
			case inFile:
				if !it.tok.commented {
					s.warnf("ignoring '%s' in configuration file %s (line %d): not an option; write options as on the command line, e.g. --port=4730",
						it.tok.text, file, it.tok.line)
				}
				continue
			case len(it.tok.text) > 1 && it.tok.text[0] == '@':
				d, v = optConfigFile, it.tok.text[1:]
			default:
				return unrecognised(it.tok.text)
			}
		}
		if inFile && s.fromCmdline[d] {
			continue // the command line wins; gearmand does not even check the value
		}
		if seen[d] && !d.multi {
			return usagef("option '--%s' cannot be specified more than once", d.long)
		}
		seen[d] = true
		if !inFile {
			s.fromCmdline[d] = true
		}
		if d.refused != "" {
			return usagef("%s (option '--%s')", d.refused, d.long)
		}
		if inFile && d == optConfigFile {
			continue // gearmand reads one file only
		}
		if d.set != nil {
			if err := d.set(s, v); err != nil {
				if err == errInvalid {
					return usagef("the argument ('%s') for option '--%s' is invalid", v, d.long)
				}
				return err
			}
		}
		if d.ignored != "" {
			s.warnf("ignoring --%s: %s", d.long, d.ignored)
		}
		if inFile && it.tok.commented {
			s.warnf("configuration file %s (line %d): '#' does not start a comment in gearmand's format; option '--%s' on that line is applied",
				file, it.tok.line, d.long)
		}
	}
	return nil
}

func (s *parseState) warnf(format string, a ...any) {
	s.o.Warnings = append(s.o.Warnings, fmt.Sprintf(format, a...))
}

func defaultOptions() *options {
	return &options{
		Port:              defaultPort,
		LogFile:           defaultLogFile,
		Verbose:           defaultVerbose,
		WorkerWakeup:      sched.WakeDemand,
		Backlog:           defaultBacklog,
		KeepaliveIdle:     -1,
		KeepaliveInterval: -1,
		KeepaliveCount:    -1,
		QueueType:         defaultQueueType,
		Fsync:             defaultFsync,
		SqliteTable:       sqlite.DefaultTable,
		ConfigFile:        defaultConfigFile,
		MaxPacket:         defaultMaxPacket,
		MaxMemory:         -1,
		FunctionTTL:       time.Hour,
		FailuresKept:      20,
		MemodbQueue:       memodb.DefaultQueueTimeout,
		MemodbHeartbeat:   memodb.DefaultHeartbeat,
		HTTPPort:          defaultHTTPPort,
		HTTPTimeout:       gearhttp.DefaultTimeout,
		ShutdownTimeout:   defaultShutdownTimeout,
	}
}

// parseArgs parses args (without the program name) and the configuration
// file they name (or the default one if it exists); the file's values apply
// only where the command line did not set the option. getenv is os.Getenv in
// main. Every error is a *usageError.
func parseArgs(args []string, getenv func(string) string) (*options, error) {
	s := &parseState{o: defaultOptions(), buckets: 991, fromCmdline: map[*optDef]bool{}}
	o := s.o

	toks := make([]token, len(args))
	for i, a := range args {
		toks[i] = token{text: a}
	}
	items, err := parseTokens(toks, false)
	if err != nil {
		return nil, err
	}
	if err := s.store(items, ""); err != nil {
		return nil, err
	}

	if path := o.ConfigFile; path != "" {
		data, err := os.ReadFile(path)
		switch {
		case err == nil:
			inFile := func(err error) error {
				return usagef("%v (in configuration file %s)", err, path)
			}
			items, err := parseTokens(tokenizeFile(string(data)), true)
			if err != nil {
				return nil, inFile(err)
			}
			if err := s.store(items, path); err != nil {
				return nil, inFile(err)
			}
		case path != defaultConfigFile:
			return nil, usagef("Could not open configuration file.") // gearmand's words, and all of them
		case !errors.Is(err, fs.ErrNotExist):
			s.warnf("ignoring configuration file %s: %v", path, err)
		}
	}

	// The checks gearmand makes after parsing, in its order.
	name := strings.ToUpper(o.Verbose)
	if _, ok := verboseLevels[name]; !ok {
		return nil, usagef("Invalid value for --verbose supplied")
	}
	o.Verbose = name
	if s.buckets == 0 {
		return nil, usagef("hashtable-buckets has to be greater than 0")
	}
	switch q := strings.ToLower(o.QueueType); q {
	case "builtin", "durable", "libsqlite3":
		o.QueueType = q
	default:
		return nil, usagef("unknown queue type '%s': use durable, builtin or libsqlite3", o.QueueType)
	}
	if o.Recover && o.QueueType != "durable" {
		s.warnf("ignoring --recover: only the durable queue (-q durable) checks itself at start")
	}
	if !s.portSet {
		if env := getenv("GEARMAND_PORT"); env != "" {
			p, ok := normalizePort(env)
			if !ok {
				return nil, usagef("the GEARMAND_PORT environment variable ('%s') is not a valid port", env)
			}
			o.Port = p
		}
	}
	if err := s.sslDefaults(getenv); err != nil {
		return nil, err
	}
	if err := checkCluster(o); err != nil {
		return nil, err
	}
	switch s.protocol {
	case "":
	case "http":
		// gearmand finds a bad port when it binds; here, as for -p, at once.
		p, ok := normalizePort(o.HTTPPort)
		if o.HTTPPort == "" || !ok {
			return nil, usagef("the argument ('%s') for option '--http-port' is invalid", o.HTTPPort)
		}
		o.HTTP, o.HTTPPort = true, p
	default:
		return nil, usagef("Unknown protocol module : %s", s.protocol)
	}
	return o, nil
}

// checkCluster: the cluster options go together, and a cluster keeps its
// jobs in its replicated log only.
func checkCluster(o *options) error {
	switch {
	case o.NodeID == "" && (o.ClusterListen != "" || o.ClusterPeers != ""):
		return usagef("--cluster-listen and --cluster-peers need --node-id")
	case o.NodeID == "":
		return nil
	case o.ClusterListen == "":
		return usagef("--node-id needs --cluster-listen, the address the other nodes reach this one at")
	case o.QueueType != "durable":
		return usagef("a cluster node keeps its jobs in the replicated log: -q %s cannot be used with --node-id", o.QueueType)
	}
	return nil
}

// verboseLevels orders gearmand's verbose names, from FATAL (0) to DEBUG (7).
var verboseLevels = map[string]int{
	"FATAL": 0, "ALERT": 1, "CRITICAL": 2, "ERROR": 3,
	"WARNING": 4, "NOTICE": 5, "INFO": 6, "DEBUG": 7,
}

// verboseLevel maps a --verbose name (any case) to 0 (FATAL) .. 7 (DEBUG);
// an unknown name gives 3 (ERROR), the default.
func verboseLevel(name string) int {
	if l, ok := verboseLevels[strings.ToUpper(name)]; ok {
		return l
	}
	return verboseLevels[defaultVerbose]
}

// ---- help ----

const helpLineLength = 80 // boost's default

// usage writes the help in gearmand's (boost's) layout: groups, then one
// option per entry with its default, descriptions wrapped at 80 columns.
func usage(w io.Writer) {
	width := helpColumnWidth()
	var b strings.Builder
	b.WriteString("Allowed options:\n")
	for _, g := range groupOrder {
		b.WriteString("\n" + g + ":\n")
		for _, d := range optTable {
			if d.group == g && !d.hidden {
				formatOption(&b, d, width)
				b.WriteString("\n")
			}
		}
	}
	b.WriteString("\n")
	io.WriteString(w, b.String())
}

// helpFirstColumn is "  -b [ --backlog ] arg (=32)".
func helpFirstColumn(d *optDef) string {
	name := "--" + d.long
	if d.short != 0 {
		name = fmt.Sprintf("-%c [ --%s ]", d.short, d.long)
	}
	param := ""
	if d.value {
		param = "arg"
		if d.dflt != "" {
			param += " (=" + d.dflt + ")"
		}
	}
	return "  " + name + " " + param
}

func helpColumnWidth() int {
	width := 0
	for _, d := range optTable {
		if !d.hidden {
			width = max(width, len(helpFirstColumn(d)))
		}
	}
	return min(width, helpLineLength/2-1) + 1
}

func formatOption(b *strings.Builder, d *optDef, width int) {
	col := helpFirstColumn(d)
	b.WriteString(col)
	if d.help == "" {
		return
	}
	if len(col) >= width {
		b.WriteString("\n" + strings.Repeat(" ", width))
	} else {
		b.WriteString(strings.Repeat(" ", width-len(col)))
	}
	// boost uses one column less than the line length for descriptions.
	formatParagraph(b, d.help, width, helpLineLength-1)
}

// formatParagraph wraps text as boost's format_paragraph does: chunks of
// lineLength-indent bytes, broken after the last space if that space is in
// the chunk's second half, continuation lines indented.
func formatParagraph(b *strings.Builder, text string, indent, lineLength int) {
	lineLength -= indent
	for first := true; text != ""; first = false {
		if !first && text[0] == ' ' && len(text) > 1 && text[1] != ' ' {
			text = text[1:]
		}
		end := min(len(text), lineLength)
		if text[end-1] != ' ' && end < len(text) && text[end] != ' ' {
			if sp := strings.LastIndexByte(text[:end], ' ') + 1; sp > 0 && end-sp < lineLength/2 {
				end = sp
			}
		}
		b.WriteString(text[:end])
		text = text[end:]
		if text != "" {
			b.WriteString("\n" + strings.Repeat(" ", indent))
		}
	}
}
