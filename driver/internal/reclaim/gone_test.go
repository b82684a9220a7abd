// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"gotest.tools/v3/assert"
	"k8s.io/client-go/rest"

	"liken.sh/per-node/driver/internal/kube"
)

// A "not found" removes copies and drops records, so it is believed only
// when it is the API server's own answer about the object asked for: a
// plain-text 404 from a proxy or load balancer in front of the API server
// is an API server that did not answer.
func TestOnlyTheAPIServersNotFoundMeansGone(t *testing.T) {
	for _, tc := range []struct {
		name        string
		contentType string
		body        string
		want        error
	}{
		{"the_api_servers_not_found", "application/json",
			`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"persistentvolumes \"store\" not found","reason":"NotFound","details":{"name":"store","kind":"persistentvolumes"},"code":404}`,
			ErrNoVolume},
		{"a_proxys_plain_text_404", "text/plain", "404 page not found", ErrAPI},
		{"a_proxys_html_404", "text/html", "<html><body>Not Found</body></html>", ErrAPI},
		{"a_status_about_another_object", "application/json",
			`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"persistentvolumes \"other\" not found","reason":"NotFound","details":{"name":"other","kind":"persistentvolumes"},"code":404}`,
			ErrAPI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			client, err := kube.NewPersistentVolumes(&rest.Config{Host: srv.URL})
			assert.NilError(t, err)
			_, err = getPV(context.Background(), client, "store")
			assert.Assert(t, errors.Is(err, tc.want), "want %v, got %v", tc.want, err)
			if !errors.Is(tc.want, ErrNoVolume) {
				assert.Assert(t, !errors.Is(err, ErrNoVolume), "a 404 that is not the API server's was taken for a deleted PV: %v", err)
			}
		})
	}
}
