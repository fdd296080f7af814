package views

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// usagePage is a usage page of n days with three users (two drawn, the
// third only in the tables when n is small) and one model.
func usagePage(n int) UsagePage {
	p := UsagePage{Page: page(testAdmin), Range: n, DayChoices: []int{7, 30}, JSONURL: "/api/admin/usage?days=" + strconv.Itoa(n)}
	line := func(label string, perDay ...int64) UsageLine {
		l := UsageLine{Label: label, PerDay: make([]int64, n)}
		for i, v := range perDay {
			l.PerDay[i] = v
			l.Total += v
			l.Calls++
		}
		return l
	}
	for i := range n {
		p.Days = append(p.Days, time.Date(2026, 11, 28+i, 0, 0, 0, 0, time.UTC))
		p.PerDay = append(p.PerDay, UsageTotals{})
	}
	p.ByUser = []UsageLine{line("ann@example.com", 1200, 0, 30), line("bob@example.com", 800), line("<b>eve</b>")}
	p.ByModel = []UsageLine{line("Demo", 2000, 0, 30)}
	p.Total = line("Total", 2000, 0, 30)
	for i, v := range p.Total.PerDay {
		if v > 0 {
			p.PerDay[i] = UsageTotals{Total: v, Calls: 1}
		}
	}
	return p
}

// TestStackedChart checks the geometry: stacks sit on the axis and on each
// other, every bar part is titled with its figure, the y axis ends on a
// round value above the tallest day, and more series than colours fold
// into "others".
func TestStackedChart(t *testing.T) {
	p := usagePage(3)
	c := stackedChart("user", p.Days, p.ByUser)
	if len(c.Bars) != 3 {
		t.Fatalf("%d bar parts, want 3 (ann twice, bob once; zeros are not drawn)", len(c.Bars))
	}
	f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	base := float64(chartH - chartBottom)
	ann, bob := c.Bars[0], c.Bars[1]
	if f(ann.Y)+f(ann.H) != base || f(bob.Y)+f(bob.H) != f(ann.Y) || ann.X != bob.X {
		t.Errorf("day 1: ann %+v, bob %+v; want bob stacked on ann, ann on the axis", ann, bob)
	}
	if got, want := ann.Title, "Sat 28 Nov 2026 · ann@example.com: 1,200 tokens"; got != want {
		t.Errorf("title %q, want %q", got, want)
	}
	if top := c.YTicks[len(c.YTicks)-1]; top.Label != "2K" || f(top.At) != chartTop {
		t.Errorf("top tick %+v, want 2K at the plot's top", top)
	}
	if len(c.Legend) != 3 || c.Legend[2].Class != "chart-s2" {
		t.Errorf("legend %+v", c.Legend)
	}

	var many []UsageLine
	for i := range chartSeries + 3 {
		many = append(many, UsageLine{Label: fmt.Sprint("u", i), UsageTotals: UsageTotals{Total: 10}, PerDay: []int64{10, 0, 0}})
	}
	c = stackedChart("user", p.Days, many)
	if len(c.Legend) != chartSeries+1 || c.Legend[chartSeries].Label != "3 others" || c.Legend[chartSeries].Total != 30 {
		t.Errorf("legend of %d series: %+v", len(many), c.Legend)
	}
	if last := c.Bars[len(c.Bars)-1]; !strings.HasSuffix(last.Title, "3 others: 30 tokens") || f(last.Y) != chartTop {
		t.Errorf("the others' bar %+v, want 30 tokens topping the axis", last)
	}
}

func TestYScale(t *testing.T) {
	for _, tt := range []struct{ top, step, max int64 }{
		{1, 1, 1}, {7, 2, 8}, {10, 2, 10}, {1234, 500, 1500}, {2000, 500, 2000}, {98_765, 20_000, 100_000}, {3_000_001, 1_000_000, 4_000_000},
	} {
		if step, yMax := yScale(tt.top); step != tt.step || yMax != tt.max {
			t.Errorf("yScale(%d) = %d, %d; want %d, %d", tt.top, step, yMax, tt.step, tt.max)
		}
	}
	for n, want := range map[int64]string{0: "0", 500: "500", 1500: "1.5K", 20_000: "20K", 4_000_000: "4M", 2_500_000_000: "2.5B"} {
		if got := compactCount(n); got != want {
			t.Errorf("compactCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestAdminUsagePage: labels are text, the picker offers the ranges, the
// per-day table lists only days with calls, and an empty range says so
// instead of drawing empty charts.
func TestAdminUsagePage(t *testing.T) {
	doc := parse(t, render(t, AdminUsage(usagePage(3))))
	if n := len(elements(doc, byTag("b"))); n != 0 {
		t.Errorf("a label injected %d <b> elements", n)
	}
	if n := len(elements(doc, byTag("svg"))); n != 2 {
		t.Errorf("%d charts, want 2", n)
	}
	opts := elements(one(t, doc, "#usage-days", byID("usage-days")), byTag("option"))
	if len(opts) != 2 || attr(opts[1], "value") != "30" || text(opts[1]) != "Last 30 days" {
		t.Fatalf("range options: %d", len(opts))
	}
	rows := elements(one(t, doc, "#usage-by-day", byID("usage-by-day")), byTag("tr"))
	var got []string
	for _, r := range rows[1:] {
		var cells []string
		for _, td := range elements(r, byTag("td")) {
			cells = append(cells, text(td))
		}
		got = append(got, strings.Join(cells, "|"))
	}
	if want := "30 Nov 2026|1|0|0|30 28 Nov 2026|1|0|0|2,000"; strings.Join(got, " ") != want {
		t.Errorf("per-day rows %q, want %q", strings.Join(got, " "), want)
	}

	empty := usagePage(3)
	empty.ByUser, empty.ByModel, empty.Total = nil, nil, UsageLine{}
	doc = parse(t, render(t, AdminUsage(empty)))
	if n := len(elements(doc, byTag("svg"))); n != 0 {
		t.Errorf("%d charts for an empty range", n)
	}
	if !strings.Contains(text(doc), "No token usage in this range.") {
		t.Error("an empty range does not say so")
	}
}
