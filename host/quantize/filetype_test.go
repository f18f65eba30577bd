package quantize

import (
	"strconv"
	"strings"
	"testing"

	"verity/device/dtype"
)

func TestFileType(t *testing.T) {
	for _, e := range fileTypes {
		for _, name := range []string{e.name, strings.ToLower(e.name), strconv.Itoa(int(e.ft))} {
			if got, err := ParseFileType(name); err != nil || got != e.ft {
				t.Errorf("ParseFileType(%q) = %v, %v", name, got, err)
			}
		}
		if _, err := FileTypeOf(e.base); err != nil {
			t.Errorf("FileTypeOf(%s): %v", e.base, err)
		}
	}
	for name, want := range map[string]FileType{"Q4_K": FileQ4_KM, "q3_k": FileQ3_KM, "Q5_K": FileQ5_KM, "15": FileQ4_KM, "0": FileF32} {
		if got, err := ParseFileType(name); err != nil || got != want {
			t.Errorf("ParseFileType(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, bad := range []string{"Q4_K_X", "IQ4_XS", "99", "-1", ""} {
		if _, err := ParseFileType(bad); err == nil || !strings.Contains(err.Error(), "Q4_K_M") {
			t.Errorf("ParseFileType(%q): %v", bad, err)
		}
	}
	if s := FileType(99).String(); s != "FileType(99)" {
		t.Errorf("String of an unknown type = %q", s)
	}
	if ft, _ := FileTypeOf(dtype.Q4_K); ft != FileQ4_KM {
		t.Errorf("FileTypeOf(q4_K) = %v, want Q4_K_M", ft)
	}
}

// The mix's rules on a model too big to keep as a fixture: 80 layers of llama with grouped
// K/V heads is llama.cpp's 70B class, whose attn_v gets Q5_K where it would get Q3_K or Q4_K;
// the walk follows llama.cpp's order (blk.10 after blk.9), whatever the input's.
func TestMix70B(t *testing.T) {
	var ts []Tensor
	for i := 79; i >= 0; i-- { // reversed: the order must not matter
		p := "blk." + strconv.Itoa(i) + "."
		ts = append(ts, Tensor{Name: p + "attn_v.weight", Type: dtype.F32, Dims: []int64{8192, 1024}},
			Tensor{Name: p + "ffn_down.weight", Type: dtype.F32, Dims: []int64{28672, 8192}})
	}
	ts = append(ts, Tensor{Name: "output.weight", Type: dtype.F32, Dims: []int64{8192, 128256}})
	m := Model{Arch: "llama", NLayer: 80, NHead: 64, NHeadKV: 8}
	for _, c := range []struct {
		ft          FileType
		layer       int
		v, down, oo dtype.Type
	}{
		{FileQ4_KM, 0, dtype.Q6_K, dtype.Q6_K, dtype.Q6_K},  // a "more bits" layer
		{FileQ4_KM, 11, dtype.Q5_K, dtype.Q4_K, dtype.Q6_K}, // not: attn_v's Q4_K becomes Q5_K
		{FileQ3_KM, 1, dtype.Q5_K, dtype.Q5_K, dtype.Q6_K},  // the first two attn_v
		{FileQ3_KM, 4, dtype.Q5_K, dtype.Q5_K, dtype.Q6_K},  // layer 4 < 80/16: ffn_down Q5_K
		{FileQ3_KM, 5, dtype.Q5_K, dtype.Q4_K, dtype.Q6_K},  // layer 5: Q4_K
		{FileQ3_KM, 40, dtype.Q5_K, dtype.Q4_K, dtype.Q6_K}, // attn_v Q4_K → Q5_K
		{FileQ2_K, 40, dtype.Q5_K, dtype.Q3_K, dtype.Q6_K},  // gqa 8: Q4_K → Q5_K
		{FileQ8_0, 40, dtype.Q8_0, dtype.Q8_0, dtype.Q8_0},
	} {
		cs, err := Mix(m, ts, MixOptions{FileType: c.ft})
		if err != nil {
			t.Fatal(err)
		}
		at := func(name string) dtype.Type {
			for i, t := range ts {
				if t.Name == name {
					return cs[i].Type
				}
			}
			return 0
		}
		p := "blk." + strconv.Itoa(c.layer) + "."
		if v, d, o := at(p+"attn_v.weight"), at(p+"ffn_down.weight"), at("output.weight"); v != c.v || d != c.down || o != c.oo {
			t.Errorf("%s layer %d: attn_v %s, ffn_down %s, output %s; want %s, %s, %s", c.ft, c.layer, v, d, o, c.v, c.down, c.oo)
		}
	}
}
