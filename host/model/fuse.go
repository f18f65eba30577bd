package model

import (
	"verity/device"
	"verity/device/kernels"
)

// fuseNormConvert folds each whole-row rmsnorm whose output only a conversion reads into that
// conversion (kernels.RMSNormAct): the norm op then writes the converted activations itself
// — a launch, a float32 row written and read back, and a dependency level fewer, the same
// bytes.
func fuseNormConvert(p *Program) {
	reads := map[Buf]int{}
	for _, op := range p.Ops {
		for _, b := range op.In {
			reads[b]++
		}
	}
	drop := map[int]bool{}
	for i := 0; i+1 < len(p.Ops); i++ {
		norm, conv := &p.Ops[i], &p.Ops[i+1]
		if norm.Kind != OpRMSNorm || conv.Kind != OpConvert || conv.In[0] != norm.Out || reads[norm.Out] != 1 ||
			norm.Groups != 1 || norm.Width > kernels.MaxRowActWidth || norm.In[0] == norm.Out {
			continue
		}
		if _, err := kernels.RMSNormAct(p.Buffers[conv.Out].Act); err != nil {
			continue
		}
		w := int64(norm.Width)
		norm.Out = conv.Out
		norm.BytesPerRow += conv.BytesPerRow - 8*w // no float32 row written and read back
		norm.FlopsPerRow += conv.FlopsPerRow
		drop[i+1] = true
		i++
	}
	p.Ops = without(p.Ops, drop)
}

// fuseBinaryConvert folds each SwiGLU, GeGLU or sigmoid gate whose result only a conversion
// reads into that conversion (kernels.SwiGLUAct, GeGLUAct, SigmoidMulAct): the op then writes
// the converted activations, leaving its in-place float32 result unwritten — nothing reads it.
func fuseBinaryConvert(p *Program) {
	drop := map[int]bool{}
	for i := 0; i+1 < len(p.Ops); i++ {
		op, conv := &p.Ops[i], &p.Ops[i+1]
		fused, ok := binaryActKernels[op.Kind]
		if !ok || conv.Kind != OpConvert || conv.In[0] != op.Out {
			continue
		}
		y := op.Out
		w := p.Buffers[y].Width
		if w > kernels.MaxRowActWidth || p.Buffers[op.In[1]].Width != w || laterReaders(p.Ops[i+2:], y) {
			continue
		}
		act := p.Buffers[conv.Out].Act
		if _, err := fused(act); err != nil {
			continue
		}
		op.Out = conv.Out
		op.Width = w
		op.BytesPerRow += conv.BytesPerRow - 8*int64(w)
		op.FlopsPerRow += conv.FlopsPerRow
		drop[i+1] = true
		i++
	}
	p.Ops = without(p.Ops, drop)
}

// fuseAttentionConvert folds each attention whose output only a conversion to f16 or bf16
// reads into that conversion (kernels.AttentionArgs.OutAct): the attention's merge writes the
// converted activations, each value rounded as the conversion rounds it — a launch, a float32
// row written and read back, and a dependency level fewer. The quantised formats, whose blocks
// span heads, keep their conversion.
func fuseAttentionConvert(p *Program) {
	drop := map[int]bool{}
	for i := 0; i+1 < len(p.Ops); i++ {
		att, conv := &p.Ops[i], &p.Ops[i+1]
		if att.Kind != OpAttention || conv.Kind != OpConvert || conv.In[0] != att.Out || laterReaders(p.Ops[i+2:], att.Out) {
			continue
		}
		if act := p.Buffers[conv.Out].Act; act != kernels.ActF16 && act != kernels.ActBF16 {
			continue
		}
		att.Out = conv.Out
		att.BytesPerRow += conv.BytesPerRow - 8*int64(att.Heads*att.HeadDim) // no float32 row written and read back
		att.FlopsPerRow += conv.FlopsPerRow
		drop[i+1] = true
		i++
	}
	p.Ops = without(p.Ops, drop)
}

