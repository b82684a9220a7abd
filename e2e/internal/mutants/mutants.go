// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package mutants reads the project's catalogue of deliberate breaks
// (e2e/mutants/*.yaml) and makes each one as a Go build overlay: the broken
// file is written beside the work tree and `go build -overlay` compiles it
// in place of the real one, so a break is built and tested without touching
// the work tree, and several breaks can be tested at once.
//
// A break is a text substitution in one file: Find must occur in it exactly
// once, so a break that no longer applies (the code moved on) is an error,
// never a silent pass.
package mutants

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Dir is where the catalogue lives, relative to the repository root.
const Dir = "e2e/mutants"

// ErrInvalid is wrapped by every error about a break that cannot be made
// as written.
var ErrInvalid = errors.New("invalid break")

// Mutant is one deliberate break of the driver or the guide's store.
type Mutant struct {
	// Name is the catalogue file's name without .yaml.
	Name string `json:"-"`
	// Promise is the sentence of the documents the break contradicts.
	Promise string `json:"promise"`
	// Document is the file (relative to the repository) that says it.
	Document string `json:"document"`
	// File is the file the break changes, relative to the repository: a
	// Go file is broken by an overlay, any other in a copy of the tree.
	File string `json:"file"`
	// Find is replaced by Replace; it occurs in File exactly once.
	Find    string `json:"find"`
	Replace string `json:"replace"`
	// Unit lists the packages (./driver/internal/node, ...) whose tests
	// must fail on the break.
	Unit []string `json:"unit"`
	// Scenarios lists the scenario numbers ("03") that must fail on it;
	// empty when no scenario can make the break observable (Why says so).
	Scenarios []string `json:"scenarios,omitempty"`
	// Why explains an empty Scenarios.
	Why string `json:"why,omitempty"`
	// Race runs its unit tests under the race detector (as make test runs
	// the driver's): a break that makes a data race.
	Race bool `json:"race,omitempty"`
}

var (
	nameRE     = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	scenarioRE = regexp.MustCompile(`^[0-9]{2}$`)
)

// Load reads every break of the catalogue under repo, sorted by name.
// A file with an unknown field is an error.
func Load(repo string) ([]Mutant, error) {
	files, err := filepath.Glob(filepath.Join(repo, Dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no breaks in %s", filepath.Join(repo, Dir))
	}
	ms := make([]Mutant, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var m Mutant
		if err := yaml.UnmarshalStrict(b, &m); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, f, err)
		}
		m.Name = strings.TrimSuffix(filepath.Base(f), ".yaml")
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b Mutant) int { return strings.Compare(a.Name, b.Name) })
	return ms, nil
}

// Check says whether m can be made in repo as written: every field set,
// the document and the scenarios there, Find in File exactly once.
func (m Mutant) Check(repo string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrInvalid, m.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case !nameRE.MatchString(m.Name):
		return bad("the file name must be lower-case words joined by dashes")
	case strings.TrimSpace(m.Promise) == "":
		return bad("promise is empty: quote the sentence the break contradicts")
	case m.Find == m.Replace:
		return bad("find and replace are the same: nothing is broken")
	case len(m.Unit) == 0:
		return bad("unit is empty: name the packages whose tests must catch it")
	case len(m.Scenarios) == 0 && strings.TrimSpace(m.Why) == "":
		return bad("no scenario and no why: say which scenario catches it, or why none can")
	}
	if _, err := os.Stat(filepath.Join(repo, m.Document)); err != nil || m.Document == "" {
		return bad("document %q: not in the repository", m.Document)
	}
	for _, p := range m.Unit {
		if !strings.HasPrefix(p, "./") {
			return bad("unit package %q: write it as ./path", p)
		}
		if fi, err := os.Stat(filepath.Join(repo, p)); err != nil || !fi.IsDir() {
			return bad("unit package %q: no such directory", p)
		}
	}
	for _, s := range m.Scenarios {
		if !scenarioRE.MatchString(s) {
			return bad("scenario %q: want its two-digit number", s)
		}
		if docs, _ := filepath.Glob(filepath.Join(repo, "scenarios", s+"-*.md")); len(docs) != 1 {
			return bad("scenario %s: no scenarios/%s-*.md", s, s)
		}
	}
	src, err := os.ReadFile(filepath.Join(repo, m.File))
	if err != nil {
		return bad("file: %v", err)
	}
	if n := bytes.Count(src, []byte(m.Find)); n != 1 {
		return bad("find occurs %d times in %s, want exactly once", n, m.File)
	}
	return nil
}

// Apply returns the content of m.File with the break made.
func (m Mutant) Apply(repo string) ([]byte, error) {
	if err := m.Check(repo); err != nil {
		return nil, err
	}
	src, err := os.ReadFile(filepath.Join(repo, m.File))
	if err != nil {
		return nil, err
	}
	return bytes.Replace(src, []byte(m.Find), []byte(m.Replace), 1), nil
}

// Overlay writes the broken file and a `go build -overlay` file that puts it
// in place of m.File into dir, and returns the overlay file's path.
func (m Mutant) Overlay(repo, dir string) (string, error) {
	broken, err := m.Apply(repo)
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(filepath.Join(repo, m.File))
	if err != nil {
		return "", err
	}
	brokenPath := filepath.Join(dir, m.Name+"."+filepath.Base(m.File))
	if err := os.WriteFile(brokenPath, broken, 0o644); err != nil {
		return "", err
	}
	b, err := json.Marshal(map[string]map[string]string{"Replace": {abs: brokenPath}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(dir, m.Name+".overlay.json")
	return overlay, os.WriteFile(overlay, b, 0o644)
}

// InTree reports whether m breaks a file the Go toolchain does not compile
// (a manifest, a chart template): an overlay cannot make such a break, so
// it is made in a copy of the work tree.
func (m Mutant) InTree() bool { return filepath.Ext(m.File) != ".go" }

// Tree copies into dir the files of repo that git knows (tracked, or
// untracked and not ignored), makes m there, makes the copy a git
// repository holding those files, and links dir/_out to repo's build
// outputs (images and clusters are cached there). Whatever dir held is
// replaced.
func (m Mutant) Tree(repo, dir string) error {
	broken, err := m.Apply(repo)
	if err != nil {
		return err
	}
	out, err := exec.Command("git", "-C", repo, "ls-files", "-z", "-co", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("list the work tree's files: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for name := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if err := copyFile(filepath.Join(repo, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, m.File), broken, 0o644); err != nil {
		return err
	}
	// The copy is a repository of its own: checks that ask git which
	// files the project has see the same ones.
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("git %s in the copy: %w: %s", args[0], err, out)
		}
	}
	abs, err := filepath.Abs(filepath.Join(repo, "_out"))
	if err != nil {
		return err
	}
	return os.Symlink(abs, filepath.Join(dir, "_out"))
}

// copyFile copies one file or symlink, keeping its mode; a file git lists
// but the work tree no longer has is left out.
func copyFile(from, to string) error {
	fi, err := os.Lstat(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		link, err := os.Readlink(from)
		if err != nil {
			return err
		}
		return os.Symlink(link, to)
	}
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, fi.Mode().Perm())
}
