// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package registration

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"gotest.tools/v3/assert"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TestKubeletHandshake plays kubelet's side of plugin registration over the
// real socket.
func TestKubeletHandshake(t *testing.T) {
	dir := t.TempDir()
	s := New("per-node.liken.sh", "/var/lib/kubelet/plugins/per-node.liken.sh/csi.sock")
	path := SocketPath(dir, "per-node.liken.sh")
	assert.Equal(t, path, filepath.Join(dir, "per-node.liken.sh-reg.sock"))
	g, _, err := s.Serve(path)
	assert.NilError(t, err)
	t.Cleanup(g.Stop)

	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	assert.NilError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	kubelet := registerapi.NewRegistrationClient(conn)

	info, err := kubelet.GetInfo(context.Background(), &registerapi.InfoRequest{})
	assert.NilError(t, err)
	assert.Equal(t, info.GetType(), registerapi.CSIPlugin)
	assert.Equal(t, info.GetName(), "per-node.liken.sh")
	assert.Equal(t, info.GetEndpoint(), "/var/lib/kubelet/plugins/per-node.liken.sh/csi.sock")
	assert.DeepEqual(t, info.GetSupportedVersions(), []string{"1.0.0"})

	assert.Assert(t, !s.Registered())
	_, err = kubelet.NotifyRegistrationStatus(context.Background(), &registerapi.RegistrationStatus{PluginRegistered: true})
	assert.NilError(t, err)
	assert.Assert(t, s.Registered())
}
