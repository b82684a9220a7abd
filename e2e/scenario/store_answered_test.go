// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"gotest.tools/v3/assert"
	utilexec "k8s.io/client-go/util/exec"
)

// An exec's error is the store's answer only when the store's client ran
// and failed, or kubelet says the pod has no store container; anything
// else says nothing of the store (a failed observation, retried).
func TestOnlyTheStoresOwnFailureIsItsAnswer(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	exit1 := fmt.Errorf("exec [/store client get k] in store-0: %w: 404", utilexec.CodeExitError{Err: errors.New("command terminated with exit code 1"), Code: 1})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"the_client_ran_and_failed", context.Background(), exit1, true},
		{"no_store_container", context.Background(), errors.New(`unable to upgrade connection: container not found ("store")`), true},
		{"the_exec_stream_broke", context.Background(), errors.New("error dialing backend: EOF"), false},
		{"the_api_server_did_not_answer", context.Background(), context.DeadlineExceeded, false},
		{"cut_short_by_the_caller", cancelled, exit1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, storeAnswered(tc.ctx, tc.err), tc.want, "%v", tc.err)
		})
	}
}
