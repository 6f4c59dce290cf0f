// Package opstest reads switchyard's metrics endpoint in tests: a scrape
// parsed by Prometheus's own text parser, and one series' value. Both the
// ops package's tests and the end-to-end ones use it.
package opstest

import (
	"io"
	"net/http"
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families is a parsed scrape.
type Families map[string]*dto.MetricFamily

// Scrape GETs url and parses it with Prometheus's own text parser.
func Scrape(t testing.TB, url string) Families {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	// Prometheus's classic names: what every scraper takes.
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	return fams
}

// Value is the value of the series of family name whose labels are
// labels ("k=v" each, every one of the series' labels), and whether it is
// there. A histogram's value is its count.
func (f Families) Value(name string, labels ...string) (float64, bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	for _, m := range fam.Metric {
		var got []string
		for _, l := range m.Label {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(labels))
		if !slices.Equal(got, want) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// Get GETs url and returns its status and body, failing t if it cannot.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
