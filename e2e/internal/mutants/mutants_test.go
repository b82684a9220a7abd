// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package mutants

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// TestEveryBreakOfTheCatalogueApplies keeps the catalogue from rotting: a
// break whose code moved on must be written again, not silently skipped.
func TestEveryBreakOfTheCatalogueApplies(t *testing.T) {
	repo := filepath.Join("..", "..", "..")
	ms, err := Load(repo)
	assert.NilError(t, err)
	assert.Assert(t, len(ms) >= 25, "the catalogue has %d breaks, the project keeps at least 25", len(ms))
	for _, m := range ms {
		t.Run(m.Name, func(t *testing.T) {
			assert.NilError(t, m.Check(repo))
		})
	}
}

func TestABreakThatCannotBeMadeAsWrittenIsRefused(t *testing.T) {
	good := Mutant{Name: "holder-off", Promise: "one holder", Document: "scenarios/03-one.md",
		File: "a.go", Find: "if ok {", Replace: "if false {", Unit: []string{"./pkg"}, Scenarios: []string{"03"}}
	for _, tc := range []struct {
		name   string
		change func(*Mutant)
		src    string
	}{
		{name: "find not in the file", change: func(m *Mutant) { m.Find = "if held {" }},
		{name: "find twice in the file", src: "if ok {\n}\nif ok {\n}\n"},
		{name: "nothing broken", change: func(m *Mutant) { m.Replace = m.Find }},
		{name: "no promise", change: func(m *Mutant) { m.Promise = " " }},
		{name: "no document", change: func(m *Mutant) { m.Document = "scenarios/99-none.md" }},
		{name: "no unit package", change: func(m *Mutant) { m.Unit = nil }},
		{name: "unit package not there", change: func(m *Mutant) { m.Unit = []string{"./nope"} }},
		{name: "unit package not relative", change: func(m *Mutant) { m.Unit = []string{"pkg"} }},
		{name: "scenario not there", change: func(m *Mutant) { m.Scenarios = []string{"07"} }},
		{name: "scenario not a number", change: func(m *Mutant) { m.Scenarios = []string{"3"} }},
		{name: "no scenario and no why", change: func(m *Mutant) { m.Scenarios = nil }},
		{name: "file not there", change: func(m *Mutant) { m.File = "b.go" }},
		{name: "bad name", change: func(m *Mutant) { m.Name = "Holder_Off" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := fakeRepo(t, tc.src)
			m := good
			if tc.src == "" {
				assert.NilError(t, m.Check(repo), "the good break must apply before it is spoiled")
			}
			if tc.change != nil {
				tc.change(&m)
			}
			err := m.Check(repo)
			assert.Assert(t, errors.Is(err, ErrInvalid), "want ErrInvalid, got %v", err)
			_, err = m.Apply(repo)
			assert.Assert(t, errors.Is(err, ErrInvalid), "Apply: want ErrInvalid, got %v", err)
		})
	}
}

func TestOverlayPutsTheBrokenFileInPlaceOfTheRealOne(t *testing.T) {
	repo := fakeRepo(t, "")
	m := Mutant{Name: "holder-off", Promise: "p", Document: "scenarios/03-one.md", File: "a.go",
		Find: "if ok {", Replace: "if false {", Unit: []string{"./pkg"}, Why: "none can"}
	dir := t.TempDir()
	overlay, err := m.Overlay(repo, dir)
	assert.NilError(t, err)
	var o struct{ Replace map[string]string }
	b, err := os.ReadFile(overlay)
	assert.NilError(t, err)
	assert.NilError(t, json.Unmarshal(b, &o))
	real, err := filepath.Abs(filepath.Join(repo, "a.go"))
	assert.NilError(t, err)
	assert.Assert(t, is.Len(o.Replace, 1))
	broken, err := os.ReadFile(o.Replace[real])
	assert.NilError(t, err, "the overlay must replace %s; it holds %v", real, o.Replace)
	assert.Equal(t, string(broken), "package a\n\nfunc f(ok bool) {\n\tif false {\n\t}\n}\n")
	src, err := os.ReadFile(real)
	assert.NilError(t, err)
	assert.Assert(t, strings.Contains(string(src), "if ok {"), "the work tree must not change")
}

func TestLoadRefusesUnknownFields(t *testing.T) {
	repo := fakeRepo(t, "")
	assert.NilError(t, os.WriteFile(filepath.Join(repo, Dir, "typo.yaml"), []byte("promise: x\nscenario: [\"03\"]\n"), 0o644))
	_, err := Load(repo)
	assert.Assert(t, errors.Is(err, ErrInvalid), "a misspelt field must be refused, got %v", err)
}

func TestFailuresNamesTheTestsThatFailed(t *testing.T) {
	out := "=== RUN   TestA\n--- FAIL: TestA (0.01s)\n    --- FAIL: TestA/sub (0.00s)\n--- PASS: TestB\n" +
		"panic: test timed out after 5m0s\nFAIL\tliken.sh/per-node/x\t300.1s\n"
	assert.DeepEqual(t, failures([]byte(out)), []string{"TestA", "a test timed out (hung)"})
	assert.Assert(t, hasLine([]byte("ok\nFAIL\tliken.sh/x [build failed]\n"), notBuilt))
	assert.Assert(t, !hasLine([]byte("--- FAIL: TestX\nFAIL\tliken.sh/x\t1s\n"), notBuilt))
}

