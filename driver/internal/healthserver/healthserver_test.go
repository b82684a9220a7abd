// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package healthserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

// serve starts New's server on a loopback port and returns its address.
func serve(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	assert.NilError(t, err)
	h := New(l.Addr().String(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	go func() { _ = h.Serve(l) }()
	t.Cleanup(func() { _ = h.Close() })
	return l.Addr().String()
}

// idle opens a connection, sends one request, reads its answer and
// leaves the connection open: what any pod that reaches the port can do.
func idle(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	assert.NilError(t, err)
	_, err = fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	assert.NilError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	return c
}

// probe is kubelet's probe: a new connection, one request, one second.
func probe(addr string) error {
	c := http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// A flood of connections left idle holds no more than MaxConns of them,
// and kubelet's probe is answered throughout.
func TestAFloodOfIdleConnectionsIsShedAndProbesAnswer(t *testing.T) {
	addr := serve(t)
	before := runtime.NumGoroutine()
	const flood = 2000
	conns := make([]net.Conn, 0, flood)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for i := range flood {
		conns = append(conns, idle(t, addr))
		if i%200 == 0 {
			assert.NilError(t, probe(addr), "kubelet's probe after %d idle connections", i)
		}
	}
	assert.NilError(t, probe(addr), "kubelet's probe after %d idle connections", flood)
	// Each connection the server keeps costs it a goroutine (and its buffers).
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if held := runtime.NumGoroutine() - before; held > MaxConns+10 {
			return poll.Continue("%d goroutines more than before the flood of %d idle connections; the bound is %d connections", held, flood, MaxConns)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(50*time.Millisecond))
}

// A connection left idle is closed by the server after its idle timeout
// (IdleTimeout, within two minutes), and one that never finishes its
// request after the header timeout.
func TestIdleAndSlowConnectionsAreClosed(t *testing.T) {
	assert.Assert(t, IdleTimeout <= 2*time.Minute, "idle connections are closed within two minutes, not %s", IdleTimeout)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	assert.NilError(t, err)
	h := newServer(l.Addr().String(), http.NotFoundHandler(), 200*time.Millisecond, MaxConns)
	go func() { _ = h.Serve(l) }()
	t.Cleanup(func() { _ = h.Close() })
	c := idle(t, l.Addr().String())
	defer func() { _ = c.Close() }()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	assert.Assert(t, errors.Is(err, io.EOF), "an idle connection is closed by the server after 200 ms: read gave %v", err)

	slow, err := net.Dial("tcp", l.Addr().String())
	assert.NilError(t, err)
	defer func() { _ = slow.Close() }()
	_, err = fmt.Fprintf(slow, "GET /healthz HTTP/1.1\r\n") // and never the rest
	assert.NilError(t, err)
	_ = slow.SetReadDeadline(time.Now().Add(readHeaderTimeout + 5*time.Second))
	_, err = io.ReadAll(slow)
	assert.NilError(t, err, "a request whose header never ends is closed after %s", readHeaderTimeout)
}

// A flood of connections that send nothing, or a request's first byte and
// no more, cannot fill the bound: each is "new" or unfinished until its
// header timeout, and a pod that dials faster than MaxConns per timeout
// would otherwise hold every slot and have kubelet's probes closed at
// accept (kubelet then restarts the driver into the same flood). The
// probe is answered throughout, and the server keeps at most MaxConns.
func TestASilentFloodCannotLockOutTheProbes(t *testing.T) {
	addr := serve(t)
	before := runtime.NumGoroutine()
	const flood = 1000
	conns := make([]net.Conn, 0, flood)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for i := range flood {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		assert.NilError(t, err)
		if i%2 == 1 {
			_, _ = io.WriteString(c, "G") // a request begun, never finished
		}
		conns = append(conns, c)
		if i%50 == 49 {
			assert.NilError(t, probe(addr), "kubelet's probe after %d silent connections", i+1)
		}
	}
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if held := runtime.NumGoroutine() - before; held > MaxConns+10 {
			return poll.Continue("%d goroutines more than before the flood of %d silent connections; the bound is %d connections", held, flood, MaxConns)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Second), poll.WithDelay(50*time.Millisecond))
}
