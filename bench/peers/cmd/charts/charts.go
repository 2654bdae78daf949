package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	oursColor   = color.RGBA{R: 31, G: 119, B: 180, A: 255} // blue
	theirsColor = color.RGBA{R: 214, G: 39, B: 40, A: 255}  // red
	ttlColor    = color.RGBA{R: 90, G: 90, B: 90, A: 255}
)

// ---- cycle.png ----

// cycleChart draws the cost of one Start/Stop cycle after N cycles, from
// BenchmarkOldDesignCycle/after=N and BenchmarkCycle/after=N (ns/op).
func cycleChart(r results, out string) error {
	p := plot.New()
	p.Title.Text = "Cost of one Start/Stop cycle of a decorated job after N cycles (log–log)"
	p.X.Label.Text = "cycles the job has already been through"
	p.Y.Label.Text = "time per Start/Stop cycle"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = decadeTicks(func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) })
	p.Y.Tick.Marker = decadeTicks(func(ns float64) string { return formatTick(ns / 1e6) })
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())

	var missing []string
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range []struct {
		label, bench string
		c            color.Color
		shape        draw.GlyphDrawer
		xalign       text.XAlignment // value labels: left of the point (the old design's rising line) or right
		offset       vg.Point
	}{
		{"old design: BenchmarkOldDesignCycle (one more layer per cycle)", "BenchmarkOldDesignCycle", theirsColor, draw.SquareGlyph{},
			draw.XRight, vg.Point{X: vg.Points(-6), Y: vg.Points(4)}},
		{"leaderaware: BenchmarkCycle (an immutable chain)", "BenchmarkCycle", oursColor, draw.CircleGlyph{},
			draw.XLeft, vg.Point{X: vg.Points(6), Y: vg.Points(6)}},
	} {
		var xys plotter.XYs
		var labels []string
		for _, after := range []int{10, 100, 1000, 10000} {
			name := fmt.Sprintf("%s/after=%d", s.bench, after)
			ns, ok := r.value(name, "ns/op")
			if !ok {
				continue // each benchmark runs some of these
			}
			xys = append(xys, plotter.XY{X: float64(after), Y: ns})
			labels = append(labels, formatDuration(ns/1e6))
			lo, hi = min(lo, ns), max(hi, ns)
		}
		if len(xys) == 0 {
			missing = append(missing, s.bench+"/after=N")
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, line.Width = s.c, vg.Points(2)
		points.Color, points.Shape, points.Radius = s.c, s.shape, vg.Points(4)
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return err
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Color = s.c
			l.TextStyle[i].Font.Size = vg.Points(11)
			l.TextStyle[i].XAlign = s.xalign
		}
		l.Offset = s.offset
		p.Add(line, points, l)
		p.Legend.Add(s.label, line, points)
	}
	warnMissing(out, missing)
	if math.IsInf(lo, 1) {
		return fmt.Errorf("%s: no BenchmarkCycle or BenchmarkOldDesignCycle lines in the input", out)
	}
	p.X.Min, p.X.Max = 2, 40000
	p.Y.Min, p.Y.Max = lo/4, hi*8
	return save(p, 9*vg.Inch, 5.5*vg.Inch, out)
}

// ---- failover.png ----

// row is one line of a failover panel: the median (a dot) and, if the
// benchmark reports it, the largest sample (the end of a line from the dot).
type row struct {
	label, bench, median, max string
	theirs                    bool // client-go
}

// panel is one TTL's rows.
type panel struct {
	title string
	ttl   float64 // ms
	rows  []row
}

