package megakernel

import (
	"hash/fnv"
	"sync"

	"verity/device"
)

// The kernel table: instruction kernel numbers index device.Kernels() (sorted by entry name),
// less the megakernel itself.
// A stream carries a hash of the table's entry names, so a stream encoded by a binary with
// other kernels is refused rather than misread.
// module is the megakernel's own PTX module, left out of the table.
const module = "megakernel"

var (
	tableOnce sync.Once
	table     []device.Spec
	tableIDs  map[string]int
	tableHash uint32
)

func loadTable() {
	tableOnce.Do(func() {
		for _, k := range device.Kernels() {
			if k.Module() != module {
				table = append(table, k)
			}
		}
		tableIDs = make(map[string]int, len(table))
		h := fnv.New32a()
		for i, k := range table {
			tableIDs[k.Entry()] = i
			h.Write([]byte(k.Entry()))
			h.Write([]byte{0})
		}
		tableHash = h.Sum32()
	})
}

// Kernels returns the kernel table: instruction kernel n is Kernels()[n].
func Kernels() []device.Spec {
	loadTable()
	return table
}

func kernelIDs() map[string]int {
	loadTable()
	return tableIDs
}

// TableHash identifies the kernel table (FNV-1a over the entry names, each ended by a zero).
func TableHash() uint32 {
	loadTable()
	return tableHash
}
