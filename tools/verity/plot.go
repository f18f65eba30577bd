package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // png
	_ "gonum.org/v1/plot/vg/vgsvg" // svg

	"verity/bench"
	"verity/host/atomicfile"
)

// plotHelp describes a --plot flag.
const plotHelp = "also draw the results as a chart in this file (.svg or .png)"

// plotFormat is the chart format of a --plot file, from its extension.
func plotFormat(path string) (string, error) {
	switch ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), ".")); ext {
	case "svg", "png":
		return ext, nil
	default:
		return "", fmt.Errorf("--plot %s: want a .svg or .png file", path)
	}
}

// savePlots lays plots out in a grid of rows (a row's empty cells left blank) and writes
// them to path, whole or not at all. Each cell is cellW × cellH.
func savePlots(path string, grid [][]*plot.Plot, cellW, cellH vg.Length) error {
	format, err := plotFormat(path)
	if err != nil {
		return err
	}
	cols := 0
	for _, row := range grid {
		cols = max(cols, len(row))
	}
	for i := range grid {
		for len(grid[i]) < cols {
			grid[i] = append(grid[i], nil)
		}
	}
	w, h := cellW*vg.Length(cols), cellH*vg.Length(len(grid))
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	if format == "png" { // an opaque background: viewers draw a transparent one black or checked
		dc.SetColor(color.White)
		dc.Fill(dc.Rectangle.Path())
	}
	tiles := draw.Tiles{Rows: len(grid), Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, tiles, dc)
	for i, row := range grid {
		for j, p := range row {
			if p != nil {
				legendInData(p, canvases[i][j])
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := c.WriteTo(f); err != nil {
		return err
	}
	return f.Commit()
}

// legendInData moves p's legend into its data area, a little in from the axes: gonum/plot
// places it in the area beside the axes, whose top the data area does not reach when the
// axis label needs room (on a log axis it reserves room for the label as if centred at the
// arithmetic mean of the range, high on the axis), so a legend at the top overlapped the
// axis's end and the title.
func legendInData(p *plot.Plot, c draw.Canvas) {
	inset := vg.Millimeter * 1.5
	top := c.Max.Y
	if p.Title.Text != "" {
		top -= p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
	}
	d := p.DataCanvas(c)
	if p.Legend.Top {
		p.Legend.YOffs = -(top - d.Max.Y) - inset
	} else {
		p.Legend.YOffs = inset
	}
	if p.Legend.Left {
		p.Legend.XOffs = inset
	} else {
		p.Legend.XOffs = -(c.Max.X - d.Max.X) - inset
	}
}

// palette are the series' colours (Okabe and Ito's, told apart by colour-blind readers).
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{213, 94, 0, 255}, color.RGBA{0, 158, 115, 255}, color.RGBA{204, 121, 167, 255},
	color.RGBA{230, 159, 0, 255}, color.RGBA{86, 180, 233, 255}, color.RGBA{0, 0, 0, 255}, color.RGBA{240, 228, 66, 255},
}

// plainTicks are gonum/plot's default ticks labelled in the fewest digits (2500, not
// 2500.00).
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

// newPlot is a plot with a title, axis labels and a light grid.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Y.Tick.Marker = plainTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return p
}

// errPoints are points with symmetric y errors (mean ± sd).
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// addSeries draws one series: a line through the points, a marker on each and its error bars,
// in the i-th colour.
func addSeries(p *plot.Plot, name string, i int, pts errPoints) error {
	return addStyledSeries(p, name, i, 0, pts)
}

// seriesDashes and seriesGlyphs tell apart kinds of series (a bench sweep's tests) where the
// colour tells apart something else.
var (
	seriesDashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}}
	seriesGlyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.RingGlyph{}}
)

// addStyledSeries is addSeries in colour i with the k-th dashes and marker.
func addStyledSeries(p *plot.Plot, name string, i, k int, pts errPoints) error {
	sort.Sort(byX(pts))
	c := palette[i%len(palette)]
	l, s, err := plotter.NewLinePoints(pts.XYs)
	if err != nil {
		return err
	}
	l.Color, s.Color = c, c
	l.Dashes = seriesDashes[k%len(seriesDashes)]
	s.Shape = seriesGlyphs[k%len(seriesGlyphs)]
	s.Radius = vg.Points(3)
	p.Add(l, s)
	if pts.YErrors != nil {
		e, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return err
		}
		e.Color = c
		p.Add(e)
	}
	p.Legend.Add(name, l, s)
	return nil
}

