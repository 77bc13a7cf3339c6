//go:build unix

package runtimeguard

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchRepo.root != "" {
		os.RemoveAll(benchRepo.root)
	}
	os.Exit(code)
}
