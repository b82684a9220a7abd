// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"golang.org/x/sys/unix"
	"liken.sh/per-node/driver/internal/mounts"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"liken.sh/per-node/driver/internal/holders"
	"liken.sh/per-node/driver/internal/layout"
)

// NodePublishVolume mounts this node's copy of the volume at the target
// path, creating an empty copy on first use. A copy is mounted for one pod
// at a time: a second pod gets FailedPrecondition naming the first.
func (s *Server) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	handle := req.GetVolumeId()
	target, err := s.checkTarget(handle, req.GetTargetPath())
	if err != nil {
		return nil, err
	}
	capability := req.GetVolumeCapability()
	if capability == nil {
		return nil, invalid("volume %q: volume capability is required", handle)
	}
	if capability.GetBlock() != nil {
		return nil, invalid("volume %q: per-node volumes are directories; block access is not supported, use volumeMode: Filesystem", handle)
	}
	if capability.GetMount() == nil {
		return nil, invalid("volume %q: volume capability must ask for mount access", handle)
	}
	if err := targetNamesHandle(handle, target); err != nil {
		return nil, err
	}
	if err := mounts.CheckOptions(capability.GetMount().GetMountFlags()); err != nil {
		return nil, invalid("volume %q: %v; remove them from the PersistentVolume's mountOptions", handle, err)
	}
	var flags uintptr
	if req.GetReadonly() || readOnlyMode(capability.GetAccessMode().GetMode()) {
		flags |= unix.MS_RDONLY
	}
	p := publication{handle: handle, target: target, flags: flags, pod: holders.PodName(req.GetVolumeContext(), target)}
	s.locks.LockKey(handle)
	defer func() { _ = s.locks.UnlockKey(handle) }()
	if err := s.publish(ctx, p); err != nil {
		return nil, s.toStatus("publish", handle, err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target and removes it. The copy stays.
func (s *Server) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	handle := req.GetVolumeId()
	target, err := s.checkTarget(handle, req.GetTargetPath())
	if err != nil {
		return nil, err
	}
	s.locks.LockKey(handle)
	defer func() { _ = s.locks.UnlockKey(handle) }()
	if err := s.unpublish(handle, target); err != nil {
		return nil, s.toStatus("unpublish", handle, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports how much the copy uses. The capacity in the
// PersistentVolume is a hint, not a quota, so the totals are the
// filesystem's that holds the copies.
func (s *Server) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	handle, path := req.GetVolumeId(), req.GetVolumePath()
	if err := checkHandleAndPath(handle, path, "volume path"); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(path) {
		return nil, status.Errorf(codes.NotFound, "volume %q is not mounted at %q: not an absolute path", handle, path)
	}
	usage, err := s.stats(handle, path)
	if err != nil {
		return nil, s.toStatus("get stats of", handle, err)
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: usage}, nil
}

// NodeGetCapabilities advertises what this server implements.
func (s *Server) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	caps := []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		// One pod per node is enforced for every access mode, so the
		// single-node modes are served as the CSI spec asks.
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	}
	out := make([]*csi.NodeServiceCapability, 0, len(caps))
	for _, c := range caps {
		out = append(out, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: c},
		}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: out}, nil
}

// NodeGetInfo names the node. Copies exist on every node, so there is no
// topology to report.
func (s *Server) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: s.nodeID}, nil
}

// checkHandleAndPath is the validation shared by every volume RPC.
func checkHandleAndPath(handle, path, what string) error {
	if handle == "" {
		return invalid("volume id is required")
	}
	if err := layout.Validate(handle); err != nil {
		return invalid("%v; the volumeHandle of a per-node PersistentVolume must be the PersistentVolume's name", err)
	}
	if path == "" {
		return invalid("volume %q: %s is required", handle, what)
	}
	return nil
}

// checkTarget adds, for publish and unpublish, that kubelet's target path
// is absolute and, when kubelet's directory is known, is exactly kubelet's
// target for a CSI volume: <pods>/<pod uid>/volumes/kubernetes.io~csi/<PV
// name>/mount, for the PV the handle names. It returns the cleaned path.
func (s *Server) checkTarget(handle, target string) (string, error) {
	if err := checkHandleAndPath(handle, target, "target path"); err != nil {
		return "", err
	}
	if !filepath.IsAbs(target) {
		return "", invalid("volume %q: target path %q is not absolute", handle, target)
	}
	clean := filepath.Clean(target)
	if s.podsDir == "" {
		return clean, nil
	}
	if !strings.HasPrefix(clean, s.podsDir+string(filepath.Separator)) {
		return "", invalid("volume %q: target path %q is not under kubelet's pods directory %s; set --kubelet-dir to kubelet's root directory",
			handle, target, s.podsDir)
	}
	parts := strings.Split(strings.TrimPrefix(clean, s.podsDir+string(filepath.Separator)), string(filepath.Separator))
	if len(parts) != 5 || parts[1] != "volumes" || parts[2] != "kubernetes.io~csi" || parts[4] != "mount" {
		return "", invalid("volume %q: target path %q is not kubelet's target for a CSI volume (%s/<pod uid>/volumes/kubernetes.io~csi/<PersistentVolume>/mount); nothing was done",
			handle, target, s.podsDir)
	}
	if err := targetNamesHandle(handle, clean); err != nil {
		return "", err
	}
	return clean, nil
}

// targetNamesHandle refuses a target kubelet made for another PV than the
// handle: kubelet's target for a PV-backed CSI volume ends in
// kubernetes.io~csi/<PV name>/mount, and a per-node PV's handle is its name.
// Without this, a PV whose handle is another PV's name would share that
// PV's copies, and lose them when that PV is deleted.
func targetNamesHandle(handle, target string) error {
	dir, leaf := filepath.Split(target)
	pv := filepath.Base(dir)
	if leaf != "mount" || filepath.Base(filepath.Dir(filepath.Clean(dir))) != "kubernetes.io~csi" || pv == handle {
		return nil
	}
	return status.Errorf(codes.FailedPrecondition,
		"volume %q: kubelet mounts it for PersistentVolume %q (target %s), and a per-node PersistentVolume's volumeHandle must be its own name; "+
			"delete PersistentVolume %q and create it again with volumeHandle %q; nothing was done", handle, pv, target, pv, pv)
}

func readOnlyMode(m csi.VolumeCapability_AccessMode_Mode) bool {
	return m == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY ||
		m == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
}
