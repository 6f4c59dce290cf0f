module switchyard

go 1.26

require (
	github.com/HdrHistogram/hdrhistogram-go v1.1.2
	github.com/panjf2000/gnet/v2 v2.10.0
	go.uber.org/zap v1.28.0
	golang.org/x/sys v0.30.0
)

require (
	github.com/panjf2000/ants/v2 v2.12.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	golang.org/x/sync v0.11.0 // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.2.1 // indirect
)
