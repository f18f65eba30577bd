package dtype

import "testing"

func TestTable(t *testing.T) {
	cases := []struct {
		t           Type
		name        string
		block, size int
	}{
		{F32, "f32", 1, 4}, {F16, "f16", 1, 2}, {BF16, "bf16", 1, 2},
		{Q4_0, "q4_0", 32, 18}, {Q4_1, "q4_1", 32, 20}, {Q5_0, "q5_0", 32, 22}, {Q5_1, "q5_1", 32, 24},
		{Q8_0, "q8_0", 32, 34}, {Q2_K, "q2_K", 256, 84}, {Q3_K, "q3_K", 256, 110},
		{Q4_K, "q4_K", 256, 144}, {Q5_K, "q5_K", 256, 176}, {Q6_K, "q6_K", 256, 210}, {Q8_K, "q8_K", 256, 292},
		{IQ4_XS, "iq4_xs", 256, 136}, {MXFP4, "mxfp4", 32, 17},
	}
	for _, c := range cases {
		if c.t.String() != c.name || c.t.BlockSize() != c.block || c.t.BlockBytes() != c.size {
			t.Errorf("%d: got %s/%d/%d, want %s/%d/%d", c.t, c.t, c.t.BlockSize(), c.t.BlockBytes(), c.name, c.block, c.size)
		}
		p, err := Parse(c.name)
		if err != nil || p != c.t {
			t.Errorf("Parse(%q) = %v, %v", c.name, p, err)
		}
	}
	if Type(4).Known() || Type(4).String() != "type(4)" {
		t.Errorf("removed id 4 must be unknown")
	}
	if len(All()) != 35 {
		t.Errorf("All: %d types, want 35", len(All()))
	}
}

func TestTensorBytes(t *testing.T) {
	if n, err := Q4_K.TensorBytes([]int64{2048, 8192}); err != nil || n != 8*144*8192 {
		t.Errorf("q4_K 2048x8192 = %d, %v", n, err)
	}
	if _, err := Q4_K.TensorBytes([]int64{100, 2}); err == nil {
		t.Errorf("row of 100 q4_K values must fail")
	}
	if _, err := F32.TensorBytes([]int64{1 << 40, 1 << 30}); err == nil {
		t.Errorf("overflow must fail")
	}
	for _, bad := range []struct {
		t Type
		n int64
	}{{F32, 1 << 62}, {Q8_0, (1<<63 - 1) / 32 * 32}, {F64, 1 << 61}} {
		if n, err := bad.t.RowBytes(bad.n); err == nil {
			t.Errorf("%s row of %d values: %d bytes, want an overflow error", bad.t, bad.n, n)
		}
		if n, err := bad.t.TensorBytes([]int64{bad.n}); err == nil {
			t.Errorf("%s tensor of %d values: %d bytes, want an overflow error", bad.t, bad.n, n)
		}
	}
	if _, err := Type(77).RowBytes(32); err == nil {
		t.Errorf("unknown type must fail")
	}
}
