package views

import (
	"math"
	"strconv"
	"time"
)

// UsagePage is the admin's accounting: the usage ledger's token totals per
// UTC day, per user and per model, whatever the token-usage switch says.
type UsagePage struct {
	Page
	Days []time.Time // every day of the range, oldest first
	// DayChoices are the ranges the picker offers; Range is the one shown.
	DayChoices []int
	Range      int
	// TokenUsageEnabled is the chat views' switch, which this page ignores.
	TokenUsageEnabled bool
	Total             UsageLine
	ByUser            []UsageLine // most tokens first
	ByModel           []UsageLine // most tokens first
	PerDay            []UsageTotals
	JSONURL           string
	Budgets           BudgetsView
	// Priced: some model has a price, so the tables show cost.
	Priced bool
}

// UsageLine is a user's or a model's totals over the range and per day.
type UsageLine struct {
	Label string // the email or the model's display name
	Title string // the tooltip: a model's raw name; a user's id
	UsageTotals
	CacheRead int64
	PerDay    []int64 // total tokens, aligned with UsagePage.Days
	// Cost is what its tokens cost at the models' prices ("1.24 USD");
	// "" when none of its models has a price.
	Cost string
}

// chartSeries is how many series a chart draws in colour: the largest
// ones, then one more that sums the rest.
const chartSeries = 7

// Chart geometry, in the SVG's own units (its viewBox); it scales to the
// column's width.
const (
	chartW      = 720
	chartH      = 260
	chartLeft   = 64 // room for the y axis's labels
	chartRight  = 8
	chartTop    = 24 // room for the unit above the axis
	chartBottom = 36 // room for the x axis's labels
	chartXTicks = 8  // at most this many day labels
)

// chart is a stacked bar chart laid out for the template.
type chart struct {
	Label  string // what the chart shows, for screen readers
	Bars   []chartBar
	YTicks []chartTick
	XTicks []chartTick
	Legend []chartKey
	Empty  bool
}

// chartBar is one series' part of one day's bar.
type chartBar struct {
	X, Y, W, H string
	Class      string
	Title      string
}

// chartTick is an axis label and its position on its axis.
type chartTick struct {
	At    string
	Label string
}

// chartKey is a legend entry.
type chartKey struct {
	Class string
	Label string
	Total int64
}

const (
	plotW = chartW - chartLeft - chartRight
	plotH = chartH - chartTop - chartBottom
)

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// stackedChart lays out lines as bars of total tokens per day, stacked in
// the order given; lines past chartSeries are summed into "Others".
func stackedChart(what string, days []time.Time, lines []UsageLine) chart {
	c := chart{Label: "Tokens per day by " + what}
	series := lines
	if len(lines) > chartSeries+1 {
		series = append(append([]UsageLine(nil), lines[:chartSeries]...), others(lines[chartSeries:], len(days)))
	}
	var top int64
	for d := range days {
		var sum int64
		for _, l := range series {
			sum += l.PerDay[d]
		}
		top = max(top, sum)
	}
	c.Empty = top == 0
	step, yMax := yScale(top)
	for v := int64(0); v <= yMax; v += step {
		c.YTicks = append(c.YTicks, chartTick{At: num(yPos(v, yMax)), Label: compactCount(v)})
	}
	slot := float64(plotW) / float64(max(len(days), 1))
	width := max(slot*0.7, 1)
	every := (len(days) + chartXTicks - 1) / chartXTicks
	for d, day := range days {
		x := chartLeft + slot*float64(d) + (slot-width)/2
		if d%max(every, 1) == 0 {
			c.XTicks = append(c.XTicks, chartTick{At: num(x + width/2), Label: day.Format("2 Jan")})
		}
		var below int64
		for i, l := range series {
			v := l.PerDay[d]
			if v == 0 {
				continue
			}
			y0, y1 := yPos(below, yMax), yPos(below+v, yMax)
			below += v
			c.Bars = append(c.Bars, chartBar{
				X: num(x), Y: num(y1), W: num(width), H: num(y0 - y1),
				Class: seriesClass(i), Title: day.Format("Mon 2 Jan 2006") + " · " + l.Label + ": " + groupThousands(v) + " tokens",
			})
		}
	}
	for i, l := range series {
		c.Legend = append(c.Legend, chartKey{Class: seriesClass(i), Label: l.Label, Total: l.Total})
	}
	return c
}

// others sums lines into one series.
func others(lines []UsageLine, days int) UsageLine {
	o := UsageLine{Label: strconv.Itoa(len(lines)) + " others", PerDay: make([]int64, days)}
	for _, l := range lines {
		o.Total += l.Total
		for d, v := range l.PerDay {
			o.PerDay[d] += v
		}
	}
	return o
}

func seriesClass(i int) string { return "chart-s" + strconv.Itoa(i) }

// yPos is the SVG y of value v on an axis from 0 to yMax.
func yPos(v, yMax int64) float64 {
	return chartTop + plotH*(1-float64(v)/float64(yMax))
}

// yScale picks a round tick step (1, 2 or 5 times a power of ten) that
// splits top into at most five steps, and the axis's top, a multiple of it.
func yScale(top int64) (step, yMax int64) {
	if top <= 0 {
		return 1, 1
	}
	raw := float64(top) / 5
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step = int64(pow)
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			step = int64(m * pow)
			break
		}
	}
	step = max(step, 1)
	return step, (top + step - 1) / step * step
}

// compactCount writes an axis label: 950, 12K, 1.5M.
func compactCount(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return trimZero(float64(n)/1e3) + "K"
	case n < 1_000_000_000:
		return trimZero(float64(n)/1e6) + "M"
	}
	return trimZero(float64(n)/1e9) + "B"
}

func trimZero(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// humanDay names a UTC day: 3 Nov 2026.
func humanDay(t time.Time) string { return t.Format("2 Jan 2006") }

// BudgetsView is the usage page's budgets: the form that sets them and
// each user's spend of the current period against theirs.
type BudgetsView struct {
	DefaultTokens string // "" or "0": no default budget
	DefaultPeriod string
	Rows          []BudgetRow
}

// BudgetRow is one user's budget: their own (Own) or the default's, and
// what the ledger holds for its current period.
type BudgetRow struct {
	UserID, Email string
	Own           bool   // the user has a budget of their own
	Tokens        string // their own, as the form shows it; "" with none
	Period        string // their own, or the default's
	Limit, Used   int64  // Limit 0: no budget applies
	ResetsAt      time.Time
}

// BudgetPeriods are the periods a budget may have.
var BudgetPeriods = []string{"day", "week", "month"}

// costText is a cost as the tables show it: "—" without a price.
func costText(c string) string {
	if c == "" {
		return "—"
	}
	return c
}
