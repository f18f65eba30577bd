package engine

import (
	"errors"
	"fmt"

	"verity/device"
	"verity/host/exec"
	"verity/host/gguf"
	"verity/host/model"
)

// LoadOptions size a loaded model's engine.
type LoadOptions struct {
	MaxRows int // step size: prefill chunk and largest tree (default 64)
	Context int // positions per session (default 2048, capped at the model's n_ctx)
	// Sessions is how many full-length sessions the cache must hold at once (default 1).
	Sessions int
}

// Model is an engine together with the file and executor it owns.
type Model struct {
	*Engine
	File *gguf.File
}

// Load opens a GGUF file, compiles it and prepares an engine on backend b.
func Load(path string, b device.Backend, o LoadOptions) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := FromFile(f, b, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// FromFile is Load for an already opened file (which the Model then owns).
func FromFile(f *gguf.File, b device.Backend, o LoadOptions) (*Model, error) {
	p, err := model.Build(f)
	if err != nil {
		return nil, err
	}
	if o.MaxRows == 0 {
		o.MaxRows = 64
	}
	if o.Context == 0 {
		o.Context = min(2048, p.Config.NCtx)
	}
	if o.Sessions == 0 {
		o.Sessions = 1
	}
	if o.MaxRows < 1 || o.Context < 1 || o.Sessions < 1 {
		return nil, fmt.Errorf("engine: bad load options %+v", o)
	}
	eo := exec.Options{MaxRows: o.MaxRows, NSlots: o.Sessions*o.Context + o.MaxRows}
	if p.StateLayers > 0 {
		eo.NStates = 1 + o.Sessions*StatesPerSession(o.MaxRows)
	}
	ex, err := exec.New(b, p, eo)
	if err != nil {
		return nil, err
	}
	e, err := New(ex, Options{Context: o.Context})
	if err != nil {
		ex.Close()
		return nil, err
	}
	return &Model{Engine: e, File: f}, nil
}

// Close frees the device memory and unmaps the file.
func (m *Model) Close() error {
	return errors.Join(m.Engine.Executor().Close(), m.File.Close())
}
