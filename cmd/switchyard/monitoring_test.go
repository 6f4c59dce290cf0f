package main

// docs/monitoring's Grafana dashboard and Prometheus alert rules are
// checked against what a real server serves: every metric they name is a
// family it serves, every label they match, group or join on is one of
// those families' (or a target label Prometheus adds), and each query is
// well formed as far as a small parser of our own can tell (balanced
// brackets and quotes, valid durations, a known template variable). The
// rules file is read by a parser of the YAML subset it is written in,
// which also checks each rule's shape.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// servedFamilies scrapes a server with a job store and a function, and
// the leader of a cluster of two that has committed a submit, and returns
// each family's label names (plus le for a histogram's buckets).
func servedFamilies(t *testing.T) map[string][]string {
	t.Helper()
	srv, maddr := startMetrics(t)
	dialGear(t, srv.addr, "client").submit(pSubmitJobBg, "monitored", "", "x")
	c := startCluster(t, 2)
	leader := c.leader()
	dialGear(t, leader.addr("gearman"), "client").submit(pSubmitJobBg, "monitored", "", "x")
	out := map[string][]string{}
	fams := scrape(t, maddr)
	for name, fam := range scrape(t, leader.addr("metrics")) {
		if _, ok := fams[name]; !ok {
			fams[name] = fam
		}
	}
	for name, fam := range fams {
		var labels []string
		for _, m := range fam.Metric {
			for _, l := range m.Label {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		if fam.GetType().String() == "HISTOGRAM" {
			out[name+"_count"], out[name+"_sum"] = labels, labels
			out[name+"_bucket"] = append(slices.Clone(labels), "le")
		}
		out[name] = labels
	}
	return out
}

var (
	promIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*$`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promRange    = regexp.MustCompile(`\[([^\]]*)\]`)
)

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"instance", "job"}

// checkPromQL checks expr against the families served: it returns what
// is wrong, or nil.
func checkPromQL(expr string, fams map[string][]string) []string {
	var bad []string
	// Grafana's variables, as Grafana substitutes them.
	expr = strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*").Replace(expr)
	if strings.Contains(expr, "$") {
		bad = append(bad, "an unknown template variable")
	}
	// Brackets balance, outside strings.
	bare := promString.ReplaceAllString(expr, `""`)
	if strings.Count(bare, `"`)%2 != 0 {
		bad = append(bad, "an unterminated string")
	}
	var stack []rune
	for _, r := range bare {
		switch r {
		case '(', '[', '{':
			stack = append(stack, r)
		case ')', ']', '}':
			open := map[rune]rune{')': '(', ']': '[', '}': '{'}[r]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return append(bad, "unbalanced "+string(r))
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		return append(bad, "unclosed "+string(stack))
	}
	for _, m := range promRange.FindAllStringSubmatch(bare, -1) {
		if _, err := model.ParseDuration(m[1]); err != nil {
			bad = append(bad, fmt.Sprintf("range [%s]: %v", m[1], err))
		}
	}
	// The metrics named, and the labels they have between them.
	known := slices.Clone(targetLabels)
	var metrics []string
	for _, id := range promIdent.FindAllString(promMatchers.ReplaceAllString(bare, "{}"), -1) {
		if !strings.HasPrefix(id, "switchyard_") && !strings.HasPrefix(id, "gearman_") {
			continue
		}
		labels, ok := fams[id]
		if !ok {
			bad = append(bad, "no family "+id+" is served")
			continue
		}
		metrics = append(metrics, id)
		known = append(known, labels...)
	}
	if len(metrics) == 0 {
		bad = append(bad, "names no switchyard metric")
	}
	use := func(label string) {
		if label != "" && !slices.Contains(known, label) {
			bad = append(bad, fmt.Sprintf("label %q is on none of %v", label, metrics))
		}
	}
	for _, m := range promMatchers.FindAllStringSubmatch(bare, -1) {
		for _, part := range strings.Split(m[1], ",") {
			if strings.TrimSpace(part) == "" {
				continue
			}
			// "name=~\"\"": the string emptied above; what is left is the name and operator.
			name, _, _ := strings.Cut(part, `"`)
			mm := promMatcher.FindStringSubmatch(name)
			if mm == nil {
				bad = append(bad, "matcher "+part)
				continue
			}
			use(mm[1])
		}
	}
	for _, m := range promGrouping.FindAllStringSubmatch(bare, -1) {
		for _, l := range strings.Split(m[1], ",") {
			use(strings.TrimSpace(l))
		}
	}
	return bad
}

// alertRule is one rule of the alerts file.
type alertRule struct {
	line                      int
	alert, expr, for_         string
	labels, annotations       map[string]string
	sawLabels, sawAnnotations bool
	group                     string
	unknownKeys               []string
}

// parseRules reads a Prometheus rules file written in the YAML subset
// docs/monitoring/alerts.yml uses: groups, each with a name and rules,
// each rule's keys one a line (expr on one line), labels and annotations
// as maps of one-line strings.
func parseRules(text string) ([]alertRule, error) {
	var rules []alertRule
	var cur *alertRule
	group, section := "", ""
	unquote := func(v string) (string, error) {
		v = strings.TrimSpace(v)
		if strings.HasPrefix(v, `"`) {
			var s string
			if err := json.Unmarshal([]byte(v), &s); err != nil {
				return "", fmt.Errorf("string %s: %v", v, err)
			}
			return s, nil
		}
		return v, nil
	}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if strings.Contains(line, "\t") {
			return nil, fmt.Errorf("line %d: a tab", n)
		}
		key, value, ok := strings.Cut(strings.TrimPrefix(trimmed, "- "), ":")
		if !ok {
			return nil, fmt.Errorf("line %d: no key: %q", n, line)
		}
		value = strings.TrimSpace(value)
		switch {
		case indent == 0 && trimmed == "groups:":
		case indent == 2 && strings.HasPrefix(trimmed, "- name:"):
			group = value
		case indent == 4 && trimmed == "rules:":
		case indent == 6 && strings.HasPrefix(trimmed, "- alert:"):
			rules = append(rules, alertRule{line: n, alert: value, group: group,
				labels: map[string]string{}, annotations: map[string]string{}})
			cur = &rules[len(rules)-1]
			section = ""
		case indent == 8 && cur != nil:
			section = ""
			switch key {
			case "expr":
				cur.expr = value
			case "for":
				cur.for_ = value
			case "labels":
				section, cur.sawLabels = key, true
			case "annotations":
				section, cur.sawAnnotations = key, true
			default:
				cur.unknownKeys = append(cur.unknownKeys, key)
			}
		case indent == 10 && cur != nil && section != "":
			v, err := unquote(value)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", n, err)
			}
			if section == "labels" {
				cur.labels[key] = v
			} else {
				cur.annotations[key] = v
			}
		default:
			return nil, fmt.Errorf("line %d: not in the rules file's shape: %q", n, line)
		}
	}
	return rules, nil
}

