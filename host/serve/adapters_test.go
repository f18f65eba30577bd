package serve_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"verity/host/engine"
	"verity/host/serve"
)

// The LoRA adapters merged into the served weights are listed with the model and in the stats.
func TestAdaptersReported(t *testing.T) {
	m := load(t, "tiny-llama-q8_0", engine.LoadOptions{MaxRows: 8, Context: 32})
	ads := []serve.Adapter{{Name: "style.gguf", Scale: 0.5, Alpha: 16, Ranks: []int{8}, Targets: 14}}
	sv := serve.New(m.Engine, serve.Options{ModelName: "m", Adapters: ads})
	defer sv.Shutdown()
	srv := httptest.NewServer(sv.Handler())
	defer srv.Close()
	get := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	var list struct {
		Data []struct {
			ID       string          `json:"id"`
			Adapters []serve.Adapter `json:"adapters"`
		} `json:"data"`
	}
	get("/v1/models", &list)
	if len(list.Data) != 1 || list.Data[0].ID != "m" || !reflect.DeepEqual(list.Data[0].Adapters, ads) {
		t.Errorf("/v1/models: %+v", list)
	}
	var st serve.Stats
	get("/v1/stats", &st)
	if !reflect.DeepEqual(st.Adapters, ads) {
		t.Errorf("/v1/stats adapters: %+v", st.Adapters)
	}
	// Without adapters neither says anything of them.
	plain := serve.New(m.Engine, serve.Options{ModelName: "m"})
	defer plain.Shutdown()
	if st := plain.Stats(); st.Adapters != nil {
		t.Errorf("stats without adapters: %+v", st.Adapters)
	}
}
