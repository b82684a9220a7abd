package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

func TestHealthzNamesTheFirstFailingCheck(t *testing.T) {
	var regErr, reclaimErr error
	h := healthz([]check{
		{"kubelet registration", func() error { return regErr }},
		{"reclaim controller", func() error { return reclaimErr }},
	})
	for _, tc := range []struct {
		name        string
		reg, rec    error
		code        int
		bodyContain string
	}{
		{"all pass", nil, nil, http.StatusOK, "ok"},
		{"registration lost", errors.New("no socket"), nil, http.StatusServiceUnavailable, "kubelet registration: no socket"},
		{"reclaim stopped", nil, errors.New("stopped"), http.StatusServiceUnavailable, "reclaim controller: stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			regErr, reclaimErr = tc.reg, tc.rec
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			assert.Equal(t, rec.Code, tc.code)
			assert.Assert(t, strings.Contains(rec.Body.String(), tc.bodyContain), "body %q", rec.Body.String())
		})
	}
}

// Missing credentials are an error, never a silent standalone run.
func TestNoClusterIsAnErrorWithoutStandalone(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := kubeClients("")
	assert.ErrorContains(t, err, "--standalone")
}
