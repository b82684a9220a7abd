// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

// mainArgsEnv makes the test binary run main with these arguments (one per
// line), so a test can watch the real process start.
const mainArgsEnv = "PER_NODE_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(mainArgsEnv); args != "" {
		os.Args = append([]string{"per-node"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// --logging-format=json writes every line as one JSON object with the same
// keys; an unknown format is refused before anything starts.
func TestLoggingFormat(t *testing.T) {
	dir := t.TempDir()
	start := func(format string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join([]string{
			"--logging-format=" + format, "--standalone", "--node-id=worker-a",
			"--root=" + filepath.Join(dir, "root"), "--endpoint=unix://" + filepath.Join(dir, "csi.sock"),
			"--registration-dir=", "--health-address=",
		}, "\n"))
		return cmd
	}

	cmd := start("json")
	stderr, err := cmd.StderrPipe()
	assert.NilError(t, err)
	assert.NilError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stderr).ReadString('\n')
	assert.NilError(t, err)
	var entry map[string]any
	assert.NilError(t, json.Unmarshal([]byte(line), &entry), "not JSON: %q", line)
	assert.Equal(t, entry["msg"], "Node server ready", "first line: %s", line)
	assert.Equal(t, entry["copies"], 0.0, "first line: %s", line)

	out, err := start("yaml").CombinedOutput()
	assert.ErrorContains(t, err, "exit status 2", "output: %s", out)
	assert.Assert(t, strings.Contains(string(out), `Unsupported log format`), "output: %s", out)
}
