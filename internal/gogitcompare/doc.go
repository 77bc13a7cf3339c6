// Package gogitcompare holds the evidence for why runtimeguard reads Git's
// files itself instead of using go-git: tests that pin where go-git's
// repository, index and config readers refuse what git reads, and a
// benchmark of go-git opening a repository and reading HEAD beside the
// guard's own full read of the same checkouts.
//
// It is a module of its own so that go-git is never in the module graph of
// runtimeguard or of a module that imports it. It is never installed: its
// go.mod replaces runtimeguard by the checkout it lives in. Run it from
// this directory:
//
//	go test -race ./...
//	go test -run '^$' -bench . ./...
package gogitcompare
