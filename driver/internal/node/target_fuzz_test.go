// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Whatever a caller sends as handle and target, checkTarget either refuses
// it with InvalidArgument or FailedPrecondition, or returns exactly
// kubelet's target for that handle: <pods>/<uid>/volumes/kubernetes.io~csi/<handle>/mount.
func FuzzCheckTarget(f *testing.F) {
	const kubelet = "/var/lib/kubelet"
	s := &Server{podsDir: podsDir(kubelet)}
	for _, seed := range [][2]string{
		{"store", kubelet + "/pods/1111/volumes/kubernetes.io~csi/store/mount"},
		{"store", kubelet + "/pods/1111/volumes/kubernetes.io~csi/other/mount"},
		{"store", kubelet + "/pods/1111/etc-hosts"},
		{"store", kubelet + "/pods/1111/volumes/kubernetes.io~secret/token"},
		{"store", kubelet + "/pods/../plugins/x/volumes/kubernetes.io~csi/store/mount"},
		{"store", kubelet + "/pods/1111/volumes/kubernetes.io~csi/store/mount/.."},
		{"store", kubelet + "/pods//volumes/kubernetes.io~csi/store/mount"},
		{"../x", kubelet + "/pods/1/volumes/kubernetes.io~csi/../x/mount"},
		{"store", "relative/mount"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, handle, target string) {
		got, err := s.checkTarget(handle, target)
		if err != nil {
			if c := status.Code(err); c != codes.InvalidArgument && c != codes.FailedPrecondition {
				t.Fatalf("checkTarget(%q, %q): code %s (%v), want InvalidArgument or FailedPrecondition", handle, target, c, err)
			}
			return
		}
		rel, ok := strings.CutPrefix(got, s.podsDir+"/")
		parts := strings.Split(rel, "/")
		if !ok || len(parts) != 5 || parts[0] == "" || parts[0] == "." || parts[0] == ".." ||
			parts[1] != "volumes" || parts[2] != "kubernetes.io~csi" || parts[3] != handle || parts[4] != "mount" ||
			got != filepath.Clean(got) {
			t.Fatalf("checkTarget(%q, %q) accepted %q, which is not kubelet's target for the volume", handle, target, got)
		}
	})
}
