// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package scenario reads the scenario documents in scenarios/ — Markdown
// that a person reads as the guide — and runs them against a cluster.
//
// A document is prose plus fenced blocks. The info string of each block
// says what it does:
//
//	```apply            YAML objects to create (or update), in the scenario's namespace
//	```apply refused    YAML objects the API server must refuse to create
//	```delete           YAML objects (kind and name) to delete
//	```expect OPTIONS   a partial object the cluster must come to match
//	```steps            one step per line from the vocabulary in steps.go
//
// Anything else fails the parse, with file:line, before any cluster work:
// an unknown block kind, step, option, field or variable. Variables are
// written $name; $ns, $pv and the image variables are predefined, and a step
// ending in "as $name" defines one for the blocks after it.
package scenario

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Doc is one parsed scenario document.
type Doc struct {
	// Name is the file name without .md: what SCENARIO= selects.
	Name  string
	Title string
	File  string
	Steps []Step
}

// Step is one executable unit: a block, or one line of a steps block.
type Step struct {
	File string
	Line int
	// Kind is apply, delete, expect, or the name of a vocabulary step.
	Kind string
	// Text is the step's source, for messages.
	Text string
	// Objects are the YAML documents of apply, delete and expect blocks.
	Objects []map[string]any
	// Expect holds the options of an expect block.
	Expect ExpectOptions
	// Args are a vocabulary step's captures, by name.
	Args map[string]string
	// Timeout is the step's own timeout (its default, or "within").
	Timeout time.Duration
	def     *stepDef
}

// Where is file:line, for messages.
func (s Step) Where() string { return fmt.Sprintf("%s:%d", s.File, s.Line) }

// ExpectOptions are the words after ```expect.
type ExpectOptions struct {
	// Within is how long the cluster has to come to match.
	Within time.Duration
	// For, if set, is how long the match must then keep holding.
	For time.Duration
	// Quantifier is "all" or "any": which selected objects must match.
	// Required when the object names none (a selection by labels).
	Quantifier string
	// Count, if >= 0, is how many objects the selection must hold.
	Count int
}

// Predefined variables, set by the runner for every scenario.
var Predefined = []string{"ns", "pv", "store_image", "probe_image"}

var variable = regexp.MustCompile(`\$([a-z][a-z0-9_]*)`)

// ParseDir parses every *.md in dir except README.md.
func ParseDir(dir string) ([]Doc, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var docs []Doc
	for _, f := range files {
		if filepath.Base(f) == "README.md" || strings.HasPrefix(filepath.Base(f), "_") {
			continue
		}
		d, err := ParseFile(f)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// ParseFile parses one document.
func ParseFile(path string) (Doc, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Doc{}, err
	}
	return Parse(path, raw)
}

// Parse parses a document's bytes; path is used in messages.
func Parse(path string, raw []byte) (Doc, error) {
	p := parser{file: path, defined: map[string]bool{}}
	for _, v := range Predefined {
		p.defined[v] = true
	}
	d := Doc{Name: strings.TrimSuffix(filepath.Base(path), ".md"), File: path}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if d.Title == "" && strings.HasPrefix(text, "# ") {
			d.Title = strings.TrimSpace(text[2:])
		}
		if !strings.HasPrefix(text, "```") {
			continue
		}
		info := strings.Fields(strings.TrimPrefix(text, "```"))
		start := line
		var body []string
		closed := false
		for sc.Scan() {
			line++
			if strings.HasPrefix(sc.Text(), "```") {
				closed = true
				break
			}
			body = append(body, sc.Text())
		}
		if !closed {
			return d, p.errorf(start, "block is not closed with ```")
		}
		steps, err := p.block(start, info, body)
		if err != nil {
			return d, err
		}
		d.Steps = append(d.Steps, steps...)
	}
	if d.Title == "" {
		return d, p.errorf(1, "no title: a scenario starts with a '# Title' line")
	}
	if len(d.Steps) == 0 {
		return d, p.errorf(1, "no blocks: a scenario needs at least one apply, expect or steps block")
	}
	return d, nil
}

type parser struct {
	file    string
	defined map[string]bool
}

func (p *parser) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.file, line, fmt.Sprintf(format, args...))
}

func (p *parser) block(line int, info, body []string) ([]Step, error) {
	if len(info) == 0 {
		return nil, p.errorf(line, "block has no kind; expected one of apply, delete, expect, steps")
	}
	switch info[0] {
	case "apply", "delete":
		kind := info[0]
		switch {
		case kind == "apply" && len(info) == 2 && info[1] == "refused":
			kind = "apply refused"
		case len(info) > 1:
			return nil, p.errorf(line, "%s takes no options (apply: only `refused`), got %q", info[0], strings.Join(info[1:], " "))
		}
		objs, err := p.objects(line, body)
		if err != nil {
			return nil, err
		}
		return []Step{{File: p.file, Line: line, Kind: kind, Text: "```" + kind, Objects: objs, Timeout: 30 * time.Second}}, nil
	case "expect":
		return p.expect(line, info[1:], body)
	case "steps":
		return p.steps(line, body)
	}
	return nil, p.errorf(line, "unknown block kind %q; expected one of apply, delete, expect, steps", info[0])
}

