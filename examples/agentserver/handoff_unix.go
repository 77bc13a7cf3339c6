//go:build unix

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

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
	// The descriptors the new image keeps: copies without close-on-exec.
	var kept []int
	release := func() {
		for _, fd := range kept {
			syscall.Close(fd)
		}
	}
	sockFD, err := inherit(sock)
	if err != nil {
		sock.Close()
		return err
	}
	kept = append(kept, sockFD)
	env := withoutHandoff(os.Environ())
	env = append(env, fmt.Sprintf("%s=%d", listenFDEnv, sockFD), expectEnv+"="+plan.To, receiptEnv+"="+plan.Receipt.ID)
	if lock := plan.LockFile(); lock != nil {
		lockFD, err := inherit(lock)
		if err != nil {
			release()
			sock.Close()
			return err
		}
		kept = append(kept, lockFD)
		env = append(env, fmt.Sprintf("%s=%d", lockFDEnv, lockFD))
	}
	exe, err := os.Executable()
	if err != nil {
		release()
		sock.Close()
		return err
	}

	if err := a.quiesce(); err != nil {
		release()
		a.relisten(sock)
		return err
	}
	err = syscall.Exec(exe, os.Args, env)

	// The exec failed: serve again on the socket, on the old code.
	release()
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

// inherit returns a copy of f's descriptor that the new image keeps: dup
// makes a descriptor without close-on-exec (Go opens every file with it),
// on the same open file, so a lock held on f stays held through the copy.
func inherit(f *os.File) (int, error) {
	var fd int
	var err error
	raw, rerr := f.SyscallConn()
	if rerr != nil {
		return -1, rerr
	}
	if cerr := raw.Control(func(sysfd uintptr) { fd, err = syscall.Dup(int(sysfd)) }); cerr != nil {
		return -1, cerr
	}
	return fd, err
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
