package main

// The user documentation is checked like code: the flag table of
// docs/operating.md covers the option table and the README links to it,
// the README and docs/*.md link only to files and headings that exist, and
// no file points at material outside the repository. These run in a clean clone (CI): the repository's root is
// found from this package's directory.

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// protocolPages are the pages the README's protocol list links to; each
// must exist.
var protocolPages = []string{"gearman.md", "http.md", "periodic.md", "controller.md", "dwork.md", "memodb.md"}

// repoRoot is the directory holding go.mod, above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// flagPage is the page whose "## Flags" section holds the flag table, and
// flagLink the link to it that the README must have.
const (
	flagPage = "docs/operating.md"
	flagLink = "docs/operating.md#flags"
)

// flagTableCells returns the first cell of every row of the tables in
// the "## Flags" section of flagPage's text.
func flagTableCells(t *testing.T, page string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(page, "\n## Flags\n")
	if !ok {
		t.Fatalf(`%s has no "## Flags" section`, flagPage)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	var cells []string
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cell, _, _ := strings.Cut(line[1:], "|")
		cells = append(cells, cell)
	}
	if len(cells) == 0 {
		t.Fatalf(`%s's "## Flags" section has no table`, flagPage)
	}
	return cells
}

var longFlag = regexp.MustCompile(`--[a-z0-9][a-z0-9-]*`)

// TestDocsFlagTable checks that every option switchyard takes (but the
// hidden ones) has a row of the flag table naming it, with its short form
// if it has one, that the table names no option that does not exist, and
// that the README says where the table is.
func TestDocsFlagTable(t *testing.T) {
	root := repoRoot(t)
	if !slices.ContainsFunc(links("README.md", readFile(t, filepath.Join(root, "README.md"))), func(l link) bool { return l.target == flagLink }) {
		t.Errorf("README.md does not link the flag table, %s", flagLink)
	}
	cells := flagTableCells(t, readFile(t, filepath.Join(root, flagPage)))
	documented := map[string]string{} // --long -> its cell
	for _, c := range cells {
		for _, f := range longFlag.FindAllString(c, -1) {
			documented[f] = c
		}
	}
	for _, d := range optTable {
		if d.hidden {
			continue
		}
		cell, ok := documented["--"+d.long]
		if !ok {
			t.Errorf("--%s is not in %s's flag table", d.long, flagPage)
			continue
		}
		if d.short != 0 && !strings.Contains(cell, "-"+string(d.short)+",") {
			t.Errorf("%s's flag table has --%s without -%c", flagPage, d.long, d.short)
		}
	}
	for f := range documented {
		if d, ok := longOpts[strings.TrimPrefix(f, "--")]; !ok || d.hidden {
			t.Errorf("%s's flag table documents %s, which is not an option", flagPage, f)
		}
	}
}

// forbidden are pointers at material that is not in the repository: the
// project's private reference files. Written in pieces so that this file
// does not hold them.
var forbidden = []string{"../" + "shared", "shared/" + "specs", "NOTES" + ".md"}

// repoFiles lists the repository's files: git's list in a checkout, else
// every file under root but .git and build output.
func repoFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case ".git", "bin", "test-results":
				return filepath.SkipDir
			}
			return nil
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDocsNoOutsideReferences checks that no file of the repository points
// at reference material a user who clones it does not have.
func TestDocsNoOutsideReferences(t *testing.T) {
	root := repoRoot(t)
	files := repoFiles(t, root)
	if !slices.Contains(files, "README.md") {
		t.Fatalf("the file list (%d files) has no README.md", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in git's index
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range forbidden {
			if i := bytes.Index(b, []byte(s)); i >= 0 {
				line := 1 + bytes.Count(b[:i], []byte("\n"))
				t.Errorf("%s:%d mentions %q", f, line, s)
			}
		}
	}
}

var (
	fence      = regexp.MustCompile("(?m)^ {0,3}(```|~~~)")
	codeSpan   = regexp.MustCompile("`[^`]*`")
	mdLink     = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	mdHeading  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	hasScheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	docsPrefix = "docs/"
)

// prose is a Markdown file's text outside fenced code blocks, line for
// line (a block's lines are emptied, so line numbers stay).
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if fence.MatchString(l) {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

// anchors are the ids GitHub gives a Markdown file's headings: lower case,
// letters, digits, '-' and '_' kept, spaces made '-', everything else
// dropped; a repeated id gets -1, -2, ...
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(text) {
		m := mdHeading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[2]) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			id += "-" + strconv.Itoa(n)
		}
		seen[b.String()]++
		ids[id] = true
	}
	return ids
}

// link is one relative link of a Markdown file.
type link struct {
	line   int
	target string // as written
	path   string // the file it names, relative to the repository's root; the linking file for "#anchor"
	anchor string
}

