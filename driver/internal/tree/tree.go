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
//
// A walk's memory is bounded whatever the tree's shape (docs/security.md):
// a directory is read through a buffer of bufSize bytes while it is open,
// and a level keeps only its position (the directory offset of the last
// entry taken), never the names still to walk, so a directory closed by
// the descriptor budget is read on from where it was. A measurement goes at
// most MaxDepth levels down and gives up there (ErrLimit); a removal moves
// what lies deeper up to the top and removes it from there. A file of n
// hard links counts as 1/n of itself at each link, so a measurement counts
// each inode once, as du does, without remembering any.
package tree

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Used is what a tree holds: allocated bytes and inodes, each inode once.
type Used struct{ Bytes, Inodes int64 }

// tally adds up what a walk finds. An inode of n links (not a directory)
// counts 1/n at each link: its links are all inside the tree (a pod cannot
// link across its mount), so they add up to the inode once.
type tally struct {
	whole        Used
	linkedBytes  float64
	linkedInodes float64
}

func (t *tally) add(st *unix.Stat_t) {
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		n := float64(st.Nlink)
		t.linkedBytes += float64(st.Blocks*512) / n
		t.linkedInodes += 1 / n
		return
	}
	t.whole.Inodes++
	t.whole.Bytes += st.Blocks * 512
}

func (t *tally) used() Used {
	return Used{
		Bytes:  t.whole.Bytes + int64(math.Round(t.linkedBytes)),
		Inodes: t.whole.Inodes + int64(math.Round(t.linkedInodes)),
	}
}

var (
	// ErrMountInside: a mount point is inside the tree to remove; the
	// walk never crosses into another filesystem.
	ErrMountInside = errors.New("a mount point is inside the copy")
	// ErrChanged: a directory the walk came back to through ".." is not
	// the one it left (it was moved while the walk was below it).
	ErrChanged = errors.New("the tree changed under the walk")
	// ErrLimit: a measurement went over one of its limits and gave up
	// (a *LimitError says which).
	ErrLimit = errors.New("the measurement went over its limit")
)

// The reasons a measurement gives up, as metrics and events name them.
const (
	ReasonDepth   = "too_deep"
	ReasonEntries = "too_many_entries"
	ReasonTime    = "too_slow"
)

