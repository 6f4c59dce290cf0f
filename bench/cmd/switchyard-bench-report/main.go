// Command switchyard-bench-report reads every benchmark record in the
// results directory and writes README.md, history.svg and, when a record has a latency–throughput curve, curve.svg beside them.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"switchyard/bench/record"
	"switchyard/bench/report"
)

func main() {
	dir := flag.String("dir", "bench/results", "directory of the JSON records; README.md and history.svg are written there")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "switchyard-bench-report:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	records, err := record.ReadDir(dir)
	if err != nil {
		return err
	}
	series := report.Collect(records)
	files := map[string]string{
		"README.md":   report.Markdown(series),
		"history.svg": report.SVG(series),
	}
	if curves := report.CurveSVG(series); curves != "" {
		files["curve.svg"] = curves
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", path)
	}
	return nil
}
