// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rpcserver serves gRPC services on a unix socket and logs one
// structured line per call.
package rpcserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"liken.sh/per-node/driver/internal/metrics"
)

// SocketPath returns the file path of a unix:// endpoint (or a bare path).
func SocketPath(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("parse endpoint %q: %w", endpoint, err)
	}
	path := endpoint
	if u.Scheme != "" {
		if u.Scheme != "unix" {
			return "", fmt.Errorf("endpoint %q: only unix:// sockets are served", endpoint)
		}
		path = u.Host + u.Path
	}
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("endpoint %q: socket path must be absolute", endpoint)
	}
	return path, nil
}

// Listen removes a stale socket left by an earlier run and listens on path.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return l, nil
}

// New returns a gRPC server that logs every call and counts it in m (may be
// nil).
func New(m *metrics.Metrics) *grpc.Server {
	return grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		took := time.Since(start)
		m.RPC(path.Base(info.FullMethod), status.Code(err).String(), took)
		logCall(req, info, took, err)
		return resp, err
	}))
}

// periodic are the calls kubelet makes on a timer; a successful one is
// logged at V(4) only.
var periodic = map[string]bool{
	"/csi.v1.Node/NodeGetVolumeStats":  true,
	"/csi.v1.Node/NodeGetCapabilities": true,
	"/csi.v1.Identity/Probe":           true,
	"/csi.v1.Identity/GetPluginInfo":   true,
}

// Fields a CSI request may carry; the log line names whichever are present.
type (
	volumeIDer   interface{ GetVolumeId() string }
	targetPather interface{ GetTargetPath() string }
	volumePather interface{ GetVolumePath() string }
	contexter    interface{ GetVolumeContext() map[string]string }
)

func logCall(req any, info *grpc.UnaryServerInfo, took time.Duration, err error) {
	if err == nil && periodic[info.FullMethod] && !klog.V(4).Enabled() {
		return
	}
	kv := []any{"method", info.FullMethod}
	if r, ok := req.(volumeIDer); ok {
		kv = append(kv, "volume_id", r.GetVolumeId())
	}
	if r, ok := req.(targetPather); ok {
		kv = append(kv, "target_path", r.GetTargetPath())
	} else if r, ok := req.(volumePather); ok {
		kv = append(kv, "target_path", r.GetVolumePath())
	}
	if r, ok := req.(contexter); ok {
		if ns, name := r.GetVolumeContext()["csi.storage.k8s.io/pod.namespace"], r.GetVolumeContext()["csi.storage.k8s.io/pod.name"]; name != "" {
			kv = append(kv, "pod", ns+"/"+name)
		}
	}
	kv = append(kv, "duration", took, "code", status.Code(err).String())
	if err != nil {
		klog.ErrorS(err, "RPC failed", kv...)
	} else {
		klog.InfoS("RPC", kv...)
	}
}
