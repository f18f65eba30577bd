package reference

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"verity/host/gguf"
)

func TestZZDiag(t *testing.T) {
	oracle := oracleDir(t)
	tmp := t.TempDir()
	om := oracleQ35Models[0]
	w := om.model.writer(t, om.model.tensors())
	withVocab(w, om.model.vocab)
	path := filepath.Join(tmp, "a.gguf")
	w.WriteFile(path)
	rng := rand.New(rand.NewPCG(31, 32))
	tokens := []int32{1}
	for range 79 {
		tokens = append(tokens, int32(3+rng.IntN(297)))
	}
	var list []string
	for _, tok := range tokens {
		list = append(list, fmt.Sprint(tok))
	}
	for _, ft := range strings.Split(os.Getenv("FTS"), ",") {
		q := filepath.Join(tmp, ft+".gguf")
		runOracle(t, oracle, "./llama_quantize", path, q, "--ftype", ft, "--pure", "-q")
		runOracle(t, oracle, "./llama_logits", "--tokens", strings.Join(list, ","), "--out", q+".l", q)
		want := readLogits(t, q+".l", len(tokens))
		f, _ := gguf.Open(q)
		m, err := Load(f, Options{ActQuant: true})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := m.Forward(tokens)
		// noise: perturb by rescaling embedding slightly
		s := ""
		for i := range got {
			e := maxRel(got[i:i+1], want[i:i+1])
			s += fmt.Sprintf("%d:%.1e ", i, e)
			_ = math.Abs
		}
		t.Logf("%s %s", ft, s)
	}
}