// objects parses YAML documents and checks their variables.
func (p *parser) objects(line int, body []string) ([]map[string]any, error) {
	for i, l := range body {
		if err := p.checkVars(line+1+i, l); err != nil {
			return nil, err
		}
	}
	var objs []map[string]any
	for _, doc := range splitYAML(body) {
		if strings.TrimSpace(doc.text) == "" {
			continue
		}
		var obj map[string]any
		if err := yaml.UnmarshalStrict([]byte(doc.text), &obj); err != nil {
			return nil, p.errorf(line+1+doc.offset, "YAML: %v", err)
		}
		if err := checkObject(obj); err != nil {
			return nil, p.errorf(line+1+doc.offset, "%v", err)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		return nil, p.errorf(line, "block holds no object")
	}
	return objs, nil
}

type yamlDoc struct {
	text   string
	offset int
}

func splitYAML(body []string) []yamlDoc {
	var docs []yamlDoc
	cur, offset := []string{}, 0
	for i, l := range body {
		if strings.TrimSpace(l) == "---" {
			docs = append(docs, yamlDoc{strings.Join(cur, "\n"), offset})
			cur, offset = nil, i+1
			continue
		}
		cur = append(cur, l)
	}
	return append(docs, yamlDoc{strings.Join(cur, "\n"), offset})
}

func (p *parser) checkVars(line int, text string) error {
	for _, m := range variable.FindAllStringSubmatch(text, -1) {
		if !p.defined[m[1]] {
			return p.errorf(line, "unknown variable $%s; defined so far: %s", m[1], p.definedList())
		}
	}
	return nil
}

func (p *parser) definedList() string {
	var names []string
	for n := range p.defined {
		names = append(names, "$"+n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (p *parser) expect(line int, opts, body []string) ([]Step, error) {
	e := ExpectOptions{Within: 30 * time.Second, Count: -1}
	for i := 0; i < len(opts); i++ {
		next := func() (string, error) {
			if i+1 >= len(opts) {
				return "", p.errorf(line, "expect option %q needs a value", opts[i])
			}
			i++
			return opts[i], nil
		}
		switch opts[i] {
		case "all", "any":
			e.Quantifier = opts[i]
		case "within", "for":
			v, err := next()
			if err != nil {
				return nil, err
			}
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, p.errorf(line, "expect %s %q: %v", opts[i-1], v, err)
			}
			if opts[i-1] == "within" {
				e.Within = d
			} else {
				e.For = d
			}
		case "count":
			v, err := next()
			if err != nil {
				return nil, err
			}
			if _, err := fmt.Sscanf(v, "%d", &e.Count); err != nil || e.Count < 0 {
				return nil, p.errorf(line, "expect count %q: want a number >= 0", v)
			}
		default:
			return nil, p.errorf(line, "unknown expect option %q; expected all, any, count N, within D, for D", opts[i])
		}
	}
	objs, err := p.objects(line, body)
	if err != nil {
		return nil, err
	}
	var steps []Step
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		if md["name"] == nil && e.Quantifier == "" && e.Count != 0 {
			return nil, p.errorf(line, "the expected %v names no object: say `expect all` or `expect any`", o["kind"])
		}
		steps = append(steps, Step{File: p.file, Line: line, Kind: "expect", Text: "```expect " + strings.Join(opts, " "),
			Objects: []map[string]any{o}, Expect: e, Timeout: e.Within + e.For})
	}
	return steps, nil
}

func (p *parser) steps(line int, body []string) ([]Step, error) {
	var out []Step
	for i, text := range body {
		n := line + 1 + i
		text = strings.TrimSpace(text)
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		s, err := p.step(n, text)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, p.errorf(line, "steps block holds no step")
	}
	return out, nil
}

var withinSuffix = regexp.MustCompile(`\s+within\s+(\S+)$`)
var asSuffix = regexp.MustCompile(`\s+as\s+\$([a-z][a-z0-9_]*)$`)

func (p *parser) step(line int, text string) (Step, error) {
	s := Step{File: p.file, Line: line, Text: text, Args: map[string]string{}}
	rest := text
	var within time.Duration
	if m := withinSuffix.FindStringSubmatch(rest); m != nil {
		d, err := time.ParseDuration(m[1])
		if err != nil {
			return s, p.errorf(line, "within %q: %v", m[1], err)
		}
		within = d
		rest = strings.TrimSuffix(rest, m[0])
	}
	var defines string
	if m := asSuffix.FindStringSubmatch(rest); m != nil {
		defines = m[1]
		rest = strings.TrimSuffix(rest, m[0])
	}
	if err := p.checkVars(line, rest); err != nil {
		return s, err
	}
	def, args, ok := matchStep(rest)
	if !ok {
		return s, p.errorf(line, "unknown step %q; the steps are listed in scenarios/README.md", rest)
	}
	if def.Defines != (defines != "") {
		if def.Defines {
			return s, p.errorf(line, "step %q must end with `as $name`", def.Name)
		}
		return s, p.errorf(line, "step %q defines no variable; remove `as $%s`", def.Name, defines)
	}
	if defines != "" {
		args["as"] = defines
		p.defined[defines] = true
	}
	s.Kind, s.Args, s.Timeout, s.def = def.Name, args, def.Timeout, def
	if within > 0 {
		s.Timeout = within
	}
	return s, nil
}