// byX orders points (and their errors) by x.
type byX errPoints

func (b byX) Len() int           { return len(b.XYs) }
func (b byX) Less(i, j int) bool { return b.XYs[i].X < b.XYs[j].X }
func (b byX) Swap(i, j int) {
	b.XYs[i], b.XYs[j] = b.XYs[j], b.XYs[i]
	if b.YErrors != nil {
		b.YErrors[i], b.YErrors[j] = b.YErrors[j], b.YErrors[i]
	}
}

// sweepPlot draws what a bench sweep varied: t/s of each test against the prompt length, the
// depth and the thread count (each where it took more than one value), the verify cost curve
// (--widths) and batched decoding (--batch). Without any, one chart of every test's rate.
func sweepPlot(path string, rows []bench.Result, tests []bench.Test) error {
	distinct := func(f func(bench.Test) int) int {
		seen := map[int]bool{}
		for _, t := range tests {
			seen[f(t)] = true
		}
		return len(seen)
	}
	type axis struct {
		title, label string
		x            func(bench.Test) int
		// the test's series among the others: what the x value does not already say
		series func(bench.Test) string
	}
	kind := func(t bench.Test) string {
		switch t.Kind {
		case "pp":
			return "pp (prefill)"
		case "tg":
			return fmt.Sprintf("tg%d (decode)", t.NGen)
		case "pg":
			return fmt.Sprintf("pg (prompt+%d)", t.NGen)
		}
		return fmt.Sprintf("tv%d (tree verify, nodes/s)", t.NPrompt)
	}
	modelSet := map[string]bool{}
	for _, t := range tests {
		modelSet[t.Model] = true
	}
	models, threads := len(modelSet), distinct(func(t bench.Test) int { return t.NThreads })
	label := func(t bench.Test, withThreads bool) string {
		s := kind(t)
		if models > 1 {
			s = t.Model + " " + s
		}
		if withThreads && threads > 1 {
			s += fmt.Sprintf(", %d threads", t.NThreads)
		}
		return s
	}
	var axes []axis
	if distinct(func(t bench.Test) int { return runPromptOf(t, rows) }) > 1 {
		axes = append(axes, axis{"against the prompt length", "prompt tokens (tg and tv: after them)",
			func(t bench.Test) int { return runPromptOf(t, rows) }, func(t bench.Test) string { return label(t, false) }})
	}
	if distinct(func(t bench.Test) int { return runDepthOf(t, rows) }) > 1 {
		axes = append(axes, axis{"against the depth", "tokens of context before the prompt (-d)",
			func(t bench.Test) int { return runDepthOf(t, rows) }, func(t bench.Test) string { return label(t, false) }})
	}
	if threads > 1 {
		axes = append(axes, axis{"against the threads", "threads",
			func(t bench.Test) int { return t.NThreads }, func(t bench.Test) string { return label(t, false) }})
	}
	var grid [][]*plot.Plot
	var cells []*plot.Plot
	for _, a := range axes {
		p := newPlot("t/s "+a.title, a.label, "t/s (mean ± sd)")
		series := map[string]*errPoints{}
		var order []string
		// colour by what the series' name says besides the test (the other swept settings, the
		// model), dashes and marker by the test: nine series in eight colours stay apart
		kindOf, restOf := map[string]string{}, map[string]string{}
		for _, t := range tests {
			name := a.series(t)
			// a series holds one point per x: the other swept settings are its own series
			for _, other := range axes {
				if other.label != a.label {
					name += fmt.Sprintf(", %s %d", shortAxis(other.label), other.x(t))
				}
			}
			s := series[name]
			if s == nil {
				s = &errPoints{YErrors: plotter.YErrors{}}
				series[name] = s
				order = append(order, name)
				kindOf[name], restOf[name] = kind(t), strings.Replace(name, kind(t), "", 1)
			}
			s.XYs = append(s.XYs, plotter.XY{X: float64(a.x(t)), Y: t.AvgTS})
			s.YErrors = append(s.YErrors, struct{ Low, High float64 }{t.StddevTS, t.StddevTS})
		}
		kinds, rests := indexOf(order, kindOf), indexOf(order, restOf)
		var xs []float64
		for _, name := range order {
			colour := rests[restOf[name]]
			if len(rests) == 1 {
				colour = kinds[kindOf[name]]
			}
			if err := addStyledSeries(p, name, colour, kinds[kindOf[name]], *series[name]); err != nil {
				return err
			}
			for _, xy := range series[name].XYs {
				xs = append(xs, xy.X)
			}
		}
		integerAxis(p, xs)
		roomForLegend(p, len(order))
		cells = append(cells, p)
	}
	// the verify cost curve and batched decoding: a chart of each for each model and thread
	// count, a series for each run (its depth and prompt)
	type group struct {
		title        string
		curve, batch []bench.Result
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, r := range rows {
		key := fmt.Sprintf("%s, %d threads", r.Model, r.Threads)
		g := byKey[key]
		if g == nil {
			g = &group{title: key}
			byKey[key] = g
			groups = append(groups, g)
		}
		if len(r.Curve) > 1 {
			g.curve = append(g.curve, r)
		}
		if len(r.Batch) > 1 {
			g.batch = append(g.batch, r)
		}
	}
	for _, g := range groups {
		if len(g.curve) > 0 {
			p := newPlot("tree verify against its width, "+g.title, "tree nodes", "nodes/s (median of the trees)")
			var xs []float64
			for i, r := range g.curve {
				var pts errPoints
				for _, c := range r.Curve {
					pts.XYs = append(pts.XYs, plotter.XY{X: float64(c.Nodes), Y: float64(c.Nodes) / (c.MS / 1e3)})
				}
				if err := addSeries(p, fmt.Sprintf("after %d+%d tokens", r.Depth+r.Prompt, r.Decoded), i, pts); err != nil {
					return err
				}
				xs = append(xs, xsOf(pts.XYs)...)
			}
			integerAxis(p, xs)
			roomForLegend(p, len(g.curve))
			cells = append(cells, p)
		}
		if len(g.batch) > 0 {
			p := newPlot("batched decoding, "+g.title, "sessions decoding at once", "tok/s")
			var xs []float64
			for i, r := range g.batch {
				var all, per errPoints
				for _, b := range r.Batch {
					all.XYs = append(all.XYs, plotter.XY{X: float64(b.Sessions), Y: b.TPS})
					per.XYs = append(per.XYs, plotter.XY{X: float64(b.Sessions), Y: b.PerSess})
				}
				run := ""
				if len(g.batch) > 1 {
					run = fmt.Sprintf(", depth %d, prompt %d", r.Depth, r.Prompt)
				}
				if err := addStyledSeries(p, "all sessions"+run, i, 0, all); err != nil {
					return err
				}
				if err := addStyledSeries(p, "per session"+run, i, 1, per); err != nil {
					return err
				}
				xs = append(xs, xsOf(all.XYs)...)
			}
			integerAxis(p, xs)
			roomForLegend(p, 2*len(g.batch))
			cells = append(cells, p)
		}
	}
	if len(cells) == 0 { // nothing was swept: the tests side by side
		p, err := testBars(tests)
		if err != nil {
			return err
		}
		cells = append(cells, p)
	}
	const perRow = 2
	for i := 0; i < len(cells); i += perRow {
		grid = append(grid, cells[i:min(i+perRow, len(cells))])
	}
	return savePlots(path, grid, 16*vg.Centimeter, 11*vg.Centimeter)
}

// indexOf numbers the distinct values of key over names, in order of first appearance.
func indexOf(names []string, key map[string]string) map[string]int {
	idx := map[string]int{}
	for _, n := range names {
		if _, ok := idx[key[n]]; !ok {
			idx[key[n]] = len(idx)
		}
	}
	return idx
}

// integerAxis ticks the x axis at the values it has (counts: prompt lengths, threads, tree
// widths), on a log scale where they span a factor of 8 or more.
func integerAxis(p *plot.Plot, xs []float64) {
	sort.Float64s(xs)
	var ticks []plot.Tick
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			ticks = append(ticks, plot.Tick{Value: x, Label: fmt.Sprintf("%g", x)})
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if len(xs) > 0 && xs[0] > 0 && xs[len(xs)-1]/xs[0] >= 8 {
		p.X.Scale = plot.LogScale{}
		p.X.Min, p.X.Max = xs[0]/1.2, xs[len(xs)-1]*1.2
	}
}

func xsOf(pts plotter.XYs) []float64 {
	xs := make([]float64, len(pts))
	for i, xy := range pts {
		xs[i] = xy.X
	}
	return xs
}

// roomForLegend starts the y axis at 0 and leaves room above the data for a legend of n
// entries (gonum/plot draws the legend inside the plot).
func roomForLegend(p *plot.Plot, n int) {
	p.Y.Min = 0
	p.Y.Max *= 1.05 + 0.075*float64(n)
}

// shortAxis is an axis's name in a series' label.
func shortAxis(label string) string {
	switch {
	case strings.HasPrefix(label, "prompt"):
		return "prompt"
	case strings.HasPrefix(label, "tokens of context"):
		return "depth"
	}
	return label
}

// runPromptOf and runDepthOf are the prompt and the depth of the run a test came from (its
// row's, for a tg or tv test placed after them).
func runPromptOf(t bench.Test, rows []bench.Result) int {
	switch t.Kind {
	case "pp", "pg":
		return t.NPrompt
	case "tg":
		return t.NDepth - runDepthOf(t, rows)
	}
	return t.NDepth - runDepthOf(t, rows) - decodedOf(t, rows)
}

func runDepthOf(t bench.Test, rows []bench.Result) int {
	if t.Kind == "pp" || t.Kind == "pg" {
		return t.NDepth
	}
	for _, r := range rows { // the run whose tests end where this one is
		if r.Model == t.Model && r.Threads == t.NThreads {
			switch {
			case t.Kind == "tg" && r.Depth+r.Prompt == t.NDepth && r.Decoded == t.NGen:
				return r.Depth
			case t.Kind == "tv" && r.Depth+r.Prompt+r.Decoded == t.NDepth && r.TreeNodes == t.NPrompt:
				return r.Depth
			}
		}
	}
	return 0
}

func decodedOf(t bench.Test, rows []bench.Result) int {
	for _, r := range rows {
		if r.Model == t.Model && r.Threads == t.NThreads && t.Kind == "tv" && r.Depth+r.Prompt+r.Decoded == t.NDepth && r.TreeNodes == t.NPrompt {
			return r.Decoded
		}
	}
	return 0
}

// testBars is every test's rate as a bar with its standard deviation.
func testBars(tests []bench.Test) (*plot.Plot, error) {
	p := newPlot("t/s of each test", "", "t/s (mean ± sd)")
	var vals plotter.Values
	var names []string
	var pts errPoints
	for i, t := range tests {
		vals = append(vals, t.AvgTS)
		names = append(names, fmt.Sprintf("%s\n%s, %dt", t.Name(), t.Model, t.NThreads))
		pts.XYs = append(pts.XYs, plotter.XY{X: float64(i), Y: t.AvgTS})
		pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{t.StddevTS, t.StddevTS})
	}
	b, err := plotter.NewBarChart(vals, vg.Points(22))
	if err != nil {
		return nil, err
	}
	b.Color = palette[0]
	b.LineStyle.Width = 0
	e, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return nil, err
	}
	p.Add(b, e)
	p.NominalX(names...)
	return p, nil
}

