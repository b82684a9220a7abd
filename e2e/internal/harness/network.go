// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Network is the Docker network of cluster's nodes: one per cluster, named
// after it. Docker gives a container that starts the lowest free address of
// its network, so on a network two lanes shared, a node restarted in one
// lane while a node of the other was stopped could come back at that node's
// address: every route and Service rule its cluster keeps for it would then
// point elsewhere (seen on two lanes: a restarted worker's driver could no
// longer reach the API server).
func (c Config) Network(cluster string) string { return cluster }

// ErrSharedNetwork: a cluster's nodes are not on a network of their own.
var ErrSharedNetwork = errors.New("the cluster's nodes are not on a Docker network of their own")

// NodeAddress is the IPv4 address of a running kind node container (kind
// puts each on one network).
func NodeAddress(ctx context.Context, repo, node string) (string, error) {
	out, err := Run(ctx, repo, "docker", "inspect", "-f", `{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}`, node)
	if err != nil {
		return "", err
	}
	addrs := strings.Fields(out)
	if len(addrs) != 1 {
		return "", fmt.Errorf("node %s has addresses %v, want one (is it running?)", node, addrs)
	}
	return addrs[0], nil
}

// checkNetwork fails unless every one of nodes is on network and on no other.
func checkNetwork(ctx context.Context, c Config, cluster string, nodes []string) error {
	args := append([]string{"inspect", "-f", `{{.Name}}{{range $k, $v := .NetworkSettings.Networks}} {{$k}}{{end}}`}, nodes...)
	out, err := Run(ctx, c.Repo, "docker", args...)
	if err != nil {
		return err
	}
	want := c.Network(cluster)
	if node, got := offNetwork(out, want); node != "" {
		return fmt.Errorf("%w: node %s of cluster %s is on %v, want only %s: delete the cluster (make down) and run again",
			ErrSharedNetwork, node, cluster, got, want)
	}
	return nil
}

// offNetwork reads lines of "/container network..." and returns the first
// container that is not on network alone, with its networks; "" if none.
func offNetwork(inspect, network string) (string, []string) {
	for _, line := range strings.Split(strings.TrimSpace(inspect), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if got := f[1:]; !slices.Equal(got, []string{network}) {
			return strings.TrimPrefix(f[0], "/"), got
		}
	}
	return "", nil
}