func failoverPanels() []panel {
	peers := func(bench, ttl, impl string) string { return fmt.Sprintf("%s/ttl=%s/impl=%s", bench, ttl, impl) }
	crash := func(ttl string) []row {
		return []row{
			{"crash: leaderaware, memory store", peers("BenchmarkCrashFailover", ttl, "leaderaware"), "ms/failover", "max-ms/failover", false},
			{"crash: client-go, fake clientset", peers("BenchmarkCrashFailover", ttl, "client-go"), "ms/failover", "max-ms/failover", true},
		}
	}
	frozen := func(ttl string) []row {
		return []row{
			{"frozen leader: leaderaware, memory store", peers("BenchmarkFrozenLeader", ttl, "leaderaware"), "ms/takeover", "max-ms/takeover", false},
			{"frozen leader: client-go, fake clientset", peers("BenchmarkFrozenLeader", ttl, "client-go"), "ms/takeover", "max-ms/takeover", true},
		}
	}
	graceful := func(ttl string) []row {
		return []row{
			{"graceful: leaderaware, memory store", peers("BenchmarkHandoff", ttl, "leaderaware"), "ms/handoff", "max-ms/handoff", false},
			{"graceful: leaderaware, memory, polling only", peers("BenchmarkHandoff", ttl, "leaderaware-polling"), "ms/handoff", "max-ms/handoff", false},
			{"graceful: client-go, fake clientset", peers("BenchmarkHandoff", ttl, "client-go"), "ms/handoff", "max-ms/handoff", true},
		}
	}
	sqliteKill := row{"crash: leaderaware, SQLite, SIGKILL", "BenchmarkSQLiteCrashFailover/kill", "ms/failover", "max-ms/failover", false}
	sqliteTerm := row{"graceful: leaderaware, SQLite, SIGTERM", "BenchmarkSQLiteCrashFailover/term", "ms/handoff", "max-ms/handoff", false}
	return []panel{
		{
			"TTL 15 s (both libraries' default: leaderaware renews every 5 s, client-go every 2 s; both retry every 2 s)", 15000,
			slices.Concat([]row{sqliteKill}, crash("15s"), frozen("15s"), []row{sqliteTerm}, graceful("15s")),
		},
		{
			"TTL 2 s (renew and retry every 0.5 s; client-go RenewDeadline 1 s)", 2000,
			slices.Concat(crash("2s"), frozen("2s"), graceful("2s")),
		},
		{
			"TTL 1.5 s (renew and retry every 0.5 s; client-go stores the lease as 1 s)", 1500,
			slices.Concat([]row{
				{"crash: leaderaware, SQLite (median only)", "BenchmarkFailover/sqlite/crash", "ms/after-crash", "", false},
				{"crash: leaderaware, PostgreSQL (median only)", "BenchmarkFailover/pg/crash", "ms/after-crash", "", false},
			}, crash("1.5s"), []row{
				{"graceful: leaderaware, SQLite", "BenchmarkFailover/sqlite/handoff", "ms/handoff", "max-ms/handoff", false},
				{"graceful: leaderaware, PostgreSQL", "BenchmarkFailover/pg/handoff", "ms/handoff", "max-ms/handoff", false},
			}),
		},
	}
}

// The failover panels share one log x axis, in ms.
const (
	failoverXMin = 0.02    // 20 µs
	failoverXMax = 300_000 // 300 s: room for the value labels
)

// failoverChart draws one panel per TTL: for each row, the median as a dot,
// a line from it to the largest sample, the values as text, and the TTL as
// a dashed line.
func failoverChart(r results, out string) error {
	var plots [][]*plot.Plot
	var missing []string
	rows := 0
	for _, pn := range failoverPanels() {
		p, n, miss, err := failoverPanel(r, pn)
		if err != nil {
			return err
		}
		missing = append(missing, miss...)
		if p != nil {
			plots = append(plots, []*plot.Plot{p})
			rows = max(rows, n)
		}
	}
	warnMissing(out, missing)
	if len(plots) == 0 {
		return fmt.Errorf("%s: none of the failover benchmarks is in the input", out)
	}
	// Tiles are of equal height: each fits the largest panel. The legend
	// gets a strip of its own at the top.
	const header = 0.45 * vg.Inch
	h := header + vg.Length(len(plots))*(vg.Length(rows)*0.3*vg.Inch+1.2*vg.Inch)
	img := vgimg.NewWith(vgimg.UseWH(12*vg.Inch, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	legend := failoverLegend()
	legend.Draw(draw.Crop(dc, 0, 0, h-header, 0))
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6),
		PadLeft: vg.Points(6), PadRight: vg.Points(10), PadY: vg.Points(18)}
	for i, c := range plot.Align(plots, tiles, draw.Crop(dc, 0, 0, 0, -header)) {
		plots[i][0].Draw(c[0])
	}
	return writePNG(img, out)
}

