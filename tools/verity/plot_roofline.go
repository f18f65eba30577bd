package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"verity/device/perf"
	"verity/host/exec"
)

// rooflinePoint is one kernel launch on a roofline: its flops (the Program's cost model), its
// DRAM bytes and time (the kernels' static model), and the group its colour says.
type rooflinePoint struct {
	group        string
	flops, bytes float64
	us           float64
}

// stepRoofline places each launch of a step of rows rows after context positions on card: the
// flops of its op's rows and keys, the DRAM bytes and the time perf.Predict gives its launch.
func stepRoofline(ex *exec.Executor, rows, context int, card perf.Card) ([]rooflinePoint, error) {
	ls, err := ex.Lower(rows, rows)
	if err != nil {
		return nil, err
	}
	keys := int64(context + (rows+1)/2) // a row's keys, on average over the step
	var out []rooflinePoint
	for _, l := range ls {
		pr, err := perf.Predict(card, l.Kernel, l.Args)
		if err != nil {
			return nil, err
		}
		n := int64(l.Rows)
		out = append(out, rooflinePoint{group: l.Op.Kind.String(), flops: float64(l.Op.FlopsPerRow*n + l.Op.FlopsPerKey*n*keys),
			bytes: float64(pr.Bytes), us: pr.TimeUS})
	}
	return out, nil
}

