//go:build unix && !linux

package packfile

import "os"

func fadviseDontNeed(*os.File, int64, int64) error { return nil }

func adviseRandom(*os.File) {}

func populate([]byte) {}

func readahead(*os.File, int64, int64) bool { return false }
