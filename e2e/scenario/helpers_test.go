package scenario

import (
	"os"
	"testing"

	"gotest.tools/v3/assert"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	assert.NilError(t, err)
	return string(b)
}
