// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Command mutants runs the project's catalogue of deliberate breaks
// (e2e/mutants/) against the checks that must catch them, and prints each
// break's verdict and the score:
//
//	mutants check               every break applies as written (no test run)
//	mutants unit [-run RE]      against the unit tests each break names (make mutants-unit)
//	mutants scenario [-run RE] [-scenario 03,04]
//	                            against the scenarios each break names, on
//	                            kept e2e clusters (make mutants)
//
// The exit status is 0 only when every break it ran was caught.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"liken.sh/per-node/e2e/internal/mutants"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	run := fs.String("run", "", "only the breaks whose names match this regular expression")
	jobs := fs.Int("j", 2*runtime.NumCPU(), "breaks tested at once (unit: mostly waiting on the tests' own timeouts)")
	only := fs.String("scenario", "", "only these scenarios, comma-separated (scenario)")
	out := fs.String("out", "_out/mutants", "where overlays and logs go")
	_ = fs.Parse(os.Args[2:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ms, err := selected(*run)
	if err != nil {
		fail(err)
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		fail(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err)
	}
	var results []mutants.Result
	switch os.Args[1] {
	case "check":
		for _, m := range ms {
			if err := m.Check("."); err != nil {
				fail(err)
			}
		}
		fmt.Printf("mutants: %d breaks, each applies as written\n", len(ms))
		return
	case "unit":
		if err := mutants.Baseline(ctx, ".", ms, dir); err != nil {
			fail(err)
		}
		results = parallel(ms, *jobs, func(m mutants.Mutant) mutants.Result { return mutants.RunUnit(ctx, ".", m, dir) })
	case "scenario":
		for _, m := range ms {
			if s := scenarios(m, *only); len(s) > 0 {
				results = append(results, mutants.RunScenarios(ctx, ".", m, s, dir))
				report(results[len(results)-1])
			}
		}
	default:
		usage()
	}
	os.Exit(score(os.Args[1], results, len(ms)))
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: mutants check|unit|scenario [-run RE] [-j N] [-scenario 03,04] [-out DIR]")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mutants:", err)
	os.Exit(1)
}

func selected(run string) ([]mutants.Mutant, error) {
	ms, err := mutants.Load(".")
	if err != nil || run == "" {
		return ms, err
	}
	re, err := regexp.Compile(run)
	if err != nil {
		return nil, fmt.Errorf("-run: %w", err)
	}
	return slices.DeleteFunc(ms, func(m mutants.Mutant) bool { return !re.MatchString(m.Name) }), nil
}

// scenarios are the scenarios of m that only (if set) lets run.
func scenarios(m mutants.Mutant, only string) []string {
	if only == "" {
		return m.Scenarios
	}
	want := strings.Split(only, ",")
	return slices.DeleteFunc(slices.Clone(m.Scenarios), func(s string) bool { return !slices.Contains(want, s) })
}

// parallel runs fn over ms, jobs at a time, printing each result as it
// comes, and returns the results in catalogue order.
func parallel(ms []mutants.Mutant, jobs int, fn func(mutants.Mutant) mutants.Result) []mutants.Result {
	results := make([]mutants.Result, len(ms))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, jobs)
	for i, m := range ms {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = fn(m)
			mu.Lock()
			report(results[i])
			mu.Unlock()
		})
	}
	wg.Wait()
	return results
}

func report(r mutants.Result) {
	by := r.By
	if len(by) > 3 {
		by = append(by[:3:3], fmt.Sprintf("and %d more", len(r.By)-3))
	}
	fmt.Printf("%-12s %-40s %6s  %s\n", r.Verdict, r.Mutant.Name, r.Took.Round(time.Second), strings.Join(by, ", "))
	if r.Verdict == mutants.Survived {
		fmt.Printf("             promise: %s\n             (%s; a check of it is missing; log: %s)\n",
			strings.TrimSpace(r.Mutant.Promise), r.Mutant.Document, r.Log)
	}
}

// score prints the closing line and returns the exit status.
func score(kind string, results []mutants.Result, catalogue int) int {
	count := map[mutants.Verdict]int{}
	for _, r := range results {
		count[r.Verdict]++
	}
	pct := 0.0
	if len(results) > 0 {
		pct = 100 * float64(count[mutants.Caught]) / float64(len(results))
	}
	fmt.Printf("\nmutants %s: %d of %d breaks caught (%.0f%%); %d survived, %d unbuildable, %d inconclusive; %d in the catalogue selected\n",
		kind, count[mutants.Caught], len(results), pct, count[mutants.Survived], count[mutants.Unbuildable], count[mutants.Inconclusive], catalogue)
	if len(results) == 0 || count[mutants.Caught] != len(results) {
		return 1
	}
	return 0
}