// binaryActKernels are the fused element-wise-and-convert kernels of the binary ops that have
// them.
var binaryActKernels = map[OpKind]func(kernels.Act) (*device.Kernel[kernels.BinaryActArgs], error){
	OpSwiGLU: kernels.SwiGLUAct, OpSigmoidMul: kernels.SigmoidMulAct, OpGeGLU: kernels.GeGLUAct,
}

// laterReaders reports whether any of ops reads b before something writes it again.
func laterReaders(ops []Op, b Buf) bool {
	for k := range ops {
		for _, in := range ops[k].In {
			if in == b {
				return true
			}
		}
		if writes(&ops[k], b) {
			return false
		}
	}
	return false
}

// without returns ops less the indices in drop.
func without(ops []Op, drop map[int]bool) []Op {
	if len(drop) == 0 {
		return ops
	}
	out := ops[:0]
	for i, op := range ops {
		if !drop[i] {
			out = append(out, op)
		}
	}
	return out
}

// fuseResiduals folds each residual add whose second input is a matvec's output, read by
// nothing else, into that matvec (Op.Acc: Out += W·In[0]): a launch and a pass over the
// activations fewer, and one dependency level fewer in a megakernel step, with the same bits
// (the matvec adds exactly as the add kernel does, the same operands in the same order).
func fuseResiduals(p *Program) {
	reads := map[Buf]int{}
	for _, op := range p.Ops {
		for _, b := range op.In {
			reads[b]++
		}
	}
	drop := map[int]bool{}
	for i := range p.Ops {
		add := &p.Ops[i]
		if add.Kind != OpAdd || len(add.In) != 2 || add.Out != add.In[0] {
			continue
		}
		x, y := add.In[0], add.In[1]
		j := i - 1
		for j >= 0 && !writes(&p.Ops[j], y) {
			j--
		}
		if j < 0 || reads[y] != 1 || y == p.Logits {
			continue
		}
		mv := &p.Ops[j]
		if mv.Kind != OpMatVec || mv.Acc || mv.Out != y || mv.In[0] == x ||
			p.Buffers[x].Rows != p.Buffers[y].Rows || p.Buffers[x].Width != p.Buffers[y].Width {
			continue
		}
		used := false // the fused op writes x at j: nothing in between may use x
		for k := j + 1; k < i; k++ {
			used = used || (!drop[k] && touches(&p.Ops[k], x))
		}
		if used {
			continue
		}
		mv.Acc, mv.Out = true, x
		mv.BytesPerRow += 4 * int64(mv.Rows) // the residual is read before it is written
		drop[i] = true
	}
	p.Ops = without(p.Ops, drop)
}

// writes reports whether op writes buffer b.
func writes(op *Op, b Buf) bool {
	if op.Out == b {
		return op.Kind != OpKVStore // kv_store's Out names its K input; it writes the cache
	}
	return op.Out2 == b && (op.Kind == OpSplitGate || op.Kind == OpRouter)
}

// touches reports whether op reads or writes buffer b.
func touches(op *Op, b Buf) bool {
	for _, in := range op.In {
		if in == b {
			return true
		}
	}
	return writes(op, b)
}

// fuseRopeStore folds the RoPE of a layer's keys into the K/V store that follows it
// (kernels.RopeKVStore): the store rotates K as it writes the cache, when nothing reads the
// rotated K buffer afterwards (attention reads the cache).
func fuseRopeStore(p *Program) {
	drop := map[int]bool{}
	for i := 0; i+1 < len(p.Ops); i++ {
		rope, store := &p.Ops[i], &p.Ops[i+1]
		if rope.Kind != OpRope || store.Kind != OpKVStore || len(store.In) != 2 || store.In[0] != rope.In[0] ||
			rope.Heads*rope.HeadDim != p.Buffers[rope.In[0]].Width || laterReaders(p.Ops[i+2:], rope.In[0]) {
			continue
		}
		store.In = append(store.In, rope.In[1])
		store.Heads, store.HeadDim, store.NRot, store.RopeMode = rope.Heads, rope.HeadDim, rope.NRot, rope.RopeMode
		store.BytesPerRow += rope.BytesPerRow
		store.FlopsPerRow += rope.FlopsPerRow
		drop[i] = true
		i++
	}
	p.Ops = without(p.Ops, drop)
}
