package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var updateMan = flag.Bool("update", false, "rewrite docs/switchyard.8 from the option table")

const manPath = "../../docs/switchyard.8"

func manPage(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := writeManPage(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// docs/switchyard.8 is what writeManPage writes from the option table
// today: a change to an option that did not regenerate it ("make man")
// fails here.
func TestManPage(t *testing.T) {
	got := manPage(t)
	if *updateMan {
		if err := os.WriteFile(manPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(manPath)
	if err != nil {
		t.Fatalf("%v (make man writes it)", err)
	}
	if string(want) != got {
		t.Fatalf("%s is stale: run make man (go test ./cmd/switchyard -run '^TestManPage$' -update)\n%s",
			manPath, firstDiff(string(want), got))
	}
}

// firstDiff names the first line where two texts differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, x, y)
		}
	}
	return ""
}

// Every option of the table is in --help and in the man page, with its
// short name and its default, in its group; a hidden one is in neither.
func TestHelpAndManPageListEveryOption(t *testing.T) {
	var help bytes.Buffer
	usage(&help)
	man := manPage(t)
	// The man page's OPTIONS, cut at each group's .SS line.
	groups := map[string]string{}
	opts := man[strings.Index(man, "\n.SH OPTIONS\n"):strings.Index(man, "\n.SH SIGNALS\n")]
	for _, sec := range strings.Split(opts, "\n.SS ")[1:] {
		name, body, _ := strings.Cut(sec, "\n")
		groups[strings.Trim(name, `"`)] = "\n" + body
	}
	if len(groups) != len(groupOrder) {
		t.Errorf("the man page has %d option groups, --help %d", len(groups), len(groupOrder))
	}
	for _, d := range optTable {
		helpName := "--" + d.long
		if d.short != 0 {
			helpName = "-" + string(d.short) + " [ --" + d.long + " ]"
		}
		manHead := "\n.TP\n" + manOptionHead(d) + "\n"
		if d.hidden {
			if strings.Contains(help.String(), "--"+d.long) || strings.Contains(man, roffDashes(d.long)) {
				t.Errorf("hidden option --%s is documented", d.long)
			}
			continue
		}
		if !strings.Contains(help.String(), "  "+helpName+" ") && !strings.HasSuffix(strings.TrimRight(help.String(), "\n"), helpName) {
			t.Errorf("--help has no %q", helpName)
		}
		body, ok := groups[d.group]
		if !ok {
			t.Errorf("--%s: the man page has no group %q", d.long, d.group)
			continue
		}
		i := strings.Index(body, manHead)
		if i < 0 {
			t.Errorf("the man page's group %q has no %q", d.group, manHead)
			continue
		}
		text, _, _ := strings.Cut(body[i+len(manHead):], "\n")
		// A help that speaks of its default itself ("Default=0") is left so.
		if d.dflt != "" && !strings.Contains(d.help, "Default") && !strings.HasSuffix(text, roffText("Default: "+d.dflt+".")) {
			t.Errorf("--%s: the man page does not give its default %s: %q", d.long, d.dflt, text)
		}
		if d.help != "" && !strings.HasPrefix(text, roffText(strings.Fields(d.help)[0])) {
			t.Errorf("--%s: the man page's text is not the help's: %q", d.long, text)
		}
	}
}

func TestRoffText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain words", "plain words"},
		{"use --port or -p, -1 keeps it", `use \-\-port or \-p, \-1 keeps it`},
		{"(--controller-socket) and --data-dir, drop-in", `(\-\-controller\-socket) and \-\-data\-dir, drop-in`},
		{"Worker-Controller and drop-in", "Worker-Controller and drop-in"},
		{`a \ backslash`, `a \e backslash`},
		{".starts with a dot", `\&.starts with a dot`},
		{"'quoted' (-r http) =-x", `\&'quoted' (\-r http) =\-x`},
	}
	for _, tc := range tests {
		if got := roffText(tc.in); got != tc.want {
			t.Errorf("roffText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// groff reads the committed page without a warning, and man(1) shows every
// section of it.
func TestE2EManPageRenders(t *testing.T) {
	groff := requireTool(t, "groff")
	r := runCmd(t, e2eCmdTimeout, "", groff, "-man", "-ww", "-z", manPath)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("groff -man -ww: %s", r)
	}
	r = runCmd(t, e2eCmdTimeout, "", groff, "-man", "-Tutf8", "-P-cbou", manPath)
	if r.code != 0 {
		t.Fatalf("groff -man -Tutf8: %s", r)
	}
	for _, s := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SIGNALS", "FILES", "EXIT STATUS", "SEE ALSO",
		"-p, --port=arg", "--metrics-listen=arg", "SIGHUP"} {
		if !strings.Contains(r.stdout, "\n"+s) && !strings.Contains(r.stdout, " "+s) {
			t.Errorf("the rendered page has no %q", s)
		}
	}
	if path, err := filepath.Abs(manPath); err == nil {
		if _, err := exec.LookPath("man"); err == nil {
			r = runCmd(t, e2eCmdTimeout, "", "man", "-l", path)
			if r.code != 0 || !strings.Contains(r.stdout, "switchyard") {
				t.Errorf("man -l: %s", r)
			}
		}
	}
}