// LimitError says which limit a measurement went over.
type LimitError struct {
	Reason string // one of the Reason constants
	Limit  string // the limit, as an operator sets it
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %s (limit %s)", ErrLimit, e.Reason, e.Limit)
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// Limits bound one measurement; zero fields are no limit.
type Limits struct {
	Entries int64         // directory entries read
	Time    time.Duration // time taken
}

const (
	// MaxOpen bounds the directory descriptors one walk holds at once.
	MaxOpen = 32
	// MaxDepth is how many levels below its top a walk goes: as deep as
	// paths of PATH_MAX bytes reach. A measurement gives up below it; a
	// removal moves what lies below it up to the top.
	MaxDepth = 2048
	// bufSize is an open directory's read buffer.
	bufSize = 4 << 10
	// checkEvery is how many entries are read between two looks at the
	// clock.
	checkEvery = 4096
)

// Usage adds up the blocks and inodes under dir (dir included), skipping
// what is mounted inside it. Entries that vanish while it walks are not
// counted.
func Usage(dir string) (Used, error) { return UsageWithin(dir, Limits{}) }

// UsageWithin is Usage that gives up (a *LimitError) past lim or MaxDepth.
func UsageWithin(dir string, lim Limits) (Used, error) {
	w, err := start(dir)
	if err != nil {
		return Used{}, err
	}
	defer w.close()
	w.lim = lim
	if lim.Time > 0 {
		w.deadline = time.Now().Add(lim.Time)
	}
	err = w.measure() // before w.tally is read: Go leaves the order of a return's operands open
	return w.tally.used(), err
}

// Remove removes path and everything under it. It refuses to descend into
// a mount point (ErrMountInside) and reports what it removed (an inode
// when its last link goes). A path that is not there is not an error.
func Remove(path string) (Used, error) {
	w, err := start(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Used{}, nil
	}
	if err != nil {
		return Used{}, err
	}
	defer w.close()
	w.removing = true
	err = w.remove()
	return w.tally.whole, err
}

// frame is one directory on the walk's path from its top. What it holds
// does not grow with the directory: a name, a position and, while it is
// open, a buffer.
type frame struct {
	fd       int // -1 while closed (the walk is deeper than MaxOpen below it)
	dev, ino uint64
	name     string // its name in its parent; kept by a removal only
	off      int64  // the position after the last entry taken
	buf      []byte // read and not yet taken: buf[pos:end]; nil while closed
	pos, end int
	eof      bool
	listed   bool // removal: an entry was taken on this pass
}

type walker struct {
	top      string
	dev      uint64
	mnt      mountID
	stack    []frame
	open     int
	free     [][]byte // buffers of closed frames, for the next to open
	tally    tally
	removing bool
	moved    int // removal: entries moved up to the top from below MaxDepth
	lim      Limits
	deadline time.Time
	entries  int64 // entries read
}

const openFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

func start(path string) (*walker, error) {
	fd, err := unix.Open(path, openFlags, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	w := &walker{top: path, dev: st.Dev, mnt: mountOf(fd), open: 1}
	w.stack = append(make([]frame, 0, 8), frame{fd: fd, dev: st.Dev, ino: st.Ino, buf: w.buffer()})
	w.tally.add(&st)
	return w, nil
}

func (w *walker) close() {
	for i := range w.stack {
		if w.stack[i].fd >= 0 {
			_ = unix.Close(w.stack[i].fd)
		}
	}
	w.stack = nil
}

// buffer hands out a read buffer: one a closed frame gave back, or a new one.
func (w *walker) buffer() []byte {
	if n := len(w.free); n > 0 {
		b := w.free[n-1]
		w.free = w.free[:n-1]
		return b
	}
	return make([]byte, bufSize)
}

// closeFrame closes f's descriptor and gives its buffer back; f keeps its
// position.
func (w *walker) closeFrame(f *frame) {
	_ = unix.Close(f.fd)
	f.fd = -1
	w.open--
	w.free = append(w.free, f.buf)
	f.buf, f.pos, f.end = nil, 0, 0
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

// dirent offsets in a linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name.
const (
	direntOff    = 8
	direntReclen = 16
	direntName   = 19
)

// next takes the next name of f, reading when its buffer is used up; ""
// when the directory is read to its end.
func (w *walker) next(f *frame) (string, error) {
	for {
		if f.pos >= f.end {
			if f.eof {
				return "", nil
			}
			if err := w.read(f); err != nil {
				return "", err
			}
			continue
		}
		rec := f.buf[f.pos:f.end]
		reclen := int(binary.NativeEndian.Uint16(rec[direntReclen:]))
		if reclen <= direntName || reclen > len(rec) {
			return "", w.errorf("getdents", f.name, fmt.Errorf("malformed directory entry (length %d)", reclen))
		}
		f.pos += reclen
		f.off = int64(binary.NativeEndian.Uint64(rec[direntOff:]))
		name := rec[direntName:reclen]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if s := string(name); s != "." && s != ".." {
			f.listed = true
			return s, nil
		}
	}
}

// read fills f's buffer with the entries after its position.
func (w *walker) read(f *frame) error {
	n, err := unix.Getdents(f.fd, f.buf)
	if err != nil {
		return w.errorf("getdents", f.name, err)
	}
	f.pos, f.end = 0, max(n, 0)
	if n <= 0 {
		f.eof = true
		return nil
	}
	entries := 0
	for p := 0; p+direntName < n; {
		reclen := int(binary.NativeEndian.Uint16(f.buf[p+direntReclen:]))
		if reclen == 0 {
			break
		}
		entries++
		p += reclen
	}
	if afterRead != nil {
		afterRead(entries)
	}
	return w.count(entries)
}

// count adds entries read to the measurement's work, and gives up past its
// limits.
func (w *walker) count(entries int) error {
	before := w.entries
	w.entries += int64(entries)
	if w.lim.Entries > 0 && w.entries > w.lim.Entries {
		return &LimitError{Reason: ReasonEntries, Limit: strconv.FormatInt(w.lim.Entries, 10) + " entries"}
	}
	if !w.deadline.IsZero() && before/checkEvery != w.entries/checkEvery && time.Now().After(w.deadline) {
		return &LimitError{Reason: ReasonTime, Limit: w.lim.Time.String()}
	}
	return nil
}

// rewind makes f read its directory again from the start (removal reads
// until nothing is left: what it removed is no longer listed).
func (w *walker) rewind(f *frame) error {
	if _, err := unix.Seek(f.fd, 0, 0); err != nil {
		return w.errorf("seek", f.name, err)
	}
	f.off, f.pos, f.end, f.eof, f.listed = 0, 0, 0, false, false
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
	parent := &w.stack[len(w.stack)-1]
	fd, err := unix.Openat(parent.fd, name, openFlags, 0)
	switch {
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOENT):
		return false, nil
	case err != nil:
		return false, w.errorf("openat", name, err)
	}
	if err := unix.Fstat(fd, seen); err != nil { // what is there now (it may have been swapped since fstatat)
		_ = unix.Close(fd)
		return false, w.errorf("fstat", name, err)
	}
	if w.foreign(seen, fd) {
		_ = unix.Close(fd)
		return false, fmt.Errorf("%w: %s", ErrMountInside, w.where(name))
	}
	f := frame{fd: fd, dev: seen.Dev, ino: seen.Ino, buf: w.buffer()}
	if w.removing {
		f.name = name
	}
	w.stack = append(w.stack, f)
	w.open++
	w.shed()
	return true, nil
}

// shed closes the descriptor of the highest open ancestor while more than
// MaxOpen are open; the top (a removal moves entries into it), the top
// frame and its parent always stay open.
func (w *walker) shed() {
	for i := 1; w.open > MaxOpen && i < len(w.stack)-2; i++ {
		if f := &w.stack[i]; f.fd >= 0 {
			w.closeFrame(f)
		}
	}
}

// pop closes the top frame and makes sure its parent is open: a parent
// closed by shed is opened again through "..", must be the directory the
// walk left, and reads on from its position.
func (w *walker) pop() error {
	f := w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
	defer w.closeFrame(&f)
	if len(w.stack) == 0 {
		return nil
	}
	p := &w.stack[len(w.stack)-1]
	if p.fd >= 0 {
		return nil
	}
	fd, err := unix.Openat(f.fd, "..", openFlags, 0)
	if err != nil {
		return w.errorf("openat", "..", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Dev != p.dev || st.Ino != p.ino {
		_ = unix.Close(fd)
		return fmt.Errorf("%w: the parent of %s", ErrChanged, w.where(f.name))
	}
	if _, err := unix.Seek(fd, p.off, 0); err != nil {
		_ = unix.Close(fd)
		return w.errorf("seek", p.name, err)
	}
	p.fd, p.buf = fd, w.buffer()
	w.open++
	return nil
}

// walk reads the top frame's next name and hands it to entry with what
// fstatat shows of it now (names gone since they were read are skipped),
// and calls end when the top frame's directory is read to its end, until
// the stack is empty.
func (w *walker) walk(entry func(f *frame, name string, st *unix.Stat_t) error, end func() error) error {
	for len(w.stack) > 0 {
		f := &w.stack[len(w.stack)-1]
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

// Set only by tests. afterStat runs between an entry's fstatat and what
// the walk does with it: the moment a pod's swap of that entry would have
// to land, which a swap loop hits only by chance. afterRead is told how
// many entries each read returned.
var (
	afterStat func(dirFD int, name string)
	afterRead func(entries int)
)

// deep says whether the walk is MaxDepth levels below its top.
func (w *walker) deep() bool { return len(w.stack) > MaxDepth }

// measure counts every entry on the top's mount; a directory is counted
// as what was there when it was opened.
func (w *walker) measure() error {
	return w.walk(func(_ *frame, name string, st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if w.deep() {
				return &LimitError{Reason: ReasonDepth, Limit: strconv.Itoa(MaxDepth) + " levels"}
			}
			if _, err := w.descend(name, st); errors.Is(err, ErrMountInside) {
				return nil // somebody else's: not counted
			} else if err != nil {
				return err
			}
		}
		if st.Dev == w.dev {
			w.tally.add(st)
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
			if w.deep() {
				return w.moveUp(f, name)
			}
			entered, err := w.descend(name, st)
			if err != nil {
				return err
			}
			if entered {
				w.tally.add(st)
				return nil
			}
			// No longer a directory: remove what is there now.
		}
		err := unix.Unlinkat(f.fd, name, 0)
		switch {
		case err == nil:
			if st.Nlink <= 1 || st.Mode&unix.S_IFMT == unix.S_IFDIR { // its last link: the inode is freed
				w.tally.add(st)
			}
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

// moveUp moves name, a directory MaxDepth levels below the top, into the
// top under a name of its own, where a later pass over the top removes it:
// a removal never holds more than MaxDepth levels.
func (w *walker) moveUp(f *frame, name string) error {
	for {
		w.moved++
		to := ".per-node-deep-" + strconv.Itoa(w.moved)
		err := unix.Renameat2(f.fd, name, w.stack[0].fd, to, unix.RENAME_NOREPLACE)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EEXIST):
			continue // the pod has a name like it: take the next
		case errors.Is(err, unix.EXDEV), errors.Is(err, unix.EBUSY):
			return fmt.Errorf("%w: %s", ErrMountInside, w.where(name))
		}
		return w.errorf("rename", name, err)
	}
}

// leave is the end of a directory during removal: read it again until it
// is empty (entries may have been added), then remove it from its parent.
func (w *walker) leave() error {
	f := &w.stack[len(w.stack)-1]
	if f.listed {
		// Something was listed on this pass: another pass sees whether
		// anything is left (what was removed is no longer listed).
		return w.rewind(f)
	}
	name := f.name
	if err := w.pop(); err != nil {
		return err
	}
	if len(w.stack) == 0 {
		return w.removeTop()
	}
	p := &w.stack[len(w.stack)-1]
	if err := unix.Unlinkat(p.fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return w.rewind(p) // written to since: walk it again
		}
		return w.errorf("unlinkat", name, err)
	}
	return nil
}

// removeTop removes the top directory itself, by its path: the top is the
// caller's, not the pod's. It was counted when the walk started.
func (w *walker) removeTop() error {
	if err := unix.Rmdir(w.top); err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "rmdir", Path: w.top, Err: err}
	}
	return nil
}
