// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

// scenariosDir is relative to this package's folder, where go test runs
// (the build may trim source paths, so runtime.Caller would not say).
func scenariosDir() string {
	return filepath.Join("..", "..", "scenarios")
}

// benchDir holds the documents make bench-e2e runs for its figures.
func benchDir() string {
	return filepath.Join("..", "bench")
}

// TestEveryScenarioParses keeps a broken document out of main: make test
// parses every scenario, and every document the bench runs, without a
// cluster.
func TestEveryScenarioParses(t *testing.T) {
	for dir, least := range map[string]int{scenariosDir(): 11, benchDir(): 2} {
		docs, err := ParseDir(dir)
		assert.NilError(t, err)
		assert.Assert(t, len(docs) >= least, "found %d documents in %s", len(docs), dir)
		for _, d := range docs {
			assert.Check(t, d.Title != "", "%s has no title", d.File)
			assert.Check(t, len(d.Steps) > 0, "%s has no steps", d.File)
		}
	}
}

// TestReadmeListsEveryScenarioAndStep keeps scenarios/README.md true.
func TestReadmeListsEveryScenarioAndStep(t *testing.T) {
	readme := readFile(t, filepath.Join(scenariosDir(), "README.md"))
	docs, err := ParseDir(scenariosDir())
	assert.NilError(t, err)
	for _, d := range docs {
		assert.Check(t, strings.Contains(readme, "("+d.Name+".md)"), "README.md does not link %s", d.Name)
	}
	for _, v := range Vocabulary() {
		assert.Check(t, strings.Contains(readme, "`"+v+"`"), "README.md does not document the step %q", v)
	}
}

func TestParseRefusesWithFileAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown block kind", "# T\n\n```yaml\na: 1\n```\n", "x.md:3: unknown block kind \"yaml\""},
		{"no block kind", "# T\n```\na\n```\n", "x.md:2: block has no kind"},
		{"unclosed block", "# T\n```steps\nscale deployment store to 1\n", "x.md:2: block is not closed"},
		{"unknown step", "# T\n```steps\nscale the store to 1\n```\n", "x.md:3: unknown step \"scale the store to 1\""},
		{"unknown variable", "# T\n```steps\ndelete pod $nobody\n```\n", "x.md:3: unknown variable $nobody"},
		{"variable used before defined", "# T\n```steps\ndelete pod $p\npick a store pod as $p\n```\n", "x.md:3: unknown variable $p"},
		{"missing as", "# T\n```steps\npick a store pod\n```\n", "x.md:3: step \"pick a store pod\" must end with `as $name`"},
		{"needless as", "# T\n```steps\ncordon $ns as $x\n```\n", "x.md:3: step \"cordon {node}\" defines no variable"},
		{"bad within", "# T\n```steps\nwait deployment store ready 3 within soon\n```\n", "x.md:3: within \"soon\""},
		{"unknown field", "# T\n```apply\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeNmae: x}\n```\n", "x.md:3: Pod: json: unknown field \"nodeNmae\""},
		{"unknown kind", "# T\n```apply\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n```\n", "x.md:3: unknown kind \"Secret\""},
		{"wrong apiVersion", "# T\n```apply\napiVersion: v2\nkind: Pod\nmetadata: {name: s}\n```\n", "x.md:3: Pod has apiVersion v1"},
		{"selection without quantifier", "# T\n```expect\nkind: Pod\nmetadata: {labels: {app: store}}\n```\n", "x.md:2: the expected Pod names no object: say `expect all` or `expect any`"},
		{"unknown expect option", "# T\n```expect eventually\nkind: Pod\nmetadata: {name: p}\n```\n", "x.md:2: unknown expect option \"eventually\""},
		{"no title", "```steps\nscale deployment store to 1\n```\n", "x.md:1: no title"},
		{"empty steps", "# T\n```steps\n# only a comment\n```\n", "x.md:2: steps block holds no step"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.md", []byte(tc.doc))
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestParseDefinesVariablesAndTimeouts(t *testing.T) {
	d, err := Parse("x.md", []byte("# T\n```steps\npick a store pod as $p\ndelete pod $p within 5s\n```\n"))
	assert.NilError(t, err)
	assert.Equal(t, len(d.Steps), 2)
	assert.Equal(t, d.Steps[0].Args["as"], "p")
	assert.Equal(t, d.Steps[1].Timeout.String(), "5s")
	assert.Equal(t, d.Steps[1].Where(), "x.md:4")
}

func TestDiff(t *testing.T) {
	want := map[string]any{"status": map[string]any{"phase": "Running",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}}
	got := map[string]any{"status": map[string]any{"phase": "Running", "podIP": "10.0.0.1",
		"conditions": []any{map[string]any{"type": "Scheduled", "status": "True"}, map[string]any{"type": "Ready", "status": "True"}}}}
	assert.Equal(t, Diff(want, got), "")

	got["status"].(map[string]any)["phase"] = "Pending"
	diff := Diff(want, got)
	assert.Assert(t, strings.Contains(diff, `-`) && strings.Contains(diff, "Pending"), diff)
	assert.Assert(t, !strings.Contains(diff, "podIP"), "the diff shows only what was expected: %s", diff)
}

// TestReadmeStepTableIsTheVocabulary keeps the step table in
// scenarios/README.md equal to the vocabulary, in order, with each step's
// default timeout. UPDATE_README=1 rewrites the table.
func TestReadmeStepTableIsTheVocabulary(t *testing.T) {
	path := filepath.Join(scenariosDir(), "README.md")
	readme := readFile(t, path)
	const head = "| step | default timeout |\n|---|---|\n"
	start := strings.Index(readme, head)
	assert.Assert(t, start >= 0, "README.md has no step table starting %q", head)
	end := start + len(head)
	for end < len(readme) && strings.HasPrefix(readme[end:], "| `") {
		end += strings.Index(readme[end:], "\n") + 1
	}
	var b strings.Builder
	b.WriteString(head)
	for _, d := range vocabulary {
		name := d.Name
		if d.Defines {
			name += " as $name"
		}
		fmt.Fprintf(&b, "| `%s` | %s |\n", name, d.Timeout)
	}
	if os.Getenv("UPDATE_README") == "1" {
		assert.NilError(t, os.WriteFile(path, []byte(readme[:start]+b.String()+readme[end:]), 0o644))
		return
	}
	assert.Equal(t, readme[start:end], b.String(), "run UPDATE_README=1 go test -run StepTable ./e2e/scenario to rewrite the table")
}

// TestWriteStepsHaveTheWriteFloor: a step that writes through the store
// waits for every peer to acknowledge, so none may default to less than
// writeTimeout (a cold CI run cut "store write 100000 records in bulk" at
// 30 s, a failed observation, on a machine at 0 % idle).
func TestWriteStepsHaveTheWriteFloor(t *testing.T) {
	var short []string
	writes := 0
	for _, d := range vocabulary {
		if !strings.HasPrefix(d.Name, "store write ") && !strings.HasPrefix(d.Name, "store overwrite ") {
			continue
		}
		writes++
		if d.Timeout < writeTimeout {
			short = append(short, fmt.Sprintf("%q: %s", d.Name, d.Timeout))
		}
	}
	assert.Assert(t, writes >= 6, "expected the vocabulary's six store write steps, saw %d", writes)
	assert.Assert(t, len(short) == 0, "write steps below the %s floor: %s", writeTimeout, strings.Join(short, "; "))
}
