// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ValuesTable renders the chart's values.yaml as a Markdown table: every
// value (nested ones by their dotted path), its default, and the comment
// written above it. A mapping whose keys carry comments of their own is
// listed key by key; any other value is one row. A value with no comment is
// an error: every value a user may set says what it does.
func ValuesTable(valuesYAML []byte) (string, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(valuesYAML, &doc); err != nil {
		return "", fmt.Errorf("read values.yaml: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", fmt.Errorf("values.yaml is not a mapping")
	}
	var b strings.Builder
	b.WriteString("| value | default | what |\n|---|---|---|\n")
	if err := valueRows(&b, "", doc.Content[0]); err != nil {
		return "", err
	}
	return b.String(), nil
}

func valueRows(b *strings.Builder, prefix string, m *yaml.Node) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i], m.Content[i+1]
		path := prefix + key.Value
		if val.Kind == yaml.MappingNode && commented(val) {
			if err := valueRows(b, path+".", val); err != nil {
				return err
			}
			continue
		}
		def, err := flow(val)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		what := comment(key.HeadComment)
		if what == "" {
			return fmt.Errorf("value %s has no comment above it in values.yaml", path)
		}
		fmt.Fprintf(b, "| `%s` | `%s` | %s |\n", path, def, what)
	}
	return nil
}

// commented: some key of the mapping has a comment above it.
func commented(m *yaml.Node) bool {
	for i := 0; i < len(m.Content); i += 2 {
		if m.Content[i].HeadComment != "" {
			return true
		}
	}
	return false
}

// flow writes a value on one line, as YAML's flow style does.
func flow(n *yaml.Node) (string, error) {
	c := *n
	c.Style = yaml.FlowStyle
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	out, err := yaml.Marshal(&c)
	if err != nil {
		return "", err
	}
	return strings.ReplaceAll(strings.TrimSpace(string(out)), "|", `\|`), nil
}

// comment joins a comment block's lines, without their "#".
func comment(c string) string {
	var words []string
	for line := range strings.Lines(c) {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line != "" {
			words = append(words, line)
		}
	}
	return strings.ReplaceAll(strings.Join(words, " "), "|", `\|`)
}
