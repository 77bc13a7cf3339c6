//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// deployBlocks are the fenced code blocks of docs/deploy.md in the
// language lang, in order.
func deployBlocks(t *testing.T, lang string) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	require.NoError(t, err)
	var blocks []string
	for _, m := range regexp.MustCompile("(?ms)^```"+regexp.QuoteMeta(lang)+"\n(.*?)^```").FindAllStringSubmatch(string(doc), -1) {
		blocks = append(blocks, m[1])
	}
	require.NotEmpty(t, blocks, "docs/deploy.md has a %s block", lang)
	return blocks
}

// yamlContainers are the containers of a pod spec's list at key
// (containers or initContainers), each the text of its entry.
func yamlContainers(spec, key string) []string {
	var (
		out    []string
		indent = -1 // the list's indentation, once its key was seen
	)
	for _, line := range strings.Split(spec, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		depth := len(line) - len(trimmed)
		switch {
		case indent < 0:
			if trimmed == key+":" {
				indent = depth
			}
		case trimmed == "":
		case depth <= indent && !strings.HasPrefix(trimmed, "- "):
			return out // the next key at the list's level
		case depth == indent+2 && strings.HasPrefix(trimmed, "- "), depth == indent && strings.HasPrefix(trimmed, "- "):
			out = append(out, line+"\n")
		case len(out) > 0:
			out[len(out)-1] += line + "\n"
		}
	}
	return out
}

// yamlArgs are the items of a container's args list.
func yamlArgs(container string) []string {
	var args []string
	in := false
	for _, line := range strings.Split(container, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "args:":
			in = true
		case in && strings.HasPrefix(trimmed, "- "):
			arg, _, _ := strings.Cut(strings.TrimPrefix(trimmed, "- "), "#")
			args = append(args, strings.TrimSpace(arg))
		case in:
			in = false
		}
	}
	return args
}

// The command lines docs/deploy.md gives the example server (the systemd
// unit's ExecStart=, the pod's container, the launchd job) are ones it
// takes: run with each, the server gets past its flags and fails only
// where the paths of the deployment are missing here.
func TestDeployDocCommandLines(t *testing.T) {
	var lines [][]string
	for _, unit := range deployBlocks(t, "ini") {
		if _, start, ok := strings.Cut(unit, "ExecStart="); ok {
			cmd, _, _ := strings.Cut(strings.ReplaceAll(start, "\\\n", " "), "\n")
			lines = append(lines, strings.Fields(cmd)[1:])
		}
	}
	for _, pod := range deployBlocks(t, "yaml") {
		for _, c := range yamlContainers(pod, "containers") {
			if strings.Contains(c, "name: agentserver") {
				lines = append(lines, yamlArgs(c))
			}
		}
	}
	for _, plist := range deployBlocks(t, "xml") {
		_, list, ok := strings.Cut(plist, "<key>ProgramArguments</key>")
		require.True(t, ok)
		list, _, _ = strings.Cut(list, "</array>")
		var args []string
		for _, m := range regexp.MustCompile(`<string>(.*?)</string>`).FindAllStringSubmatch(list, -1) {
			args = append(args, m[1])
		}
		lines = append(lines, args[1:])
	}
	require.Len(t, lines, 3, "the unit, the pod and the launchd job")
	for _, args := range lines {
		require.NotEmpty(t, args)
		// Never listen where the deployment would, nor write its state.
		argv := append(append([]string(nil), args...), "--addr=127.0.0.1:0", "--state="+filepath.Join(t.TempDir(), "sessions.json"))
		cmd := gittest.Self(nil, serverEnv+"="+strings.Join(argv, " "))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%v: %v", args, err)
		assert.Equal(t, 1, ee.ExitCode(), "%v: %s", args, stderr.String())
		assert.NotContains(t, stderr.String(), "Usage:", args)
		assert.Contains(t, stderr.String(), "does not exist", args)
		t.Logf("%v: %s", args, strings.TrimSpace(stderr.String()))
	}
}

// The pod git-sync feeds starts the server only once the link exists: an
// init container runs git-sync once (--one-time) into the same root and
// link as the sidecar, since the server fails to start on a module path
// that leads to no file, and the sidecar and the server start together.
func TestDeployDocPodSyncsBeforeTheServer(t *testing.T) {
	pods := deployBlocks(t, "yaml")
	require.Len(t, pods, 1)
	var sidecar []string
	for _, c := range yamlContainers(pods[0], "containers") {
		if strings.Contains(c, "name: git-sync") {
			sidecar = yamlArgs(c)
		}
	}
	require.NotEmpty(t, sidecar, "a git-sync sidecar")
	inits := yamlContainers(pods[0], "initContainers")
	require.Len(t, inits, 1, "an init container")
	first := yamlArgs(inits[0])
	assert.Contains(t, first, "--one-time")
	assert.Contains(t, inits[0], "image: registry.k8s.io/git-sync/git-sync:")
	for _, arg := range sidecar {
		if strings.HasPrefix(arg, "--repo=") || strings.HasPrefix(arg, "--ref=") || strings.HasPrefix(arg, "--root=") || strings.HasPrefix(arg, "--link=") {
			assert.Contains(t, first, arg, "the init container syncs what the sidecar syncs")
		}
	}
	assert.Contains(t, inits[0], "mountPath: /git")
}
