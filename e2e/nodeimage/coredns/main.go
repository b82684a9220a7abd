// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Command coredns is CoreDNS with only the plugins kubeadm's Corefile uses,
// for the offline kind node image. CoreDNS's own command links every plugin
// it ships (the cloud DNS ones bring the AWS, Azure and Google SDKs): about
// 1,360 packages to compile against about 800 here. build.sh checks, after
// building it, that every directive of the Corefile kubeadm writes is
// registered (`coredns -plugins`), so a directive kubeadm adds one day
// fails the build, not the cluster's DNS.
package main

import (
	"github.com/coredns/coredns/coremain"

	// The directives of kubeadm's Corefile, each the plugin that serves it.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics" // prometheus
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
