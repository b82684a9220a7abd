// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package healthserver serves the driver's /healthz, /readyz and /metrics
// over HTTP to whoever reaches the port: kubelet's probes, the scraper, and
// any pod of the cluster that no NetworkPolicy keeps out. Every phase of a
// connection has a timeout, and at most MaxConns connections are kept: a
// new one takes the place of an idle one, so a flood of connections left
// open holds a bounded amount of memory and kubelet's probes are answered.
package healthserver

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

const (
	// MaxConns bounds the connections kept open (a few KiB of buffers and
	// a goroutine each).
	MaxConns = 64
	// IdleTimeout closes a kept-alive connection that sends nothing.
	IdleTimeout = 60 * time.Second
	// readHeaderTimeout, readTimeout and writeTimeout bound the phases of
	// a request: a scrape of /metrics is written in well under a second.
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
)

// New returns the server for handler at address.
func New(address string, handler http.Handler) *http.Server {
	return newServer(address, handler, IdleTimeout, MaxConns)
}

func newServer(address string, handler http.Handler, idle time.Duration, maxConns int) *http.Server {
	l := &limit{max: maxConns, conns: map[net.Conn]http.ConnState{}}
	return &http.Server{
		Addr: address, Handler: handler, ConnState: l.track,
		ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idle,
	}
}

// limit keeps at most max connections: a new one past it closes an idle
// one, or is itself closed when every kept connection is busy (each busy
// one ends within the timeouts).
type limit struct {
	mu    sync.Mutex
	max   int
	conns map[net.Conn]http.ConnState
}

func (l *limit) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateNew:
		if len(l.conns) >= l.max && !l.closeIdle() {
			_ = c.Close()
			return
		}
		l.conns[c] = st
	case http.StateActive, http.StateIdle:
		if _, kept := l.conns[c]; kept {
			l.conns[c] = st
		}
	case http.StateHijacked, http.StateClosed:
		delete(l.conns, c)
	}
}

// closeIdle closes one idle connection; false when none is idle.
func (l *limit) closeIdle() bool {
	for c, st := range l.conns {
		if st == http.StateIdle {
			_ = c.Close()
			delete(l.conns, c)
			return true
		}
	}
	return false
}

// Start serves h in the background until it is closed.
func Start(h *http.Server) {
	go func() {
		if err := h.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Health server stopped")
		}
	}()
}
