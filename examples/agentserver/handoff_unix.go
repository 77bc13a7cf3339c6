//go:build unix

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/runtimeguard/runtimeguard"
)

// handoff re-executes this program with the listening socket kept open
// across exec: connections that arrive meanwhile wait in the socket's
// backlog for the new image, so none is refused. The HTTP server stops
// accepting and closes every connection once it answered the request it
// serves (see quiesce); then the process image is replaced, keeping its
// ID, so a supervisor sees the same process. It returns only when that
// failed, and the server then serves again on the same socket.
func handoff(a *app, ln net.Listener, plan *runtimeguard.Reload) error {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return errors.New("the listener is no TCP listener")
	}
	sock, err := tl.File() // a second descriptor: the socket outlives Shutdown
	if err != nil {
		return err
	}
	env := withoutHandoff(os.Environ())
	env = append(env, fmt.Sprintf("%s=%d", listenFDEnv, sock.Fd()), expectEnv+"="+plan.To, receiptEnv+"="+plan.Receipt.ID)
	if err := inherit(sock); err != nil {
		return err
	}
	if lock := plan.LockFile(); lock != nil {
		if err := inherit(lock); err != nil {
			return err
		}
		env = append(env, fmt.Sprintf("%s=%d", lockFDEnv, lock.Fd()))
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}

	if err := a.quiesce(); err != nil {
		a.relisten(sock)
		return err
	}
	err = syscall.Exec(exe, os.Args, env)

	// The exec failed: serve again on the socket, on the old code.
	return errors.Join(err, a.relisten(sock))
}

// relisten serves again on the socket sock holds.
func (a *app) relisten(sock *os.File) error {
	ln, err := net.FileListener(sock)
	sock.Close()
	if err != nil {
		return err
	}
	a.serve(ln)
	return nil
}

// inherit clears close-on-exec on f, so that the new image keeps it.
func inherit(f *os.File) error {
	_, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0)
	return err
}

// withoutHandoff drops the handoff variables an earlier handoff set.
func withoutHandoff(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, listenFDEnv+"=") && !strings.HasPrefix(kv, expectEnv+"=") &&
			!strings.HasPrefix(kv, receiptEnv+"=") && !strings.HasPrefix(kv, lockFDEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}
