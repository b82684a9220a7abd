// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package mutants

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Verdict is what a run of the checks made of one break.
type Verdict string

const (
	// Caught: a check that must catch the break failed.
	Caught Verdict = "caught"
	// Survived: every check passed with the break made: a missing check.
	Survived Verdict = "SURVIVED"
	// Unbuildable: the break does not compile, so it proves nothing.
	Unbuildable Verdict = "UNBUILDABLE"
	// Inconclusive: a scenario failed, but not as a broken promise (a step
	// failed, or the check could not look).
	Inconclusive Verdict = "INCONCLUSIVE"
)

// Result is the outcome of one break.
type Result struct {
	Mutant  Mutant
	Verdict Verdict
	// By names what caught it: failed tests, or the scenarios' verdicts.
	By   []string
	Took time.Duration
	// Log is the file that holds the whole output.
	Log string
}

// UnitTimeout bounds one break's unit tests: a break that makes a test
// hang is caught by go test's own timeout.
const UnitTimeout = 5 * time.Minute

// BaselineTimeout bounds the run with no break made: every package the
// catalogue names at once, which on a 2-core machine beside make e2e (as
// .ci/run runs it, at the lowest priority) takes several times as long as
// one break's few packages; at UnitTimeout the tree package's real
// removals of deep trees were seen to pass it with nothing broken.
const BaselineTimeout = 20 * time.Minute

var (
	failedTest = regexp.MustCompile(`^--- FAIL: (\S+)`)
	timedOut   = regexp.MustCompile(`^panic: test timed out`)
	notBuilt   = regexp.MustCompile(`\[(build|setup) failed\]|^# liken\.sh/`)
)

// RunUnit runs the tests of m.Unit with m made, writing the overlay and the
// output into dir.
func RunUnit(ctx context.Context, repo string, m Mutant, dir string) Result {
	start := time.Now()
	res, w, ok := prepare(repo, m, dir, "unit")
	if !ok {
		return res
	}
	flags := w.flags
	if m.Race {
		flags = append(slices.Clone(flags), "-race")
	}
	out, err := goTest(ctx, w.dir, flags, UnitTimeout, m.Unit)
	_ = os.WriteFile(res.Log, out, 0o644)
	res.Took = time.Since(start)
	switch {
	case err == nil:
		res.Verdict = Survived
	case hasLine(out, notBuilt):
		res.Verdict, res.By = Unbuildable, []string{"does not compile (see " + res.Log + ")"}
	default:
		res.Verdict, res.By = Caught, failures(out)
	}
	return res
}

// Baseline runs the tests of every package the catalogue names, with no
// break: a test that fails without one would count every break as caught.
func Baseline(ctx context.Context, repo string, ms []Mutant, dir string) error {
	var pkgs []string
	seen := map[string]bool{}
	for _, m := range ms {
		for _, p := range m.Unit {
			if !seen[p] {
				seen[p] = true
				pkgs = append(pkgs, p)
			}
		}
	}
	out, err := goTest(ctx, repo, nil, BaselineTimeout, pkgs)
	if err != nil {
		log := filepath.Join(dir, "baseline.log")
		_ = os.WriteFile(log, out, 0o644)
		return fmt.Errorf("the tests fail with no break made (%s; failed: %s): fix them first: %w",
			log, strings.Join(failures(out), ", "), err)
	}
	return nil
}

// RunScenarios runs `make e2e SCENARIO=…` with m made in the driver and
// fixture binaries the harness builds (GOFLAGS carries the overlay), on
// the clusters a kept run left (E2E_KEEP=1). It is caught only when a
// scenario reports a broken promise.
func RunScenarios(ctx context.Context, repo string, m Mutant, scenarios []string, dir string) Result {
	start := time.Now()
	res, w, ok := prepare(repo, m, dir, "e2e")
	if !ok {
		return res
	}
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "e2e", "SCENARIO="+strings.Join(scenarios, ","))
	cmd.Dir = w.dir
	cmd.Env = append(os.Environ(), "E2E_KEEP=1",
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" "+strings.Join(w.flags, " ")))
	out, err := cmd.CombinedOutput()
	_ = os.WriteFile(res.Log, out, 0o644)
	res.Took = time.Since(start)
	broken := verdictLines(out, "PROMISE BROKEN")
	switch {
	case err == nil:
		res.Verdict = Survived
	case len(broken) > 0:
		res.Verdict, res.By = Caught, broken
	default:
		res.Verdict, res.By = Inconclusive, append(verdictLines(out, "FAILED"), "make e2e: "+err.Error())
	}
	return res
}