// comparePlot draws each compared test as two bars, base and new, each relative to the base's
// mean, with their standard deviations as error bars and the base's noise (± sd) as a band:
// a new bar whose top is outside the band moved more than the base's own scatter.
func comparePlot(path string, cs []bench.Comparison, alpha, minChange float64) error {
	p := newPlot("new against base, each test relative to the base's mean", "", "t/s ÷ the base's mean t/s")
	w := vg.Points(14)
	var base, now plotter.Values
	var bErr, nErr errPoints
	var names []string
	for i, c := range cs {
		if c.Base <= 0 {
			continue
		}
		base, now = append(base, 1), append(now, c.New/c.Base)
		bErr.XYs = append(bErr.XYs, plotter.XY{X: float64(len(base) - 1), Y: 1})
		bErr.YErrors = append(bErr.YErrors, struct{ Low, High float64 }{c.BaseSD / c.Base, c.BaseSD / c.Base})
		nErr.XYs = append(nErr.XYs, plotter.XY{X: float64(len(now) - 1), Y: c.New / c.Base})
		nErr.YErrors = append(nErr.YErrors, struct{ Low, High float64 }{c.NewSD / c.Base, c.NewSD / c.Base})
		verdict := "same"
		if c.Significant(alpha, minChange) {
			verdict = map[bool]string{true: "better", false: "worse"}[c.Better]
		}
		// each group's first test says the group: the model and the backend (threads), so
		// that the same test at another thread count is not taken for a repeat
		name := strings.TrimSuffix(c.Metric, " t/s")
		if i == 0 || cs[i-1].Model != c.Model || cs[i-1].Backend != c.Backend {
			name = c.Model + "\n" + c.Backend + "\n" + name
		}
		names = append(names, fmt.Sprintf("%s\n%+.1f%% %s", name, 100*c.Change, verdict))
	}
	if len(base) == 0 {
		return fmt.Errorf("--plot: no test with a base rate to draw")
	}
	bb, err := plotter.NewBarChart(base, w)
	if err != nil {
		return err
	}
	nb, err := plotter.NewBarChart(now, w)
	if err != nil {
		return err
	}
	bb.Color, nb.Color = color.Gray{170}, palette[0]
	bb.LineStyle.Width, nb.LineStyle.Width = 0, 0
	bb.Offset, nb.Offset = -w/2, w/2
	// the base's noise band around each pair: 1 ± its relative sd
	var band *plotter.Polygon
	for i := range bErr.XYs {
		sd := bErr.YErrors[i].Low
		var err error
		band, err = plotter.NewPolygon(plotter.XYs{{X: float64(i) - 0.45, Y: max(0, 1-sd)}, {X: float64(i) + 0.45, Y: max(0, 1-sd)},
			{X: float64(i) + 0.45, Y: 1 + sd}, {X: float64(i) - 0.45, Y: 1 + sd}})
		if err != nil {
			return err
		}
		band.Color = color.NRGBA{230, 159, 0, 60}
		band.LineStyle.Width = 0
		p.Add(band)
	}
	p.Add(bb, nb)
	barErrors(p, bErr, -w/2)
	barErrors(p, nErr, w/2)
	p.Legend.Add("base (mean ± sd)", bb)
	p.Legend.Add("new (mean ± sd)", nb)
	p.Legend.Add("the base's noise: 1 ± its sd", band)
	p.NominalX(names...)
	hi := 1.0
	for i := range now {
		hi = max(hi, now[i]+nErr.YErrors[i].High, 1+bErr.YErrors[i].High)
	}
	p.Y.Min, p.Y.Max = 0, hi+0.15+0.1*hi // and room for the legend
	return savePlots(path, [][]*plot.Plot{{p}}, vg.Length(max(16, 3*len(now)))*vg.Centimeter, 12*vg.Centimeter)
}

