// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package tree measures and removes directory trees that somebody else
// writes while the driver walks them: a copy belongs to whoever runs in its
// pod, and the driver that walks it is privileged on the node.
//
// Every step is relative to a directory descriptor: an entry is examined
// with fstatat and opened with openat(O_NOFOLLOW|O_DIRECTORY|O_NONBLOCK),
// so a path is never resolved twice, a symlink is never followed, a FIFO or
// device is never opened, and an entry swapped for something else between
// the two calls is seen for what it is now. A directory on another mount
// (another device, another mount ID, or a mount root) is never entered.
// Any depth works with at most MaxOpen descriptors: deeper ancestors are
// closed and opened again through ".." when the walk comes back to them,
// and refused (ErrChanged) if ".." is no longer the directory that was left.
package tree

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// Used is what a tree holds: allocated bytes and inodes.
type Used struct{ Bytes, Inodes int64 }

func (u *Used) add(st *unix.Stat_t) {
	u.Inodes++
	u.Bytes += st.Blocks * 512
}

var (
	// ErrMountInside: a mount point is inside the tree to remove; the
	// walk never crosses into another filesystem.
	ErrMountInside = errors.New("a mount point is inside the copy")
	// ErrChanged: a directory the walk came back to through ".." is not
	// the one it left (it was moved while the walk was below it).
	ErrChanged = errors.New("the tree changed under the walk")
)

// MaxOpen bounds the directory descriptors one walk holds at once.
const MaxOpen = 32

// batch is how many names are read from a directory at a time: a
// directory of a million files costs one batch of names, not a million.
const batch = 1024

// Usage adds up the blocks and inodes under dir (dir included), skipping
// what is mounted inside it. Entries that vanish while it walks are not
// counted.
func Usage(dir string) (Used, error) {
	w, err := start(dir)
	if err != nil {
		return Used{}, err
	}
	defer w.close()
	err = w.measure() // before w.used is read: Go leaves the order of a return's operands open
	return w.used, err
}

// Remove removes path and everything under it. It refuses to descend into
// a mount point (ErrMountInside) and reports what it removed. A path that
// is not there is not an error.
func Remove(path string) (Used, error) {
	w, err := start(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Used{}, nil
	}
	if err != nil {
		return Used{}, err
	}
	defer w.close()
	err = w.remove()
	return w.used, err
}

// frame is one directory on the walk's path from its top.
type frame struct {
	fd       int // -1 while closed (the walk is deeper than MaxOpen below it)
	st       unix.Stat_t
	name     string   // its name in its parent
	pending  []string // names read and not yet walked
	consumed int      // names read so far (to read on from after a reopen)
	eof      bool
}

type walker struct {
	top   string
	dev   uint64
	mnt   mountID
	stack []*frame
	open  int
	used  Used
	buf   []byte // getdents' buffer
}

func start(path string) (*walker, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := &frame{fd: fd}
	if err := unix.Fstat(fd, &f.st); err != nil {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	return &walker{top: path, dev: f.st.Dev, mnt: mountOf(fd), stack: []*frame{f}, open: 1, buf: make([]byte, 32<<10)}, nil
}

func (w *walker) close() {
	for _, f := range w.stack {
		if f.fd >= 0 {
			_ = unix.Close(f.fd)
		}
	}
	w.stack = nil
}

func (w *walker) errorf(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: w.where(name), Err: err}
}

// where names an entry for messages: the top, the depth, and the name.
func (w *walker) where(name string) string {
	if len(w.stack) <= 1 {
		return w.top + "/" + name
	}
	return fmt.Sprintf("%s/…(%d levels)…/%s", w.top, len(w.stack)-1, name)
}

// next returns the next name of the top frame, reading a batch when none
// is pending; "" when the directory is read to its end.
func (w *walker) next(f *frame) (string, error) {
	for len(f.pending) == 0 {
		if f.eof {
			return "", nil
		}
		if err := w.read(f); err != nil {
			return "", err
		}
	}
	name := f.pending[0]
	f.pending = f.pending[1:]
	return name, nil
}

// read reads up to batch more names of f.
func (w *walker) read(f *frame) error {
	for len(f.pending) < batch {
		n, err := unix.Getdents(f.fd, w.buf)
		if err != nil {
			return w.errorf("getdents", f.name, err)
		}
		if n <= 0 {
			f.eof = true
			return nil
		}
		before := len(f.pending)
		_, _, f.pending = unix.ParseDirent(w.buf[:n], -1, f.pending)
		f.consumed += len(f.pending) - before
	}
	return nil
}

// rewind makes f read its directory again from the start (removal reads
// until nothing is left: what it removed is no longer listed).
func (w *walker) rewind(f *frame) error {
	if _, err := unix.Seek(f.fd, 0, 0); err != nil {
		return w.errorf("seek", f.name, err)
	}
	f.pending, f.consumed, f.eof = f.pending[:0], 0, false
	return nil
}

// foreign says whether st (or the directory open at fd, when fd >= 0) is on
// another mount than the top.
func (w *walker) foreign(st *unix.Stat_t, fd int) bool {
	if st.Dev != w.dev {
		return true
	}
	if fd < 0 {
		return false
	}
	m := mountOf(fd)
	return m.root || (m.known && w.mnt.known && m.id != w.mnt.id)
}

