// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"errors"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

func TestBulkOutcomeTellsACutStreamFromARefusedWrite(t *testing.T) {
	line := func(i int) string {
		return `{"id":"p/b-` + string(rune('a'+i)) + `","k":"k` + string(rune('a'+i)) + `","v":"v","ver":1}` + "\n"
	}
	three := line(0) + line(1) + line(2)
	refused := errors.New("exit 1: put-bulk: 503 Service Unavailable")
	for _, tc := range []struct {
		name    string
		out     string
		execErr error
		recs    int
		cut     bool
		err     error
	}{
		{"all acknowledged, all arrived", three, nil, 3, false, nil},
		{"exit 0, the tail lost in transit", line(0) + line(1), nil, 2, true, nil},
		{"exit 0, cut inside a line", line(0) + line(1)[:10], nil, 1, true, nil},
		{"the client failed", line(0), refused, 1, false, refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, cut, err := bulkOutcome(tc.out, tc.execErr, 3)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
			} else {
				assert.NilError(t, err)
			}
			assert.Equal(t, len(recs), tc.recs, "records read from %q", strings.TrimSpace(tc.out))
			assert.Equal(t, cut, tc.cut)
		})
	}
}