// rooflinePlot draws points on card's roofline: attained flops per second (modelled) against
// flops per DRAM byte, under the bandwidth ceiling (the card's bandwidth times the
// intensity) and the float32 compute ceiling. Points without flops or bytes cannot be placed
// on the log axes and are counted in the title.
func rooflinePlot(path, title string, card perf.Card, pts []rooflinePoint) error {
	p := newPlot("", "arithmetic intensity (flops per DRAM byte)", "attained GFLOP/s (modelled)")
	p.X.Tick.Marker, p.Y.Tick.Marker = decadeTicks{}, decadeTicks{}
	byGroup := map[string]plotter.XYs{}
	skipped := 0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pt := range pts {
		if pt.flops <= 0 || pt.bytes <= 0 || pt.us <= 0 {
			skipped++
			continue
		}
		x, y := pt.flops/pt.bytes, pt.flops/pt.us/1e3
		byGroup[pt.group] = append(byGroup[pt.group], logXY(x, y))
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	if len(byGroup) == 0 {
		return fmt.Errorf("--plot: no launch with flops and bytes to place")
	}
	peak := card.PeakFlops() / 1e9 // GFLOP/s
	ridge := peak / card.BandwidthGBs
	lo, hi = math.Min(lo, ridge)/4, math.Max(hi, ridge)*4
	roof, err := plotter.NewLine(plotter.XYs{logXY(lo, lo*card.BandwidthGBs), logXY(ridge, peak), logXY(hi, peak)})
	if err != nil {
		return err
	}
	roof.Width = vg.Points(2)
	p.Add(roof)
	p.Legend.Add(fmt.Sprintf("%.0f GB/s × intensity, %.1f TFLOP/s fp32", card.BandwidthGBs, peak/1e3), roof)
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for i, g := range groups {
		s, err := plotter.NewScatter(byGroup[g])
		if err != nil {
			return err
		}
		s.Color = palette[i%len(palette)]
		s.Shape = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.PlusGlyph{}, draw.CrossGlyph{}}[i/len(palette)%5]
		s.Radius = vg.Points(3)
		p.Add(s)
		p.Legend.Add(fmt.Sprintf("%s (%d)", g, len(byGroup[g])), s)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Title.Text = title
	if skipped > 0 {
		p.Title.Text += fmt.Sprintf("\n(%d launches without flops or bytes not drawn)", skipped)
	}
	p.X.Min, p.X.Max = math.Log10(lo), math.Log10(hi)
	p.Y.Max = math.Log10(peak * 30) // room for the legend above the roof
	return savePlots(path, [][]*plot.Plot{{p}}, 22*vg.Centimeter, 15*vg.Centimeter)
}

// kernelsPlot draws every kernel case's predicted time against its DRAM bytes on card, over
// the floor (the bytes at the card's bandwidth) and the launch gap, coloured by what limits
// it: the distance above the floor is how far from the bandwidth bound the kernel is.
func kernelsPlot(path string, card perf.Card, rows []kernelRow) error {
	p := newPlot(fmt.Sprintf("each kernel at its real model sizes on %s:\npredicted time against DRAM bytes (modelled)", card.Name),
		"DRAM bytes (MB)", "time (µs)")
	p.X.Tick.Marker, p.Y.Tick.Marker = decadeTicks{}, decadeTicks{}
	byLimit := map[string]plotter.XYs{}
	lo, hi, fastest, slowest := math.Inf(1), math.Inf(-1), math.Inf(1), 0.0
	for _, r := range rows {
		if r.Case == "" || r.Error != "" || r.Bytes <= 0 || r.TimeUS <= 0 {
			continue
		}
		mb := float64(r.Bytes) / 1e6
		byLimit[r.Limiter] = append(byLimit[r.Limiter], logXY(mb, r.TimeUS))
		lo, hi, fastest, slowest = math.Min(lo, mb), math.Max(hi, mb), math.Min(fastest, r.TimeUS), math.Max(slowest, r.TimeUS)
	}
	if len(byLimit) == 0 {
		return fmt.Errorf("--plot: no kernel case to draw")
	}
	lo, hi = lo/2, hi*2
	floor, err := plotter.NewLine(plotter.XYs{logXY(lo, lo*1e6/(card.BandwidthGBs*1e3)), logXY(hi, hi*1e6/(card.BandwidthGBs*1e3))})
	if err != nil {
		return err
	}
	floor.Width = vg.Points(2)
	gap, err := plotter.NewLine(plotter.XYs{logXY(lo, card.LaunchUS), logXY(hi, card.LaunchUS)})
	if err != nil {
		return err
	}
	gap.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(floor, gap)
	p.Legend.Add(fmt.Sprintf("floor: the bytes at %.0f GB/s", card.BandwidthGBs), floor)
	p.Legend.Add(fmt.Sprintf("a launch gap (%.1f µs)", card.LaunchUS), gap)
	limits := make([]string, 0, len(byLimit))
	for l := range byLimit {
		limits = append(limits, l)
	}
	sort.Strings(limits)
	for i, l := range limits {
		s, err := plotter.NewScatter(byLimit[l])
		if err != nil {
			return err
		}
		s.Color, s.Shape, s.Radius = palette[i%len(palette)], draw.CircleGlyph{}, vg.Points(3)
		p.Add(s)
		p.Legend.Add(fmt.Sprintf("limited by %s (%d)", l, len(byLimit[l])), s)
	}
	// the legend below the floor, where no kernel can be
	p.Legend.Top, p.Legend.Left = false, false
	p.X.Min, p.X.Max = math.Log10(lo), math.Log10(hi)
	p.Y.Min = math.Log10(math.Min(fastest, card.LaunchUS) / 10)
	p.Y.Max = math.Log10(math.Max(slowest, hi*1e6/(card.BandwidthGBs*1e3)) * 1.5) // the slowest kernel not on the frame
	return savePlots(path, [][]*plot.Plot{{p}}, 22*vg.Centimeter, 15*vg.Centimeter)
}

// The rooflines' axes are logarithmic, drawn as the values' log10 on linear axes with
// decadeTicks: gonum/plot's LogScale reserves room for an axis label as if it were centred at
// the arithmetic mean of the axis's range, high on a log axis, and so shrank the chart under
// an empty band.
func logXY(x, y float64) plotter.XY { return plotter.XY{X: math.Log10(x), Y: math.Log10(y)} }

// decadeTicks tick an axis of log10 values at each power of ten and its multiples, labelled
// alike at every decade (0.1, 1, 10, 100, 1k, 10k, 100k, 1M; LogTicks writes 100000 beside
// 1e+06).
type decadeTicks struct{}

func (decadeTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range (plot.LogTicks{Prec: -1}).Ticks(math.Pow(10, min), math.Pow(10, max)) {
		v := math.Log10(t.Value)
		if v < min-1e-9 || v > max+1e-9 {
			continue
		}
		if t.Label != "" {
			t.Label = decadeLabel(t.Value)
		}
		out = append(out, plot.Tick{Value: v, Label: t.Label})
	}
	return out
}

func decadeLabel(v float64) string {
	for _, u := range []struct {
		scale  float64
		suffix string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= u.scale && v >= 1e4 { // 1000, 10k, 100k, 1M
			return strconv.FormatFloat(v/u.scale, 'g', -1, 64) + u.suffix
		}
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// scheduleRoofline draws the launches of a step of rows rows after context positions on the
// default card's roofline (verity schedule --plot).
func scheduleRoofline(path, name string, ex *exec.Executor, rows, context int) error {
	card := perf.Cards[perf.DefaultCard]
	pts, err := stepRoofline(ex, rows, context, card)
	if err != nil {
		return err
	}
	return rooflinePlot(path, fmt.Sprintf("%s: a step of %d rows after %d positions,\neach launch on the %s roofline (modelled)", name, rows, context, card.Name), card, pts)
}
