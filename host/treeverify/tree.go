package treeverify

import (
	"fmt"
	"math/rand/v2"
	"sort"
)

// Nodes is the number of nodes of a tree (the seed's cfg["tree"]).
const Nodes = 8

// Tree is one call's draft tree: Mask[i][j] is true iff node j is an ancestor of node i or
// j == i; Depth[i] is node i's depth (its RoPE position is pos + Depth[i]).
type Tree struct {
	Mask  [Nodes][Nodes]bool
	Depth [Nodes]int64
}

// RandomTree draws a tree: node 0 is the root, node i > 0 hangs under a uniformly chosen node
// j < i.
func RandomTree(r *rand.Rand) Tree {
	var t Tree
	var parent [Nodes]int
	for i := 0; i < Nodes; i++ {
		t.Mask[i][i] = true
		if i == 0 {
			continue
		}
		parent[i] = r.IntN(i)
		t.Depth[i] = t.Depth[parent[i]] + 1
		for j := 0; j < i; j++ {
			t.Mask[i][j] = t.Mask[parent[i]][j]
		}
	}
	return t
}

// Check reports whether t is a tree in the contract's form: every node its own ancestor,
// ancestors of lower index only, ancestors' ancestors included, and each node one deeper
// than its deepest proper ancestor (the root at depth 0).
func (t Tree) Check() error {
	for i := 0; i < Nodes; i++ {
		if !t.Mask[i][i] {
			return fmt.Errorf("treeverify: tree_mask[%d][%d] is false: a node attends to itself", i, i)
		}
		deepest := int64(-1)
		for j := 0; j < Nodes; j++ {
			if !t.Mask[i][j] || j == i {
				continue
			}
			if j > i {
				return fmt.Errorf("treeverify: tree_mask[%d][%d]: node %d's ancestor %d comes after it", i, j, i, j)
			}
			for k := 0; k < Nodes; k++ {
				if t.Mask[j][k] && !t.Mask[i][k] {
					return fmt.Errorf("treeverify: tree_mask: node %d has ancestor %d but not its ancestor %d", i, j, k)
				}
			}
			deepest = max(deepest, t.Depth[j])
		}
		if t.Depth[i] != deepest+1 {
			return fmt.Errorf("treeverify: depth[%d] = %d, but its deepest ancestor is at %d", i, t.Depth[i], deepest)
		}
	}
	return nil
}

// Path returns node i's path from the root: its ancestors and itself, by depth.
func (t Tree) Path(i int) []int {
	var p []int
	for j := 0; j < Nodes; j++ {
		if t.Mask[i][j] {
			p = append(p, j)
		}
	}
	sort.SliceStable(p, func(a, b int) bool { return t.Depth[p[a]] < t.Depth[p[b]] })
	return p
}

// A Variant is a wrong way to run a tree, as the seed lists them: each changes what the step
// computes, and the grader must catch it.
type Variant int

const (
	Correct   Variant = iota
	Causal            // a causal triangle over the 8 nodes instead of the tree mask
	Unmasked          // no mask over the new nodes: every node sees all eight
	ChainRoPE         // chain positions pos + i instead of pos + depth[i]
)

// Variants are the wrong variants, in the seed's order.
var Variants = []Variant{Causal, Unmasked, ChainRoPE}

func (v Variant) String() string {
	return [...]string{"correct", "causal triangle", "no mask over the new nodes", "chain positions"}[v]
}

// apply returns the key lists' new-node part (which nodes each node attends to, in the order
// they are reduced) and the positions' offsets that variant v gives tree t.
func (v Variant) apply(t Tree) (attend [Nodes][]int, offset [Nodes]int64) {
	for i := 0; i < Nodes; i++ {
		switch v {
		case Causal:
			for j := 0; j <= i; j++ {
				attend[i] = append(attend[i], j)
			}
		case Unmasked:
			for j := 0; j < Nodes; j++ {
				attend[i] = append(attend[i], j)
			}
		default:
			attend[i] = t.Path(i)
		}
		offset[i] = t.Depth[i]
		if v == ChainRoPE {
			offset[i] = int64(i)
		}
	}
	return attend, offset
}