// fakeRepo is a repository with one Go file (src, or a default with one
// "if ok {"), a scenario 03 and a package directory.
func fakeRepo(t *testing.T, src string) string {
	t.Helper()
	repo := t.TempDir()
	if src == "" {
		src = "package a\n\nfunc f(ok bool) {\n\tif ok {\n\t}\n}\n"
	}
	for _, d := range []string{"scenarios", "pkg", Dir} {
		assert.NilError(t, os.MkdirAll(filepath.Join(repo, d), 0o755))
	}
	assert.NilError(t, os.WriteFile(filepath.Join(repo, "a.go"), []byte(src), 0o644))
	assert.NilError(t, os.WriteFile(filepath.Join(repo, "scenarios", "03-one.md"), []byte("# one\n"), 0o644))
	return repo
}

// A scenario's broken promise is counted once, from the summary at the end
// of the run, not again from the test log's copy of it.
func TestVerdictLinesAreTheSummarys(t *testing.T) {
	out := "    run.go:83: \n        /s/03-one.md:48: step failed after 30s: event FailedMount names $holder\n" +
		"        [PROMISE BROKEN: the check looked]\n" +
		"e2e: the steps that failed:\n03-one — /s/03-one.md:48: event FailedMount names $holder\n" +
		"    [PROMISE BROKEN: the check looked]\n    timed out\n" +
		"04-two — /s/04-two.md:9: a write is refused\n    [STEP FAILED: an action failed]\n"
	assert.DeepEqual(t, verdictLines([]byte(out), "PROMISE BROKEN"),
		[]string{"03-one — /s/03-one.md:48: event FailedMount names $holder (PROMISE BROKEN)"})
	assert.DeepEqual(t, verdictLines([]byte(out), "FAILED"),
		[]string{"04-two — /s/04-two.md:9: a write is refused (FAILED)"})
}

// A break of a file Go does not compile (a manifest) is made in a copy of
// the tree that git knows: the copy holds the break and every other file
// the repository has, is a repository of its own, and the work tree does
// not change.
func TestTreeMakesABreakOfAManifestInACopy(t *testing.T) {
	repo := fakeRepo(t, "")
	manifest := "rules:\n  - verbs: [get]\n"
	assert.NilError(t, os.WriteFile(filepath.Join(repo, "role.yaml"), []byte(manifest), 0o644))
	assert.NilError(t, os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("/ignored\n"), 0o644))
	assert.NilError(t, os.WriteFile(filepath.Join(repo, "ignored"), []byte("build output"), 0o644))
	for _, args := range [][]string{{"init", "-q"}, {"add", "a.go", ".gitignore"}} {
		out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput()
		assert.NilError(t, err, "%s", out)
	}
	m := Mutant{Name: "role-deletes", Promise: "p", Document: "scenarios/03-one.md", File: "role.yaml",
		Find: "[get]", Replace: "[get, delete]", Unit: []string{"./pkg"}, Why: "none can"}
	assert.Assert(t, m.InTree())
	dir := filepath.Join(t.TempDir(), "copy")
	assert.NilError(t, m.Tree(repo, dir))

	broken, err := os.ReadFile(filepath.Join(dir, "role.yaml"))
	assert.NilError(t, err)
	assert.Equal(t, string(broken), "rules:\n  - verbs: [get, delete]\n")
	src, err := os.ReadFile(filepath.Join(repo, "role.yaml"))
	assert.NilError(t, err)
	assert.Equal(t, string(src), manifest, "the work tree must not change")
	_, err = os.Stat(filepath.Join(dir, "a.go"))
	assert.NilError(t, err, "a tracked file is missing from the copy")
	_, err = os.Stat(filepath.Join(dir, "ignored"))
	assert.Assert(t, os.IsNotExist(err), "an ignored file was copied: %v", err)
	out, err := exec.Command("git", "-C", dir, "ls-files").Output()
	assert.NilError(t, err)
	assert.DeepEqual(t, strings.Fields(string(out)), []string{".gitignore", "a.go", "role.yaml", "scenarios/03-one.md"})
	link, err := os.Readlink(filepath.Join(dir, "_out"))
	assert.NilError(t, err)
	assert.Equal(t, link, filepath.Join(repo, "_out"))
}

// TestPackagesAreTestedInTheirOwnModule: a package under a directory with
// a go.mod of its own is run from that module, the rest from the root.
func TestPackagesAreTestedInTheirOwnModule(t *testing.T) {
	repo := t.TempDir()
	for _, d := range []string{"driver/internal/node", "fixtures/nats/natscheck", "fixtures/store"} {
		assert.NilError(t, os.MkdirAll(filepath.Join(repo, d), 0o755))
	}
	for _, m := range []string{"go.mod", "fixtures/nats/go.mod"} {
		assert.NilError(t, os.WriteFile(filepath.Join(repo, m), []byte("module x\n"), 0o644))
	}
	for _, tc := range []struct{ pkg, mod, rel string }{
		{"./driver/internal/node", ".", "./driver/internal/node"},
		{"./fixtures/store", ".", "./fixtures/store"},
		{"./fixtures/nats/natscheck", "fixtures/nats", "./natscheck"},
		{"./fixtures/nats", "fixtures/nats", "./."},
	} {
		mod, rel := moduleOf(repo, tc.pkg)
		assert.Check(t, mod == tc.mod && rel == tc.rel, "%s: want module %s, package %s; got %s, %s", tc.pkg, tc.mod, tc.rel, mod, rel)
	}
}
