package jepsen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchyard/bench/netns"
)

// The suite's modes, by SWITCHYARD_JEPSEN: "full" (make jepsen: every
// schedule with FullFaults faults), "short" (CI: ShortFaults each).
// Unset, the suite is skipped: it needs root and minutes, and runs alone.
const modeEnv = "SWITCHYARD_JEPSEN"

// recoverWithin is the bound on a recovery after a heal.
const recoverWithin = 5 * time.Second

// TestJepsen runs every schedule against a cluster of three nodes, each
// in a network namespace of its own, with the workload's clients in a
// fourth, and fails on any finding of the checker. Each run's history,
// the checker's verdict and the nodes' output are the test's artifacts
// (with SWITCHYARD_JEPSEN_OUT=DIR, in DIR/SCHEDULE/, and the table of
// the run in DIR/table.md: make jepsen's test-results/jepsen/).
func TestJepsen(t *testing.T) {
	mode := os.Getenv(modeEnv)
	faults := map[string]int{"full": FullFaults, "short": ShortFaults}[mode]
	if faults == 0 {
		t.Skipf("the Jepsen suite runs with %s=full (make jepsen) or %s=short (CI), as root", modeEnv, modeEnv)
	}
	if err := netns.Available(); err != nil {
		if os.Getenv("SWITCHYARD_E2E_REQUIRED") == "1" { // CI: .ci/run
			t.Fatalf("the Jepsen suite needs network namespaces: %v", err)
		}
		t.Skipf("the Jepsen suite needs network namespaces: %v", err)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(modeEnv + "_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (%s_SEED=%d repeats the schedules' and the clients' choices)", seed, modeEnv, seed)
	bin := buildSwitchyard(t)
	var rows []string
	for i, s := range Schedules {
		t.Run(s.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			dir := t.ArtifactDir()
			if out := os.Getenv(modeEnv + "_OUT"); out != "" {
				dir = filepath.Join(out, s.Name)
			}
			r, err := Run(ctx, RunConfig{Binary: bin, Dir: dir, Schedule: s, Faults: faults, Prefix: "syj",
				Ops: 100000, Pace: 20 * time.Millisecond, RecoverWithin: recoverWithin, Seed: seed + uint64(i), Logf: t.Logf})
			if r != nil {
				var b strings.Builder
				r.WriteText(&b)
				t.Logf("%s\n%s", s.About, b.String())
				rows = append(rows, Row(s.Name, r))
				if !r.Valid() {
					t.Errorf("%d findings; the history, the checker's verdict and the nodes' output are in %s", len(r.Findings), dir)
				}
				if r.Faults < faults {
					t.Errorf("%d faults made, want %d", r.Faults, faults)
				}
			}
			if err != nil {
				t.Errorf("%v (files in %s)", err, dir)
			}
		})
	}
	t.Logf("\n%s\n%s", TableHeader, strings.Join(rows, "\n"))
	if out := os.Getenv(modeEnv + "_OUT"); out != "" {
		table := TableHeader + "\n" + strings.Join(rows, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(out, "table.md"), []byte(table), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// TableHeader heads the table of a run of the suite (docs/cluster.md).
const TableHeader = "| schedule | faults | operations | acknowledged | lost | violations | duplicated | refused, ran | unanswered, ran | worst recovery |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"

// Row is a schedule's line of the table.
func Row(name string, r *Result) string {
	s := r.Sum()
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %d | %d | %.2f s |", name, r.Faults, s.Submits, s.OK, s.Lost,
		len(r.Findings)-s.Lost, s.Duplicated, s.RefusedRan, s.UnknownRan, r.WorstRecovery().Seconds())
}
