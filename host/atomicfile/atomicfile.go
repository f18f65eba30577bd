// Package atomicfile writes files that appear whole or not at all.
//
// A File is written under a temporary name in the destination's directory,
// ".<name>.tmp-<pid>-<random>", and renamed over the destination by Commit after an fsync. A
// File that is not committed is removed by Abort; the files of a process that is interrupted
// are removed by AbortAll (which a command calls from its signal handler); and the leftovers
// of a process that was killed outright (SIGKILL, a crash, a power cut) are recognised by the
// process id in their name and removed by Sweep once that process is gone.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// File is a file being written under a temporary name.
type File struct {
	*os.File
	path string // the destination
	mode fs.FileMode
	done bool
}

var (
	mu      sync.Mutex
	pending = map[*File]struct{}{}
)

// tmpMarker separates a destination's name from the temporary suffix.
const tmpMarker = ".tmp-"

// Create starts writing path. mode is the committed file's permission bits (before the
// umask, as os.Create applies it); if path already exists, its own mode is kept instead, so
// rewriting a file in place does not change who may read it.
func Create(path string, mode fs.FileMode) (*File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file", path)
		}
		mode = fi.Mode().Perm()
	} else {
		mode = mode.Perm() &^ umask()
	}
	f, err := os.CreateTemp(dir, "."+base+tmpMarker+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return nil, err
	}
	a := &File{File: f, path: path, mode: mode}
	mu.Lock()
	pending[a] = struct{}{}
	mu.Unlock()
	return a, nil
}

// Commit syncs the file, gives it its mode and renames it over the destination. After an
// error the temporary file is gone and the destination untouched.
func (f *File) Commit() (err error) {
	if f.done {
		return errors.New("atomicfile: " + f.path + ": already committed or aborted")
	}
	defer func() {
		if err != nil {
			f.Abort()
		}
	}()
	if err := f.Chmod(f.mode); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.File.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), f.path); err != nil {
		return err
	}
	f.forget()
	return nil
}

// Abort removes the temporary file; the destination is untouched. Aborting a committed or
// aborted file does nothing, so Abort can be deferred beside Commit.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.File.Close()
	os.Remove(f.Name())
	f.forget()
}

func (f *File) forget() {
	f.done = true
	mu.Lock()
	delete(pending, f)
	mu.Unlock()
}

// AbortAll removes the temporary files of every File of this process that is neither
// committed nor aborted. It is safe to call from a signal handler's goroutine while other
// goroutines are still writing: their next writes fail.
func AbortAll() {
	mu.Lock()
	fs := make([]*File, 0, len(pending))
	for f := range pending {
		fs = append(fs, f)
	}
	mu.Unlock()
	for _, f := range fs {
		f.Abort()
	}
}

// Sweep removes, in dir, the temporary files that Create made for processes that no longer
// run, and returns how many it removed. Files of live processes (this one included) are
// left alone.
func Sweep(dir string) (int, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	n := 0
	for _, de := range des {
		pid, ok := ownerPID(de.Name())
		if !ok || !de.Type().IsRegular() || alive(pid) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, de.Name())); err == nil {
			n++
		}
	}
	return n, nil
}

// ownerPID parses the process id out of a temporary file's name:
// .<name>.tmp-<pid>-<random>.
func ownerPID(name string) (int, bool) {
	if !strings.HasPrefix(name, ".") {
		return 0, false
	}
	i := strings.LastIndex(name, tmpMarker)
	if i < 0 {
		return 0, false
	}
	rest := name[i+len(tmpMarker):]
	j := strings.IndexByte(rest, '-')
	if j <= 0 || j == len(rest)-1 {
		return 0, false
	}
	pid, err := strconv.Atoi(rest[:j])
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}
