// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package healthserver serves the driver's /healthz, /readyz and /metrics
// over HTTP to whoever reaches the port: kubelet's probes, the scraper, and
// any pod of the cluster that no NetworkPolicy keeps out. Every phase of a
// connection has a timeout, and at most MaxConns connections are kept: a
// new one always takes the place of another (idle first, then the oldest
// that has sent no whole request), so a flood of connections, silent or
// left open, holds a bounded amount of memory and kubelet's probes are
// answered throughout.
package healthserver

import (
	"context"
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
	l := &limit{max: maxConns, conns: map[net.Conn]*kept{}}
	return &http.Server{
		Addr: address, Handler: l.serving(handler), ConnState: l.track,
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idle,
	}
}

// limit keeps at most max connections. A new one past it takes the place
// of another, so that no flood can keep a new connection out: an idle
// one, else the oldest that has not reached a handler (it has sent
// nothing, or not a whole request), else the oldest being answered.
// kubelet's probe sends its request as it connects and is answered in
// microseconds, so a flood would have to open max connections in that
// time to shed it.
type limit struct {
	mu    sync.Mutex
	max   int
	conns map[net.Conn]*kept
}

// kept is what limit knows of a connection it keeps.
type kept struct {
	state    http.ConnState
	since    time.Time // when it was accepted
	handling bool      // a handler is answering it
}

// connKey is the context key of a request's connection (ConnContext).
type connKey struct{}

func (l *limit) track(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch st {
	case http.StateNew:
		if len(l.conns) >= l.max {
			l.shed()
		}
		l.conns[c] = &kept{state: st, since: time.Now()}
	case http.StateActive, http.StateIdle:
		if k, ok := l.conns[c]; ok {
			k.state = st
		}
	case http.StateHijacked, http.StateClosed:
		delete(l.conns, c)
	}
}

// shed closes the connection a new one replaces (see limit).
func (l *limit) shed() {
	var victim net.Conn
	var rank int
	var since time.Time
	for c, k := range l.conns {
		r := 2 // being answered
		switch {
		case k.state == http.StateIdle:
			r = 0
		case !k.handling:
			r = 1
		}
		if victim == nil || r < rank || r == rank && k.since.Before(since) {
			victim, rank, since = c, r, k.since
		}
	}
	if victim != nil {
		_ = victim.Close()
		delete(l.conns, victim)
	}
}

// serving marks, around h, the connection whose request h answers.
func (l *limit) serving(h http.Handler) http.Handler {
	mark := func(r *http.Request, on bool) {
		c, _ := r.Context().Value(connKey{}).(net.Conn)
		l.mu.Lock()
		if k, ok := l.conns[c]; ok {
			k.handling = on
		}
		l.mu.Unlock()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mark(r, true)
		defer mark(r, false)
		h.ServeHTTP(w, r)
	})
}

// Start serves h in the background until it is closed.
func Start(h *http.Server) {
	go func() {
		if err := h.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Health server stopped")
		}
	}()
}