// descend opens name, a directory of the top frame, and pushes it. It
// returns false when name is no longer a directory (swapped, or gone).
func (w *walker) descend(name string, seen *unix.Stat_t) (bool, error) {
	parent := w.stack[len(w.stack)-1]
	fd, err := unix.Openat(parent.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOENT):
		return false, nil
	case err != nil:
		return false, w.errorf("openat", name, err)
	}
	f := &frame{fd: fd, name: name}
	if err := unix.Fstat(fd, &f.st); err != nil {
		_ = unix.Close(fd)
		return false, w.errorf("fstat", name, err)
	}
	*seen = f.st // what is there now (it may have been swapped since fstatat)
	if w.foreign(&f.st, fd) {
		_ = unix.Close(fd)
		return false, fmt.Errorf("%w: %s", ErrMountInside, w.where(name))
	}
	w.stack = append(w.stack, f)
	w.open++
	w.shed()
	return true, nil
}

// shed closes the descriptor of the highest open ancestor while more than
// MaxOpen are open; the top frame and its parent always stay open.
func (w *walker) shed() {
	for i := 0; w.open > MaxOpen && i < len(w.stack)-2; i++ {
		if f := w.stack[i]; f.fd >= 0 {
			_ = unix.Close(f.fd)
			f.fd = -1
			w.open--
		}
	}
}

// pop closes the top frame and makes sure its parent is open: a parent
// closed by shed is opened again through "..", and must be the directory
// the walk left.
func (w *walker) pop() error {
	f := w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
	defer func() {
		_ = unix.Close(f.fd)
		w.open--
	}()
	if len(w.stack) == 0 {
		return nil
	}
	p := w.stack[len(w.stack)-1]
	if p.fd >= 0 {
		return nil
	}
	fd, err := unix.Openat(f.fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return w.errorf("openat", "..", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != p.st.Dev || st.Ino != p.st.Ino {
		_ = unix.Close(fd)
		return fmt.Errorf("%w: the parent of %s", ErrChanged, w.where(f.name))
	}
	p.fd = fd
	w.open++
	return w.readOn(p)
}

// readOn makes a frame opened again read on after the names it had read
// before it was closed; the names it had read and not walked stay pending.
func (w *walker) readOn(p *frame) error {
	kept, target := p.pending, p.consumed
	p.pending, p.consumed, p.eof = nil, 0, false
	for p.consumed < target && !p.eof {
		p.pending = p.pending[:0]
		if err := w.read(p); err != nil {
			return err
		}
	}
	extra := max(p.consumed-target, 0) // read past where it was: not walked yet
	p.pending = append(kept, p.pending[len(p.pending)-extra:]...)
	p.consumed = max(p.consumed, target)
	return nil
}

// walk reads the top frame's next name and hands it to entry with what
// fstatat shows of it now (names gone since they were read are skipped),
// and calls end when the top frame's directory is read to its end, until
// the stack is empty.
func (w *walker) walk(entry func(f *frame, name string, st *unix.Stat_t) error, end func() error) error {
	for len(w.stack) > 0 {
		f := w.stack[len(w.stack)-1]
		name, err := w.next(f)
		if err != nil {
			return err
		}
		if name == "" {
			if err := end(); err != nil {
				return err
			}
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(f.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			continue
		} else if err != nil {
			return w.errorf("fstatat", name, err)
		}
		if afterStat != nil {
			afterStat(f.fd, name)
		}
		if err := entry(f, name, &st); err != nil {
			return err
		}
	}
	return nil
}

// afterStat, set only by tests, runs between an entry's fstatat and what
// the walk does with it: the moment a pod's swap of that entry would have
// to land, which a swap loop hits only by chance.
var afterStat func(dirFD int, name string)

// measure counts every entry on the top's mount; a directory is counted
// as what was there when it was opened.
func (w *walker) measure() error {
	w.used.add(&w.stack[0].st)
	return w.walk(func(_ *frame, name string, st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if _, err := w.descend(name, st); errors.Is(err, ErrMountInside) {
				return nil // somebody else's: not counted
			} else if err != nil {
				return err
			}
		}
		if st.Dev == w.dev {
			w.used.add(st)
		}
		return nil
	}, w.pop)
}

// remove removes every entry, depth first; it stops at a mount inside.
func (w *walker) remove() error {
	return w.walk(func(f *frame, name string, st *unix.Stat_t) error {
		if st.Dev != w.dev {
			return fmt.Errorf("%w: %s", ErrMountInside, w.where(name))
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			entered, err := w.descend(name, st)
			if err != nil {
				return err
			}
			if entered {
				w.used.add(st)
				return nil
			}
			// No longer a directory: remove what is there now.
		}
		err := unix.Unlinkat(f.fd, name, 0)
		switch {
		case err == nil:
			w.used.add(st)
			return nil
		case errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EISDIR):
			return w.rewind(f) // swapped for a directory: read this one again
		case errors.Is(err, unix.EBUSY):
			return fmt.Errorf("%w: %s", ErrMountInside, w.where(name))
		}
		return w.errorf("unlinkat", name, err)
	}, w.leave)
}

// leave is the end of a directory during removal: read it again until it
// is empty (entries may have been added), then remove it from its parent.
func (w *walker) leave() error {
	f := w.stack[len(w.stack)-1]
	if f.consumed > 0 {
		// Something was listed on this pass: another pass sees whether
		// anything is left (what was removed is no longer listed).
		return w.rewind(f)
	}
	name, st := f.name, f.st
	if err := w.pop(); err != nil {
		return err
	}
	if len(w.stack) == 0 {
		return w.removeTop(&st)
	}
	p := w.stack[len(w.stack)-1]
	if err := unix.Unlinkat(p.fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return w.rewind(p) // written to since: walk it again
		}
		return w.errorf("unlinkat", name, err)
	}
	return nil
}

// removeTop removes the top directory itself (st), by its path: the top
// is the caller's, not the pod's.
func (w *walker) removeTop(st *unix.Stat_t) error {
	if err := unix.Rmdir(w.top); err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "rmdir", Path: w.top, Err: err}
	}
	w.used.add(st)
	return nil
}