// links returns the relative links of the Markdown file rel (relative to
// root), outside code blocks and code spans.
func links(rel, text string) []link {
	lines := prose(text)
	// Links may wrap across lines: scan the whole prose, code spans blanked.
	joined := codeSpan.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, s)
	})
	var out []link
	for _, m := range mdLink.FindAllStringSubmatchIndex(joined, -1) {
		target := joined[m[2]:m[3]]
		if hasScheme.MatchString(target) {
			continue // http:, https:, mailto:
		}
		p, anchor, _ := strings.Cut(target, "#")
		path := rel
		if p != "" {
			path = filepath.Clean(filepath.Join(filepath.Dir(rel), p))
		}
		out = append(out, link{line: 1 + strings.Count(joined[:m[0]], "\n"), target: target, path: path, anchor: anchor})
	}
	return out
}

// TestDocsLinks checks that the protocol pages exist and that the README
// links every page of docs/, and that every relative link of README.md and
// docs/*.md names a file that exists and, in a Markdown file, a heading
// that exists.
func TestDocsLinks(t *testing.T) {
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, p := range pages {
		rel, _ := filepath.Rel(root, p)
		files = append(files, filepath.ToSlash(rel))
	}
	for _, p := range protocolPages {
		if !slices.Contains(files, docsPrefix+p) {
			t.Errorf("docs/%s is missing", p)
		}
	}

	texts := map[string]string{}
	for _, f := range files {
		texts[f] = readFile(t, filepath.Join(root, f))
	}
	fromReadme := map[string]bool{}
	for _, f := range files {
		for _, l := range links(f, texts[f]) {
			if f == "README.md" {
				fromReadme[filepath.ToSlash(l.path)] = true
			}
			if strings.HasPrefix(l.path, "..") || filepath.IsAbs(l.path) {
				t.Errorf("%s:%d: %s points outside the repository", f, l.line, l.target)
				continue
			}
			if _, err := os.Stat(filepath.Join(root, l.path)); err != nil {
				t.Errorf("%s:%d: %s: no such file", f, l.line, l.target)
				continue
			}
			if l.anchor == "" || !strings.HasSuffix(l.path, ".md") {
				continue
			}
			text, ok := texts[filepath.ToSlash(l.path)]
			if !ok {
				text = readFile(t, filepath.Join(root, l.path))
			}
			if !anchors(text)[l.anchor] {
				t.Errorf("%s:%d: %s: %s has no heading #%s", f, l.line, l.target, l.path, l.anchor)
			}
		}
	}
	for _, f := range files[1:] {
		if !fromReadme[f] {
			t.Errorf("README.md does not link %s", f)
		}
	}
}

// TestDocsAnchors pins the heading ids the link check relies on: GitHub's.
func TestDocsAnchors(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"# Worker–Controller\n", []string{"workercontroller"}},
		{"## gearmand's HTTP protocol ##\n", []string{"gearmands-http-protocol"}},
		{"## Compatibility with gearmand 1.1.20\n", []string{"compatibility-with-gearmand-1120"}},
		{"### Differences from moevm/grpc_server\n", []string{"differences-from-moevmgrpc_server"}},
		{"## Limits, and `zmq4` on an open port\n", []string{"limits-and-zmq4-on-an-open-port"}},
		{"## Example\n## Example\n## Example\n", []string{"example", "example-1", "example-2"}},
		{"```\n# a comment in code\n```\n#not a heading\n", nil},
	} {
		got := anchors(tc.text)
		if len(got) != len(tc.want) {
			t.Errorf("%q: anchors %v, want %v", tc.text, got, tc.want)
		}
		for _, id := range tc.want {
			if !got[id] {
				t.Errorf("%q: no anchor %q in %v", tc.text, id, got)
			}
		}
	}
}

// TestDocsLinkExtraction pins which links the link check sees.
func TestDocsLinkExtraction(t *testing.T) {
	for _, tc := range []struct {
		file, text string
		want       []link
	}{
		{"README.md", "see [a page](docs/a.md#part) and [b](#flags)\n",
			[]link{{1, "docs/a.md#part", "docs/a.md", "part"}, {1, "#flags", "README.md", "flags"}}},
		{"docs/a.md", "x\n[the\nREADME](../README.md#durable-queue)\n",
			[]link{{2, "../README.md#durable-queue", "README.md", "durable-queue"}}},
		{"docs/a.md", "[dir](../docs/) [web](https://example.com/x.md) [mail](mailto:a@b)\n",
			[]link{{1, "../docs/", "docs", ""}}},
		{"README.md", "`[not](a.md)` and\n```\n[not](b.md)\n```\n", nil},
	} {
		got := links(tc.file, tc.text)
		if !slices.Equal(got, tc.want) {
			t.Errorf("links(%s, %q) = %+v, want %+v", tc.file, tc.text, got, tc.want)
		}
	}
}
