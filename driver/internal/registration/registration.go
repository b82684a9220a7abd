// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package registration registers the driver with kubelet in-process, the
// way the node-driver-registrar sidecar would: it serves kubelet's plugin
// registration API on a socket in kubelet's plugins_registry directory.
package registration

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"liken.sh/per-node/driver/internal/rpcserver"
)

// Server answers kubelet's plugin watcher.
type Server struct {
	registerapi.UnimplementedRegistrationServer
	driver   string
	endpoint string
	// registered is true once kubelet said it accepted the driver.
	registered atomic.Bool
	// refused is true once kubelet said it refused the driver.
	refused atomic.Bool
}

// New describes a CSI driver whose socket is at csiSocket (as kubelet sees it).
func New(driver, csiSocket string) *Server {
	return &Server{driver: driver, endpoint: csiSocket}
}

// SocketPath is where kubelet looks for this driver's registration socket.
func SocketPath(registrationDir, driver string) string {
	return filepath.Join(registrationDir, driver+"-reg.sock")
}

// GetInfo tells kubelet what this plugin is and where its CSI socket is.
func (s *Server) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.driver,
		Endpoint:          s.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

// NotifyRegistrationStatus records kubelet's verdict.
func (s *Server) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	s.registered.Store(st.GetPluginRegistered())
	s.refused.Store(!st.GetPluginRegistered())
	if st.GetPluginRegistered() {
		klog.InfoS("kubelet registered the driver", "driver", s.driver)
	} else {
		klog.ErrorS(nil, "kubelet refused the driver", "driver", s.driver, "reason", st.GetError())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Registered reports whether kubelet accepted the driver.
func (s *Server) Registered() bool { return s.registered.Load() }

// Refused reports whether kubelet's last verdict was a refusal.
func (s *Server) Refused() bool { return s.refused.Load() }

// Serve listens on path (replacing a stale socket) and serves until the
// returned server is stopped.
func (s *Server) Serve(path string) (*grpc.Server, net.Listener, error) {
	l, err := rpcserver.Listen(path)
	if err != nil {
		return nil, nil, fmt.Errorf("registration socket: %w", err)
	}
	g := grpc.NewServer()
	registerapi.RegisterRegistrationServer(g, s)
	go func() {
		if err := g.Serve(l); err != nil {
			klog.ErrorS(err, "Registration server stopped")
		}
	}()
	return g, l, nil
}
