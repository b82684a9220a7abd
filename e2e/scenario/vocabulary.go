// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"regexp"
	"strings"
	"time"
)

// stepDef is one entry of the step vocabulary.
type stepDef struct {
	// Name is the step's pattern as written in scenarios/README.md:
	// {placeholders} capture one word (a name, a number, or a $variable).
	Name    string
	Timeout time.Duration
	// Defines says the step must end with "as $name".
	Defines bool
	run     func(ctx context.Context, r *Run, a args) error
	re      *regexp.Regexp
}

// args are a step's captures with variables already substituted.
type args map[string]string

var placeholder = regexp.MustCompile(`\{([a-z]+)\}`)

func compile(defs []*stepDef) []*stepDef {
	for _, d := range defs {
		var b strings.Builder
		b.WriteString("^")
		last := 0
		for _, m := range placeholder.FindAllStringSubmatchIndex(d.Name, -1) {
			b.WriteString(regexp.QuoteMeta(d.Name[last:m[0]]))
			b.WriteString("(?P<" + d.Name[m[2]:m[3]] + `>\S+)`)
			last = m[1]
		}
		b.WriteString(regexp.QuoteMeta(d.Name[last:]) + "$")
		d.re = regexp.MustCompile(b.String())
	}
	return defs
}

// matchStep finds the vocabulary entry a line is an instance of.
func matchStep(text string) (*stepDef, map[string]string, bool) {
	for _, d := range vocabulary {
		m := d.re.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		out := map[string]string{}
		for i, n := range d.re.SubexpNames() {
			if n != "" {
				out[n] = m[i]
			}
		}
		return d, out, true
	}
	return nil, nil, false
}

// Vocabulary lists the step patterns, for documentation and tests.
func Vocabulary() []string {
	var out []string
	for _, d := range vocabulary {
		n := d.Name
		if d.Defines {
			n += " as $name"
		}
		out = append(out, n)
	}
	return out
}