// where is where a break's checks run: the work tree with an overlay, or
// a broken copy of the tree.
type where struct {
	dir   string
	flags []string
}

// prepare makes m (an overlay in dir, or a copy of the tree under dir) and
// names the log of a run of kind; a break that cannot be made is the
// result, Unbuildable.
func prepare(repo string, m Mutant, dir, kind string) (Result, where, bool) {
	res := Result{Mutant: m, Log: filepath.Join(dir, m.Name+"."+kind+".log")}
	w := where{dir: repo}
	var err error
	if m.InTree() {
		w.dir = filepath.Join(dir, m.Name+".tree")
		err = m.Tree(repo, w.dir)
	} else {
		var overlay string
		overlay, err = m.Overlay(repo, dir)
		w.flags = []string{"-overlay=" + overlay}
	}
	if err != nil {
		res.Verdict, res.By = Unbuildable, []string{err.Error()}
		return res, w, false
	}
	return res, w, true
}

// goTest runs go test on pkgs (./paths from repo), each in its own
// module: a fixture with a go.mod of its own (fixtures/nats) is tested from
// its module's directory, as make test does. The outputs are joined; the
// error is the first module's that failed.
func goTest(ctx context.Context, repo string, flags []string, timeout time.Duration, pkgs []string) ([]byte, error) {
	var (
		mods  []string
		byMod = map[string][]string{}
	)
	for _, p := range pkgs {
		mod, rel := moduleOf(repo, p)
		if _, ok := byMod[mod]; !ok {
			mods = append(mods, mod)
		}
		byMod[mod] = append(byMod[mod], rel)
	}
	var (
		all   []byte
		first error
	)
	for _, mod := range mods {
		args := append(append([]string{"test"}, flags...), "-vet=off", "-count=1", "-timeout="+timeout.String())
		out, err := goCommand(ctx, filepath.Join(repo, mod), append(args, byMod[mod]...)...)
		all = append(all, out...)
		if err != nil && first == nil {
			first = err
		}
	}
	return all, first
}

// moduleOf finds the module that holds the package ./p of repo: the
// nearest directory at or above it with a go.mod, and p relative to it.
func moduleOf(repo, p string) (mod, rel string) {
	dir := filepath.Clean(p)
	for d := dir; d != "." && d != "/"; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(repo, d, "go.mod")); err == nil {
			r, _ := filepath.Rel(d, dir)
			return d, "./" + filepath.ToSlash(r)
		}
	}
	return ".", p
}

func goCommand(ctx context.Context, repo string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repo
	if slices.Contains(args, "-race") {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1") // the race detector needs cgo
	}
	return cmd.CombinedOutput()
}

// failures names the top-level tests that failed, and a timeout.
func failures(out []byte) []string {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := failedTest.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		} else if timedOut.MatchString(line) {
			names = append(names, "a test timed out (hung)")
		}
	}
	if len(names) == 0 {
		names = []string{"go test failed (see the log)"}
	}
	return names
}

func hasLine(out []byte, re *regexp.Regexp) bool {
	for line := range bytes.SplitSeq(out, []byte("\n")) {
		if re.Match(line) {
			return true
		}
	}
	return false
}

// verdictLines are the failed steps whose verdict contains word, as the
// suite's summary at the end of the run lists them ("doc — where: step",
// then the verdict in brackets); the test log says each once more before.
func verdictLines(out []byte, word string) []string {
	var lines []string
	prev := ""
	for line := range strings.SplitSeq(string(out), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") && strings.Contains(t, word) && strings.Contains(prev, " — ") {
			lines = append(lines, strings.TrimSpace(prev)+" ("+word+")")
		}
		prev = line
	}
	return lines
}
