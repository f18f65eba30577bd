package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// TestFormats are the formats WriteTests writes, llama-bench's -o formats.
var TestFormats = []string{"md", "csv", "json", "jsonl", "sql"}

// WriteTests writes rows in one of llama-bench's output formats (TestFormats), laid out as
// llama-bench lays them out, Verity's fields after llama-bench's: json and jsonl after the
// samples, csv after llama-bench's columns and the samples (space-separated), sql in a table
// of their own (verity_tests, with the columns a row of llama_bench is found by), md as
// columns after t/s. footer is md's last line (the build line is llama-bench's).
func WriteTests(w io.Writer, format string, rows []Test, footer string) error {
	switch format {
	case "json":
		return writeTestsJSON(w, rows)
	case "jsonl":
		return writeTestsJSONL(w, rows)
	case "csv":
		return writeTestsCSV(w, rows)
	case "sql":
		return writeTestsSQL(w, rows)
	case "md":
		return writeTestsMarkdown(w, rows, footer)
	}
	return fmt.Errorf("bench: output %q: want one of %s", format, strings.Join(TestFormats, ", "))
}

// jsonValue is a field as llama-bench writes it in JSON: text quoted and escaped, booleans
// as true and false, numbers as they are.
func jsonValue(f field) string {
	switch f.kind {
	case "text":
		var b strings.Builder
		b.WriteByte('"')
		for _, r := range f.value {
			switch {
			case r == '"':
				b.WriteString(`\"`)
			case r == '\\':
				b.WriteString(`\\`)
			case r < 0x20:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
		return b.String()
	case "bool":
		if f.value == "0" {
			return "false"
		}
		return "true"
	}
	return f.value
}

// samplesJSON is llama-bench's "[ a, b ]": nanoseconds as integers, rates as C++ streams
// write doubles (six significant digits).
func (t Test) samplesJSON() (ns, ts string) {
	a := make([]string, len(t.SamplesNS))
	for i, x := range t.SamplesNS {
		a[i] = strconv.FormatInt(x, 10)
	}
	b := make([]string, len(t.SamplesTS))
	for i, x := range t.SamplesTS {
		b[i] = strconv.FormatFloat(x, 'g', 6, 64)
	}
	return "[ " + strings.Join(a, ", ") + " ]", "[ " + strings.Join(b, ", ") + " ]"
}

func writeTestsJSON(w io.Writer, rows []Test) error {
	var b strings.Builder
	b.WriteString("[\n")
	for i, t := range rows {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString("  {\n")
		l, v := t.fields()
		for _, f := range l {
			fmt.Fprintf(&b, "    \"%s\": %s,\n", f.name, jsonValue(f))
		}
		ns, ts := t.samplesJSON()
		fmt.Fprintf(&b, "    \"samples_ns\": %s,\n    \"samples_ts\": %s", ns, ts)
		for _, f := range v {
			fmt.Fprintf(&b, ",\n    \"%s\": %s", f.name, jsonValue(f))
		}
		b.WriteString("\n  }")
	}
	b.WriteString("\n]\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeTestsJSONL(w io.Writer, rows []Test) error {
	for _, t := range rows {
		var b strings.Builder
		b.WriteString("{")
		l, v := t.fields()
		for _, f := range l {
			fmt.Fprintf(&b, "\"%s\": %s, ", f.name, jsonValue(f))
		}
		ns, ts := t.samplesJSON()
		fmt.Fprintf(&b, "\"samples_ns\": %s,\"samples_ts\": %s", ns, ts)
		for _, f := range v {
			fmt.Fprintf(&b, ", \"%s\": %s", f.name, jsonValue(f))
		}
		b.WriteString("}\n")
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// samplesText is a row's samples for csv and sql: space-separated.
func (t Test) samplesText() []field {
	ns, ts := t.samplesJSON()
	trim := func(s string) string { return strings.ReplaceAll(strings.Trim(s, "[ ]"), ", ", " ") }
	return []field{{"samples_ns", "text", trim(ns)}, {"samples_ts", "text", trim(ts)}}
}

func (t Test) csvFields() []field {
	l, v := t.fields()
	return append(append(l, t.samplesText()...), v...)
}

func writeTestsCSV(w io.Writer, rows []Test) error {
	quote := func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
	var b strings.Builder
	b.WriteString(strings.Join(names(Test{}.csvFields()), ",") + "\n")
	for _, t := range rows {
		fs := t.csvFields()
		vals := make([]string, len(fs))
		for i, f := range fs {
			vals[i] = quote(f.value)
		}
		b.WriteString(strings.Join(vals, ",") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// verityKeys are the columns of verity_tests that find a test's row in llama_bench.
var verityKeys = []string{"build_commit", "model_filename", "n_threads", "n_prompt", "n_gen", "n_depth", "test_time"}

func (t Test) sqlVerityFields() []field {
	l, v := t.fields()
	var out []field
	for _, k := range verityKeys {
		for _, f := range l {
			if f.name == k {
				out = append(out, f)
			}
		}
	}
	return append(append(out, t.samplesText()...), v...)
}

func writeTestsSQL(w io.Writer, rows []Test) error {
	sqlType := map[string]string{"text": "TEXT", "bool": "INTEGER", "int": "INTEGER", "real": "REAL"}
	var b strings.Builder
	create := func(table string, fs []field) {
		fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n", table)
		for i, f := range fs {
			sep := ","
			if i == len(fs)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "  %s %s%s\n", f.name, sqlType[f.kind], sep)
		}
		b.WriteString(");\n\n")
	}
	insert := func(table string, fs []field) {
		vals := make([]string, len(fs))
		for i, f := range fs {
			vals[i] = "'" + strings.ReplaceAll(f.value, "'", "''") + "'"
		}
		fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES (%s);\n", table, strings.Join(names(fs), ", "), strings.Join(vals, ", "))
	}
	l, _ := Test{}.fields()
	create("llama_bench", l)
	create("verity_tests", Test{}.sqlVerityFields())
	for _, t := range rows {
		l, _ := t.fields()
		insert("llama_bench", l)
		insert("verity_tests", t.sqlVerityFields())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdColumn is one column of the markdown table: its title, width (negative: left-aligned)
// and value.
type mdColumn struct {
	title string
	width int
	value func(Test) string
}

func writeTestsMarkdown(w io.Writer, rows []Test, footer string) error {
	anyRow := func(f func(Test) bool) bool {
		for _, t := range rows {
			if f(t) {
				return true
			}
		}
		return false
	}
	cols := []mdColumn{
		{"model", -30, func(t Test) string { return t.ModelType }},
		{"size", 10, func(t Test) string {
			if t.ModelSize < 1<<30 {
				return fmt.Sprintf("%.2f MiB", float64(t.ModelSize)/(1<<20))
			}
			return fmt.Sprintf("%.2f GiB", float64(t.ModelSize)/(1<<30))
		}},
		{"params", 10, func(t Test) string {
			if t.ModelNParams < 1e9 {
				return fmt.Sprintf("%.2f M", float64(t.ModelNParams)/1e6)
			}
			return fmt.Sprintf("%.2f B", float64(t.ModelNParams)/1e9)
		}},
		{"backend", -10, func(t Test) string { return t.Backends }},
	}
	if anyRow(func(t Test) bool { return strings.Contains(t.Backends, "CUDA") }) {
		cols = append(cols, mdColumn{"ngl", 3, func(t Test) string { return strconv.Itoa(t.NGPULayers) }})
	}
	cols = append(cols, mdColumn{"threads", 7, func(t Test) string { return strconv.Itoa(t.NThreads) }})
	// like llama-bench, the cache types where they are not its default (f16)
	if anyRow(func(t Test) bool { return t.TypeK != "f16" }) {
		cols = append(cols, mdColumn{"type_k", 6, func(t Test) string { return t.TypeK }})
	}
	if anyRow(func(t Test) bool { return t.TypeV != "f16" }) {
		cols = append(cols, mdColumn{"type_v", 6, func(t Test) string { return t.TypeV }})
	}
	if anyRow(func(t Test) bool { return t.Megakernel }) {
		cols = append(cols, mdColumn{"mk", 3, func(t Test) string {
			if t.Megakernel {
				return "1"
			}
			return "0"
		}})
	}
	cols = append(cols,
		mdColumn{"test", 15, Test.Name},
		mdColumn{"t/s", 20, func(t Test) string { return fmt.Sprintf("%.2f ± %.2f", t.AvgTS, t.StddevTS) }},
		mdColumn{"GB/s", 8, func(t Test) string { return fmt.Sprintf("%.2f", t.GBs) }},
		mdColumn{"floor %", 7, func(t Test) string { return fmt.Sprintf("%.1f", t.FloorPct) }},
	)
	pad := func(s string, width int) string { // llama-bench's "%*s", counted in characters
		n := utf8.RuneCountInString(s)
		switch {
		case width < 0 && n < -width:
			return s + strings.Repeat(" ", -width-n)
		case width > 0 && n < width:
			return strings.Repeat(" ", width-n) + s
		}
		return s
	}
	var b strings.Builder
	b.WriteString("|")
	for _, c := range cols {
		b.WriteString(" " + pad(c.title, c.width) + " |")
	}
	b.WriteString("\n|")
	for _, c := range cols {
		end := "-"
		if c.width > 0 {
			end = ":"
		}
		b.WriteString(" " + strings.Repeat("-", max(c.width, -c.width)-1) + end + " |")
	}
	b.WriteString("\n")
	for _, t := range rows {
		b.WriteString("|")
		for _, c := range cols {
			b.WriteString(" " + pad(c.value(t), c.width) + " |")
		}
		b.WriteString("\n")
	}
	commit, number := "unknown", 0
	if len(rows) > 0 {
		commit, number = rows[0].BuildCommit, rows[0].BuildNumber
	}
	fmt.Fprintf(&b, "\nbuild: %s (%d)\n", commit, number)
	if footer != "" {
		b.WriteString(footer + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
