// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package sanity

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"google.golang.org/grpc"
	"gotest.tools/v3/assert"

	"liken.sh/per-node/driver/internal/mounts"
	"liken.sh/per-node/driver/internal/node"
	"liken.sh/per-node/driver/internal/rpcserver"
)

// Skipped, and why that is right:
//   - "[Controller Server]" and "[GroupController Server]": per-node has no
//     controller service (it provisions nothing); the test controller below
//     exists only so that node tests which begin with CreateVolume can run.
//   - csi-sanity skips on its own the node tests of capabilities we do not
//     advertise: NodeStageVolume/NodeUnstageVolume (a bind mount needs no
//     staging), NodeExpandVolume (capacity is a hint), NodeGetVolume health
//     (VOLUME_CONDITION is not advertised), and snapshot/clone tests.
const skip = `\[Controller Server\]|\[GroupController Server\]`

// TestSanity needs root: every publish is a real bind mount.
func TestSanity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("csi-sanity runs real bind mounts and must run as root")
	}
	assert.NilError(t, flag.Set("ginkgo.skip", skip))
	dir := t.TempDir()

	srv, err := node.New(node.Config{NodeID: "sanity-node", Version: "sanity", Root: filepath.Join(dir, "root"), Mounter: mounts.NewKernel()})
	assert.NilError(t, err)
	nodeSock := serve(t, filepath.Join(dir, "node.sock"), func(g *grpc.Server) {
		csi.RegisterIdentityServer(g, srv)
		csi.RegisterNodeServer(g, srv)
	})
	controllerSock := serve(t, filepath.Join(dir, "controller.sock"), func(g *grpc.Server) {
		csi.RegisterIdentityServer(g, srv) // a controller serves Identity too
		csi.RegisterControllerServer(g, &testController{})
	})

	cfg := sanity.NewTestConfig()
	cfg.Address = nodeSock
	cfg.ControllerAddress = controllerSock
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	sanity.Test(t, cfg)
}

func serve(t *testing.T, path string, register func(*grpc.Server)) string {
	t.Helper()
	l, err := rpcserver.Listen(path)
	assert.NilError(t, err)
	g := rpcserver.New(nil)
	register(g)
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	return "unix://" + path
}

// testController stands in for the admin who writes a PersistentVolume:
// CreateVolume hands back the name as the volume handle, as the guide's
// PVs do (lower-cased, as Kubernetes requires of a PV name; csi-sanity's
// names carry upper-case hex), and DeleteVolume has nothing to do.
type testController struct {
	csi.UnimplementedControllerServer
}

func (testController) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:      strings.ToLower(req.GetName()),
		CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
	}}, nil
}

func (testController) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

func (testController) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{
			Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		}},
	}}}, nil
}
