// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package alerts tests the driver's Prometheus alerts
// (deploy/components/monitoring/prometheusrule.yaml; the chart renders the
// same) and its Grafana dashboard (charts/per-node/dashboards): each alert
// fires on the series it is for, after its "for", and stays quiet on a
// healthy driver's, and links to a runbook that exists; every query parses
// and names only metrics the driver serves. It is a Go module of its own,
// so that the driver's module graph does not take in Prometheus' (make test
// runs it).
package alerts
