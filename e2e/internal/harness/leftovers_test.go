// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"
)

// Stand-ins for kind and docker that keep their clusters and containers in
// files under $STATE: kind-fails makes `kind delete` fail, rm-fails holds
// how many `docker rm` calls fail before one works (a large number: all).
const fakeKind = `#!/bin/bash
case "$1" in
get) [[ -f "$STATE/clusters" ]] && cat "$STATE/clusters"; exit 0 ;;
delete)
  [[ -f "$STATE/kind-fails" ]] && { echo "ERROR: failed to delete cluster $4" >&2; exit 1; }
  grep -vx "$4" "$STATE/clusters" > "$STATE/c.new"; mv "$STATE/c.new" "$STATE/clusters"
  rm -f "$STATE/containers-$4"; exit 0 ;;
esac
exit 2
`

const fakeDocker = `#!/bin/bash
case "$1" in
ps) c="${4#label=io.x-k8s.kind.cluster=}"; [[ -f "$STATE/containers-$c" ]] && cat "$STATE/containers-$c"; exit 0 ;;
rm)
  n="$(cat "$STATE/rm-fails" 2>/dev/null || echo 0)"
  if (( n > 0 )); then echo $((n - 1)) > "$STATE/rm-fails"; echo "Error: removal of container is already in progress" >&2; exit 1; fi
  shift 3
  for f in "$STATE"/containers-*; do [[ -f "$f" ]] || continue; grep -vxF -f <(printf '%s\n' "$@") "$f" > "$f.new"; mv "$f.new" "$f"; [[ -s "$f" ]] || rm -f "$f"; done
  exit 0 ;;
network) exit 1 ;;
esac
exit 2
`

// e2e/host/leftovers.sh, which .ci/run calls first, never fails: a leftover
// cluster is deleted, removed by hand when kind cannot delete it, and left
// behind under a new name for this run's clusters when Docker will not
// remove it (CI once ended after 67 s with exit code 123 from that removal).
func TestLeftoverClustersNeverFailTheRun(t *testing.T) {
	script := filepath.Join(repoRoot(t), "e2e", "host", "leftovers.sh")
	for _, tc := range []struct {
		name        string
		kindFails   bool
		rmFails     string
		wantOwnName bool
		wantLeft    bool
	}{
		{name: "kind deletes the leftover"},
		{name: "kind cannot, docker rm removes its containers", kindFails: true},
		{name: "docker rm fails twice, then removes them", kindFails: true, rmFails: "2"},
		{name: "docker rm never removes them", kindFails: true, rmFails: "1000", wantOwnName: true, wantLeft: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin, state := t.TempDir(), t.TempDir()
			assert.NilError(t, os.WriteFile(filepath.Join(bin, "kind"), []byte(fakeKind), 0o755))
			assert.NilError(t, os.WriteFile(filepath.Join(bin, "docker"), []byte(fakeDocker), 0o755))
			write := func(name, content string) {
				assert.NilError(t, os.WriteFile(filepath.Join(state, name), []byte(content), 0o644))
			}
			write("clusters", "per-node-e2e\n")
			write("containers-per-node-e2e", "c1\nc2\n")
			if tc.kindFails {
				write("kind-fails", "")
			}
			if tc.rmFails != "" {
				write("rm-fails", tc.rmFails)
			}
			cmd := exec.Command("bash", script)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STATE="+state,
				"KIND="+filepath.Join(bin, "kind"), "LEFTOVER_TRIES=3", "LEFTOVER_WAIT_SECONDS=0")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			assert.NilError(t, cmd.Run(), "leftovers.sh failed; it printed:\n%s", stderr.String())

			own := strings.TrimSpace(stdout.String())
			if tc.wantOwnName {
				assert.Assert(t, regexp.MustCompile(`^per-node-ci-[0-9]{14}$`).MatchString(own),
					"expected a cluster name of the run's own on stdout, saw %q (stderr:\n%s)", own, stderr.String())
			} else {
				assert.Equal(t, own, "", "expected nothing on stdout (every leftover removed); stderr:\n%s", stderr.String())
			}
			_, err := os.Stat(filepath.Join(state, "containers-per-node-e2e"))
			if tc.wantLeft {
				assert.NilError(t, err, "expected the leftover's containers to be left as they were")
			} else {
				assert.Check(t, is.ErrorIs(err, os.ErrNotExist), "expected the leftover's containers removed")
			}
		})
	}
}