// failoverPanel returns the plot of one panel and its number of rows, or a
// nil plot if none of its benchmarks is in r, and the benchmarks it did not
// find.
func failoverPanel(r results, pn panel) (*plot.Plot, int, []string, error) {
	type point struct {
		label        string
		median, max  float64
		hasMax, them bool
	}
	var pts []point
	var missing []string
	for _, rw := range pn.rows {
		med, ok := r.value(rw.bench, rw.median)
		if !ok {
			missing = append(missing, rw.bench+" "+rw.median)
			continue
		}
		pt := point{label: rw.label, median: med, them: rw.theirs}
		if rw.max != "" {
			pt.max, pt.hasMax = r.value(rw.bench, rw.max)
		}
		pts = append(pts, pt)
	}
	if len(pts) == 0 {
		return nil, 0, missing, nil
	}
	p := plot.New()
	p.Title.Text = pn.title
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.X.Label.Text = "time from the crash, freeze or step-down until the new leader's job runs (log)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = decadeTicks(formatTick)
	p.X.Min, p.X.Max = failoverXMin, failoverXMax
	p.Add(plotter.NewGrid())

	n := len(pts)
	labels := make([]string, n)
	for i, pt := range pts {
		y := float64(n - 1 - i) // first row on top
		labels[n-1-i] = pt.label
		c := oursColor
		if pt.them {
			c = theirsColor
		}
		x := max(pt.median, failoverXMin)
		text := formatDuration(pt.median)
		if pt.hasMax {
			bars, err := plotter.NewXErrorBars(errPoint{x: x, y: y, high: max(pt.max, failoverXMin) - x})
			if err != nil {
				return nil, 0, nil, err
			}
			bars.Color, bars.Width, bars.CapWidth = c, vg.Points(2), vg.Points(8)
			p.Add(bars)
			text += ", max " + formatDuration(pt.max)
		}
		dot, err := plotter.NewScatter(plotter.XYs{{X: x, Y: y}})
		if err != nil {
			return nil, 0, nil, err
		}
		dot.Color, dot.Shape, dot.Radius = c, draw.CircleGlyph{}, vg.Points(5)
		p.Add(dot)
		lx := max(x, pt.max) * 1.6
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: lx, Y: y}}, Labels: []string{text}})
		if err != nil {
			return nil, 0, nil, err
		}
		l.TextStyle[0].Color = c
		l.TextStyle[0].Font.Size = vg.Points(10)
		l.TextStyle[0].YAlign = draw.YCenter
		p.Add(l)
	}
	p.NominalY(labels...)
	p.Y.Min, p.Y.Max = -1, float64(n)-0.4

	ttl, err := plotter.NewLine(plotter.XYs{{X: pn.ttl, Y: p.Y.Min}, {X: pn.ttl, Y: p.Y.Max}})
	if err != nil {
		return nil, 0, nil, err
	}
	ttl.Color, ttl.Width, ttl.Dashes = ttlColor, vg.Points(1.5), []vg.Length{vg.Points(6), vg.Points(4)}
	tl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: pn.ttl, Y: -0.7}}, Labels: []string{"TTL " + formatTick(pn.ttl)}})
	if err != nil {
		return nil, 0, nil, err
	}
	tl.TextStyle[0].Color = ttlColor
	tl.TextStyle[0].Font.Size = vg.Points(10)
	tl.TextStyle[0].XAlign = draw.XRight
	tl.Offset = vg.Point{X: vg.Points(-4)}
	p.Add(ttl, tl)
	return p, n, missing, nil
}

// failoverLegend explains the colours, the lines and the TTL.
func failoverLegend() plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.XOffs = 2.4 * vg.Inch
	for _, e := range []struct {
		label string
		c     color.Color
	}{{"leaderaware", oursColor}, {"client-go leaderelection v0.37.2", theirsColor}} {
		s, _ := plotter.NewScatter(plotter.XYs{{}})
		s.Color, s.Shape, s.Radius = e.c, draw.CircleGlyph{}, vg.Points(5)
		line, _ := plotter.NewLine(plotter.XYs{{}, {}})
		line.Color, line.Width = e.c, vg.Points(2)
		l.Add(e.label+": median (dot), line to the max", line, s)
	}
	ttl, _ := plotter.NewLine(plotter.XYs{{}, {}})
	ttl.Color, ttl.Width, ttl.Dashes = ttlColor, vg.Points(1.5), []vg.Length{vg.Points(6), vg.Points(4)}
	l.Add("TTL", ttl)
	return l
}

// errPoint is one point with an error reaching high to its right, for
// plotter.NewXErrorBars.
type errPoint struct{ x, y, high float64 }

func (e errPoint) Len() int                       { return 1 }
func (e errPoint) XY(int) (float64, float64)      { return e.x, e.y }
func (e errPoint) XError(int) (low, high float64) { return 0, e.high }

// ---- shared ----

// decadeTicks returns a log-axis ticker with a labelled major tick at every
// power of ten and unlabelled minor ticks between.
func decadeTicks(format func(float64) string) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ticks []plot.Tick
		for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
			base := math.Pow(10, e)
			for m := 1.0; m < 10; m++ {
				v := m * base
				if v < lo || v > hi {
					continue
				}
				t := plot.Tick{Value: v}
				if m == 1 {
					t.Label = format(v)
				}
				ticks = append(ticks, t)
			}
		}
		return ticks
	})
}

// formatDuration formats a duration in ms with three significant digits.
func formatDuration(ms float64) string {
	switch {
	case ms >= 1000:
		return digits3(ms/1000) + " s"
	case ms >= 1:
		return digits3(ms) + " ms"
	default:
		return digits3(ms*1000) + " µs"
	}
}

// formatTick formats a duration in ms as briefly as possible.
func formatTick(ms float64) string {
	switch {
	case ms >= 1000:
		return strconv.FormatFloat(ms/1000, 'f', -1, 64) + " s"
	case ms >= 1:
		return strconv.FormatFloat(ms, 'f', -1, 64) + " ms"
	default:
		return strconv.FormatFloat(ms*1000, 'f', -1, 64) + " µs"
	}
}

func digits3(v float64) string {
	switch {
	case v >= 99.95:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 9.995:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func save(p *plot.Plot, w, h vg.Length, out string) error {
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	p.Draw(draw.New(img))
	return writePNG(img, out)
}

func writePNG(img *vgimg.Canvas, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(fmt.Errorf("write %s", out), err)
	}
	fmt.Fprintf(os.Stderr, "charts: wrote %s\n", out)
	return nil
}
