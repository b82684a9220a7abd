// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The names README.md's guide uses, and what scenario 23 writes instead.
var guideNames = map[string]string{
	"example":                          "$ns",
	"example-store":                    "$pv",
	"example.com/replicated-store:1.0": "$store_image",
}

// TestTheGuideAsPrintedIsWhatScenario23Applies keeps README.md's guide and
// the scenario that runs it the same objects, names aside.
func TestTheGuideAsPrintedIsWhatScenario23Applies(t *testing.T) {
	readme := readFile(t, filepath.Join(scenariosDir(), "..", "README.md"))
	_, after, ok := strings.Cut(readme, "## The guide in brief")
	assert.Assert(t, ok, "README.md has no section \"The guide in brief\"")
	_, block, ok := strings.Cut(after, "```yaml\n")
	assert.Assert(t, ok, "README.md's guide has no yaml block")
	block, _, _ = strings.Cut(block, "```")
	printed := decodeAll(t, block)
	for i := range printed {
		printed[i] = substituteValue(printed[i], func(s string) string {
			if n, ok := guideNames[s]; ok {
				return n
			}
			return s
		}).(map[string]any)
	}

	raw, err := os.ReadFile(filepath.Join(scenariosDir(), "23-the-guide-as-printed.md"))
	assert.NilError(t, err)
	doc, err := Parse("23-the-guide-as-printed.md", raw)
	assert.NilError(t, err)
	assert.Assert(t, len(doc.Steps) > 0 && doc.Steps[0].Kind == "apply", "scenario 23 must start by applying the guide")
	assert.Assert(t, cmp.Equal(printed, doc.Steps[0].Objects), "README.md's guide and scenario 23 differ (-README +scenario):\n%s",
		cmp.Diff(printed, doc.Steps[0].Objects))
}

func decodeAll(t *testing.T, text string) []map[string]any {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(text)), 4096)
	var out []map[string]any
	for {
		var o map[string]any
		if err := dec.Decode(&o); err != nil {
			assert.Assert(t, err.Error() == "EOF", "README.md's guide: %v", err)
			return out
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
}

// TestTheGuidesPreferenceIsWhatScenario40Applies keeps README.md's optional
// block (the second yaml block of the guide) and the affinity scenario 40's
// step "make deployment ... prefer the nodes that hold a copy" patches in
// the same, names aside.
func TestTheGuidesPreferenceIsWhatScenario40Applies(t *testing.T) {
	readme := readFile(t, filepath.Join(scenariosDir(), "..", "README.md"))
	_, after, ok := strings.Cut(readme, "## The guide in brief")
	assert.Assert(t, ok, "README.md has no section \"The guide in brief\"")
	after, _, _ = strings.Cut(after, "\n## ")
	blocks := strings.Split(after, "```yaml\n")
	assert.Assert(t, len(blocks) == 3, "README.md's guide has %d yaml blocks, want 2 (the guide, the optional preference)", len(blocks)-1)
	block, _, _ := strings.Cut(blocks[2], "```")
	var printed map[string]any
	assert.NilError(t, utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(block), 4096).Decode(&printed))
	assert.Assert(t, cmp.Equal(printed, preferCopies("example-store")), "README.md's preference and scenario 40's differ (-README +scenario):\n%s",
		cmp.Diff(printed, preferCopies("example-store")))
}