// barErrors draws error bars offset like a bar chart's bars (by offset from each category).
func barErrors(p *plot.Plot, pts errPoints, offset vg.Length) {
	p.Add(offsetErrors{pts: pts, offset: offset})
}

// offsetErrors is a plotter of vertical error bars displaced by a fixed length, as bar
// charts displace their bars.
type offsetErrors struct {
	pts    errPoints
	offset vg.Length
}

func (o offsetErrors) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	ls := draw.LineStyle{Color: color.Black, Width: vg.Points(1)}
	for i, xy := range o.pts.XYs {
		x := trX(xy.X) + o.offset
		// an sd past the axis (a rate cannot be negative) ends at the axis, without a cap
		lo, hi := xy.Y-o.pts.YErrors[i].Low, xy.Y+o.pts.YErrors[i].High
		loY, hiY := trY(max(lo, p.Y.Min)), trY(min(hi, p.Y.Max))
		c.StrokeLine2(ls, x, loY, x, hiY)
		if lo >= p.Y.Min {
			c.StrokeLine2(ls, x-vg.Points(3), loY, x+vg.Points(3), loY)
		}
		if hi <= p.Y.Max {
			c.StrokeLine2(ls, x-vg.Points(3), hiY, x+vg.Points(3), hiY)
		}
	}
}
