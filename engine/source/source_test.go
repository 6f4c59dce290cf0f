package source

import (
	"testing"

	"switchyard/sched"
)

// Every source has a distinct name that fits sched's counters.
func TestNames(t *testing.T) {
	seen := map[string]bool{}
	for _, src := range All() {
		n := Name(src)
		if n == "" || seen[n] {
			t.Errorf("source %d: name %q is empty or taken", src, n)
		}
		seen[n] = true
		if src >= sched.MaxSources {
			t.Errorf("source %d: past sched.MaxSources", src)
		}
	}
	if n := Name(sched.MaxSources - 1); n != "" {
		t.Errorf("an unused source is named %q", n)
	}
}
