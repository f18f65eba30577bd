package treeverify_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"verity/device"
	"verity/device/cpu"
	"verity/device/ptxvm"
	"verity/host/treeverify"
)

// small is a reduced shape of the seed's model: every feature (GQA, a tied head, bf16
// weights, a tree after a committed history), a thousandth of the bytes.
var small = treeverify.Config{Layers: 2, D: 256, FFN: 512, NQ: 4, NKV: 2, HD: 64, Vocab: 512,
	Eps: 1e-5, Theta: 500000, WDType: "bf16", Tree: 8, History: 40}

// tiny is smaller still, for the PTX interpreter.
var tiny = treeverify.Config{Layers: 1, D: 64, FFN: 128, NQ: 4, NKV: 2, HD: 16, Vocab: 256,
	Eps: 1e-5, Theta: 10000, WDType: "bf16", Tree: 8, History: 24}

// session is a model with its committed history, the reference with the same cache, and the
// tree source.
type session struct {
	m   *treeverify.Model
	ref *treeverify.Reference
	r   *rand.Rand
	pos int
}

func newSession(t *testing.T, cfg treeverify.Config, maxSeq int, b device.Backend, megakernel bool, seed uint64) *session {
	t.Helper()
	w := treeverify.RandomWeights(cfg, seed)
	m, err := treeverify.BuildModel(w, treeverify.NewKVCache(cfg, maxSeq), cfg, maxSeq, treeverify.Options{Backend: b, Megakernel: megakernel, SMs: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	r := rand.New(rand.NewPCG(seed, 1))
	kv, err := m.Prefill(treeverify.RandomTokens(r, cfg.History, cfg.Vocab))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := treeverify.NewReference(w, kv, cfg, maxSeq)
	if err != nil {
		t.Fatal(err)
	}
	return &session{m: m, ref: ref, r: r, pos: cfg.History}
}

// call runs one call of the protocol: the wrong variants (each graded, each must fail), then
// the tree itself (graded, must pass), and every node's row against decoding its path.
func (s *session) call(t *testing.T, decode bool) (errs map[treeverify.Variant]float64, rows [][]float32) {
	t.Helper()
	cfg := s.m.Config()
	tree := treeverify.RandomTree(s.r)
	tokens := treeverify.RandomTokens(s.r, treeverify.Nodes, cfg.Vocab)
	want, err := s.ref.Step(tokens, tree, s.pos, treeverify.Correct)
	if err != nil {
		t.Fatal(err)
	}
	errs = map[treeverify.Variant]float64{}
	for _, v := range append(slices.Clone(treeverify.Variants), treeverify.Correct) { // the correct step last: it leaves the cache
		var l treeverify.Logits
		if v == treeverify.Correct {
			mask := make([][]bool, treeverify.Nodes)
			for i := range mask {
				mask[i] = tree.Mask[i][:]
			}
			l, err = s.m.VerifyStep(tokens, mask, tree.Depth[:], s.pos)
		} else {
			l, err = s.m.Step(tokens, tree, s.pos, v)
		}
		if err != nil {
			t.Fatal(err)
		}
		if rows, err = l.Read(); err != nil {
			t.Fatal(err)
		}
		errs[v] = treeverify.RelError(rows, want)
	}
	if decode {
		for i := 0; i < treeverify.Nodes; i++ {
			got, err := s.m.DecodePath(tokens, tree, s.pos, i)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(device.F32Bytes(got), device.F32Bytes(rows[i])) {
				t.Errorf("pos %d: node %d's row differs from decoding its path %v", s.pos, i, tree.Path(i))
			}
		}
	}
	s.pos += treeverify.Nodes
	return errs, rows
}

// The seed's protocol at a reduced shape on the twin: each call's tree passes the seed's
// grade, each wrong variant fails it, every node's row is bit-identical to decoding its path,
// the appended keys and values are the reference's, and the megakernel (Go VM) gives the
// eager executor's bits.
func TestProtocolOnTheTwin(t *testing.T) {
	const maxSeq = 72
	eager := newSession(t, small, maxSeq, cpu.New(0), false, 7)
	mega := newSession(t, small, maxSeq, cpu.New(0), true, 7)
	for call := 0; call < 3; call++ {
		pos := eager.pos
		errs, rows := eager.call(t, call == 0)
		_, mrows := mega.call(t, false)
		for i := range rows {
			if !slices.Equal(device.F32Bytes(rows[i]), device.F32Bytes(mrows[i])) {
				t.Fatalf("call %d: node %d: the megakernel's logits differ from the eager executor's", call, i)
			}
		}
		t.Logf("call %d at %d: error %.2e; wrong variants %s %.3f, %s %.3f, %s %.3f", call, pos, errs[treeverify.Correct],
			treeverify.Causal, errs[treeverify.Causal], treeverify.Unmasked, errs[treeverify.Unmasked], treeverify.ChainRoPE, errs[treeverify.ChainRoPE])
		if e := errs[treeverify.Correct]; !(e <= treeverify.Tolerance) {
			t.Errorf("call %d: relative error %.3g above the tolerance %.3g", call, e, treeverify.Tolerance)
		}
		for _, v := range treeverify.Variants {
			if e := errs[v]; !(e > treeverify.Tolerance) {
				t.Errorf("call %d: the %s variant passes the grader (%.3g)", call, v, e)
			}
		}
		// the eight nodes' keys and values are in the cache at pos … pos+7: as the reference's
		// up to the matvecs' bf16 activations (in the first layer; later ones add the earlier
		// layers' error, as the logits do)
		for l, tol := range []float64{1e-2, treeverify.Tolerance} {
			k, v, err := eager.m.ReadKV(l, pos, pos+treeverify.Nodes)
			if err != nil {
				t.Fatal(err)
			}
			rk, rv := eager.ref.KV(l, pos, pos+treeverify.Nodes)
			if e := max(relDiff(k, rk), relDiff(v, rv)); !(e < tol) {
				t.Errorf("call %d: layer %d's appended keys and values differ from the reference's by %.3g", call, l, e)
			}
		}
	}
}

func relDiff(a []float32, b []float64) float64 {
	var n, d float64
	for i := range b {
		x := float64(a[i]) - b[i]
		n += x * x
		d += b[i] * b[i]
	}
	return math.Sqrt(n / d)
}

// The committed PTX reproduces the twin's bits for the protocol, eager and as one megakernel
// launch per step, at a tiny shape; every node's row is its path's decode there too.
func TestProtocolOnThePTXInterpreter(t *testing.T) {
	const maxSeq = 40
	vm := ptxvm.New(ptxvm.Options{Config: ptxvm.Config{Workers: 2, NoRaceCheck: true}})
	defer vm.Close()
	for _, mk := range []bool{false, true} {
		want := newSession(t, tiny, maxSeq, cpu.New(0), false, 3)
		got := newSession(t, tiny, maxSeq, vm, mk, 3)
		_, wrows := want.call(t, false)
		errs, grows := got.call(t, !mk)
		for i := range wrows {
			if !slices.Equal(device.F32Bytes(grows[i]), device.F32Bytes(wrows[i])) {
				t.Fatalf("megakernel %v: node %d: the interpreted PTX differs from the twin", mk, i)
			}
		}
		t.Logf("megakernel %v: error %.2e, wrong variants %.3f %.3f %.3f", mk, errs[treeverify.Correct],
			errs[treeverify.Causal], errs[treeverify.Unmasked], errs[treeverify.ChainRoPE])
	}
}