func TestMonitoringFiles(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand has no metrics")
	}
	dir := filepath.Join(repoRoot(t), "docs", "monitoring")
	fams := servedFamilies(t)

	t.Run("alerts", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "alerts.yml"))
		if err != nil {
			t.Fatal(err)
		}
		rules, err := parseRules(string(b))
		if err != nil {
			t.Fatal(err)
		}
		// What the issue asks to be alerted on, at least.
		for _, must := range []string{"switchyard_function_workers", "switchyard_function_oldest_job_age_seconds", "switchyard_store_up"} {
			if !slices.ContainsFunc(rules, func(r alertRule) bool { return strings.Contains(r.expr, must) }) {
				t.Errorf("no rule on %s", must)
			}
		}
		seen := map[string]bool{}
		varRE := regexp.MustCompile(`\{\{\s*\$(labels\.([a-z_]+)|value)\s*\}\}`)
		for _, r := range rules {
			where := fmt.Sprintf("alerts.yml:%d %s", r.line, r.alert)
			if !regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`).MatchString(r.alert) || seen[r.alert] {
				t.Errorf("%s: not a unique CamelCase alert name", where)
			}
			seen[r.alert] = true
			if r.group == "" || len(r.unknownKeys) > 0 {
				t.Errorf("%s: group %q, unknown keys %v", where, r.group, r.unknownKeys)
			}
			for _, p := range checkPromQL(r.expr, fams) {
				t.Errorf("%s: expr %q: %s", where, r.expr, p)
			}
			if r.for_ != "" {
				if d, err := model.ParseDuration(r.for_); err != nil || time.Duration(d) <= 0 {
					t.Errorf("%s: for %q: %v", where, r.for_, err)
				}
			}
			if s := r.labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
				t.Errorf("%s: severity %q", where, s)
			}
			if r.annotations["summary"] == "" || r.annotations["description"] == "" {
				t.Errorf("%s: a summary and a description are wanted", where)
			}
			// A template's $labels.X must be a label the alert's series
			// carry: one of its metrics' or a target label.
			for _, text := range r.annotations {
				for _, m := range varRE.FindAllStringSubmatch(text, -1) {
					if m[2] == "" {
						continue
					}
					if !strings.Contains(r.expr, m[2]) && !slices.Contains(targetLabels, m[2]) {
						t.Errorf("%s: annotation uses $labels.%s, which its expr does not keep", where, m[2])
					}
				}
				if strings.Count(text, "{{") != strings.Count(text, "}}") {
					t.Errorf("%s: unbalanced template in %q", where, text)
				}
			}
		}
		if len(rules) < 3 {
			t.Fatalf("%d rules", len(rules))
		}
	})

	t.Run("dashboard", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(dir, "grafana-dashboard.json"))
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Title  string `json:"title"`
			UID    string `json:"uid"`
			Inputs []struct {
				Name string `json:"name"`
			} `json:"__inputs"`
			Panels []struct {
				ID      int    `json:"id"`
				Title   string `json:"title"`
				Type    string `json:"type"`
				GridPos struct {
					X, Y, W, H int
				} `json:"gridPos"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
				Targets []struct {
					RefID string `json:"refId"`
					Expr  string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		if d.Title == "" || d.UID == "" || len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" {
			t.Errorf("title %q, uid %q, inputs %v", d.Title, d.UID, d.Inputs)
		}
		ids := map[int]bool{}
		var cells [][4]int
		named := map[string]bool{}
		for _, p := range d.Panels {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if ids[p.ID] || p.Title == "" || p.Type == "" || len(p.Targets) == 0 || p.Datasource.UID != "${DS_PROMETHEUS}" {
				t.Errorf("%s: a unique id, a title, a type, the input datasource and targets are wanted", where)
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: gridPos %+v", where, g)
			}
			for _, c := range cells {
				if g.X < c[0]+c[2] && c[0] < g.X+g.W && g.Y < c[1]+c[3] && c[1] < g.Y+g.H {
					t.Errorf("%s overlaps another panel", where)
				}
			}
			cells = append(cells, [4]int{g.X, g.Y, g.W, g.H})
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: refId %q", where, tg.RefID)
				}
				refs[tg.RefID] = true
				for _, pr := range checkPromQL(tg.Expr, fams) {
					t.Errorf("%s: %q: %s", where, tg.Expr, pr)
				}
				for _, id := range promIdent.FindAllString(tg.Expr, -1) {
					named[strings.TrimSuffix(strings.TrimSuffix(id, "_bucket"), "_count")] = true
				}
			}
		}
		// The on-call questions: stuck queues, oldest job, store health.
		for _, must := range []string{"switchyard_function_oldest_job_age_seconds", "switchyard_function_workers",
			"switchyard_store_up", "switchyard_job_queue_wait_seconds", "switchyard_submits_refused_total"} {
			if !named[must] {
				t.Errorf("the dashboard shows no %s", must)
			}
		}
	})

	// The checker itself finds what it should.
	for expr, want := range map[string]string{
		`switchyard_nothing > 0`:                          "no family switchyard_nothing",
		`sum by (colour) (switchyard_function_queued)`:    `label "colour"`,
		`rate(switchyard_jobs_submitted_total[5x])`:       "range [5x]",
		`sum(rate(switchyard_jobs_submitted_total[5m])`:   "unclosed",
		`switchyard_store_up{instance=~"$nope"}`:          "template variable",
		`switchyard_function_queued{priority="high"} > 0`: "",
		`up == 0`: "names no switchyard metric",
	} {
		got := strings.Join(checkPromQL(expr, fams), "; ")
		if want == "" && got != "" || want != "" && !strings.Contains(got, want) {
			t.Errorf("checkPromQL(%q) = %q, want %q", expr, got, want)
		}
	}
}
