// Package demorepo makes the throwaway checkouts of the demo and the
// examples with the standard library only: they need no git binary and read
// no Git configuration of the user's.
//
// It writes what git itself would: zlib-compressed loose objects named by
// their SHA-1 (blobs, one flat tree, commits), HEAD naming the branch main,
// the branch's ref, a version 2 index and a config. It keeps its files at
// the top level of the worktree (no subdirectories) and opens only the
// repositories it made.
package demorepo

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Author is the name and address of the demo's commits.
const Author = "runtimeguard demo <demo@example.invalid>"

const branchRef = "refs/heads/main"

// Repo is a repository with a worktree.
type Repo struct {
	dir, gitDir string
}

// Open opens the repository in dir, making one if there is none.
func Open(dir string) (*Repo, error) {
	r := &Repo{dir: dir, gitDir: filepath.Join(dir, ".git")}
	head, err := os.ReadFile(filepath.Join(r.gitDir, "HEAD"))
	switch {
	case err == nil:
		if string(head) != "ref: "+branchRef+"\n" {
			return nil, fmt.Errorf("demorepo: %s: HEAD is not the branch main", r.gitDir)
		}
		return r, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("demorepo: %w", err)
	}
	if err := r.init(); err != nil {
		return nil, fmt.Errorf("demorepo: %w", err)
	}
	return r, nil
}

// init writes an empty repository on the unborn branch main.
func (r *Repo) init() error {
	for _, d := range []string{"objects/info", "objects/pack", "refs/heads", "refs/tags", "info"} {
		if err := os.MkdirAll(filepath.Join(r.gitDir, filepath.FromSlash(d)), 0o755); err != nil {
			return err
		}
	}
	// The keys git init writes, so that git reads the worktree as it would
	// one of its own.
	config := "[core]\n\trepositoryformatversion = 0\n\tfilemode = " +
		strconv.FormatBool(runtime.GOOS != "windows") + "\n\tbare = false\n\tlogallrefupdates = true\n"
	if runtime.GOOS == "windows" || runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		config += "\tignorecase = true\n"
	}
	if runtime.GOOS == "windows" {
		config += "\tsymlinks = false\n"
	}
	files := []struct{ name, content string }{
		{"config", config},
		{"description", "Unnamed repository; edit this file 'description' to name the repository.\n"},
		{"info/exclude", ""},
		{"HEAD", "ref: " + branchRef + "\n"}, // last: HEAD makes it a repository
	}
	for _, f := range files {
		if err := writeAtomic(filepath.Join(r.gitDir, filepath.FromSlash(f.name)), []byte(f.content)); err != nil {
			return err
		}
	}
	return nil
}

// Commit writes content to the file name (at the top of the worktree),
// commits it with msg on the branch main, and returns the new commit's id.
// The commit's tree holds the file and the files of the commit before.
func (r *Repo) Commit(name, content, msg string) (string, error) {
	if name == "" || name == "." || name == ".." || name == ".git" || strings.ContainsAny(name, "/\\\x00") {
		return "", fmt.Errorf("demorepo: %q is not a file name at the top of the worktree", name)
	}
	id, err := r.commit(name, content, msg)
	if err != nil {
		return "", fmt.Errorf("demorepo: %w", err)
	}
	return id, nil
}

func (r *Repo) commit(name, content, msg string) (string, error) {
	parent, entries, err := r.head()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o644); err != nil {
		return "", err
	}
	blob, err := r.writeObject("blob", []byte(content))
	if err != nil {
		return "", err
	}
	entries[name] = blob

	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names) // git orders a tree's files by their bytes
	var tree bytes.Buffer
	for _, n := range names {
		tree.WriteString("100644 " + n + "\x00")
		tree.Write(entries[n])
	}
	treeID, err := r.writeObject("tree", tree.Bytes())
	if err != nil {
		return "", err
	}

	var c strings.Builder
	fmt.Fprintf(&c, "tree %x\n", treeID)
	if parent != nil {
		fmt.Fprintf(&c, "parent %x\n", parent)
	}
	when := strconv.FormatInt(time.Now().Unix(), 10) + " +0000"
	fmt.Fprintf(&c, "author %s %s\ncommitter %s %s\n\n%s\n", Author, when, Author, when, strings.TrimRight(msg, "\n"))
	commitID, err := r.writeObject("commit", []byte(c.String()))
	if err != nil {
		return "", err
	}

	// As git commit does: the index, then the branch.
	if err := r.writeIndex(names, entries); err != nil {
		return "", err
	}
	if err := writeAtomic(filepath.Join(r.gitDir, filepath.FromSlash(branchRef)), []byte(hex.EncodeToString(commitID)+"\n")); err != nil {
		return "", err
	}
	return hex.EncodeToString(commitID), nil
}

// head returns the branch's commit and its tree's files, or nil and none
// on the unborn branch.
func (r *Repo) head() (commit []byte, files map[string][]byte, err error) {
	files = map[string][]byte{}
	ref, err := os.ReadFile(filepath.Join(r.gitDir, filepath.FromSlash(branchRef)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, files, nil
	}
	if err != nil {
		return nil, nil, err
	}
	commit, err = hex.DecodeString(strings.TrimSuffix(string(ref), "\n"))
	if err != nil || len(commit) != sha1.Size {
		return nil, nil, fmt.Errorf("%s: not a commit id: %q", branchRef, ref)
	}
	body, err := r.readObject(commit, "commit")
	if err != nil {
		return nil, nil, err
	}
	line, _, _ := strings.Cut(string(body), "\n")
	treeHex, ok := strings.CutPrefix(line, "tree ")
	tree, err := hex.DecodeString(treeHex)
	if !ok || err != nil || len(tree) != sha1.Size {
		return nil, nil, fmt.Errorf("commit %x names no tree", commit)
	}
	data, err := r.readObject(tree, "tree")
	if err != nil {
		return nil, nil, err
	}
	for len(data) > 0 {
		nul := bytes.IndexByte(data, 0)
		if nul < 0 || len(data) < nul+1+sha1.Size {
			return nil, nil, fmt.Errorf("tree %x is truncated", tree)
		}
		mode, n, ok := strings.Cut(string(data[:nul]), " ")
		if !ok || mode != "100644" {
			return nil, nil, fmt.Errorf("tree %x holds %q, not a regular file", tree, data[:nul])
		}
		files[n] = bytes.Clone(data[nul+1 : nul+1+sha1.Size])
		data = data[nul+1+sha1.Size:]
	}
	return commit, files, nil
}

// objectPath is where the loose object id lives.
func (r *Repo) objectPath(id []byte) string {
	h := hex.EncodeToString(id)
	return filepath.Join(r.gitDir, "objects", h[:2], h[2:])
}

// writeObject stores a loose object of the kind and returns its id.
func (r *Repo) writeObject(kind string, body []byte) ([]byte, error) {
	raw := append([]byte(kind+" "+strconv.Itoa(len(body))+"\x00"), body...)
	sum := sha1.Sum(raw)
	path := r.objectPath(sum[:])
	if _, err := os.Stat(path); err == nil {
		return sum[:], nil // objects are immutable: the same bytes are there
	}
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := writeAtomic(path, z.Bytes()); err != nil {
		return nil, err
	}
	return sum[:], nil
}

// readObject returns the body of the loose object id, which must be of the
// kind.
func (r *Repo) readObject(id []byte, kind string) ([]byte, error) {
	f, err := os.Open(r.objectPath(id))
	if err != nil {
		return nil, fmt.Errorf("object %x: %w", id, err)
	}
	defer f.Close()
	zr, err := zlib.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("object %x: %w", id, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("object %x: %w", id, err)
	}
	if sum := sha1.Sum(raw); !bytes.Equal(sum[:], id) {
		return nil, fmt.Errorf("object %x: its content hashes to %x", id, sum)
	}
	header, body, ok := bytes.Cut(raw, []byte{0})
	if !ok || string(header) != kind+" "+strconv.Itoa(len(body)) {
		return nil, fmt.Errorf("object %x is not a %s", id, kind)
	}
	return body, nil
}

// writeIndex writes a version 2 index of the files, each with what a stat
// of the worktree file gives (its times and size), and the checksum git
// verifies.
func (r *Repo) writeIndex(names []string, files map[string][]byte) error {
	var b bytes.Buffer
	b.WriteString("DIRC")
	u32 := func(v uint32) { _ = binary.Write(&b, binary.BigEndian, v) }
	u32(2)
	u32(uint32(len(names)))
	for _, n := range names {
		start := b.Len()
		var sec, nsec, size uint32
		if fi, err := os.Stat(filepath.Join(r.dir, n)); err == nil {
			mt := fi.ModTime()
			sec, nsec, size = uint32(mt.Unix()), uint32(mt.Nanosecond()), uint32(fi.Size())
		}
		// ctime, mtime, dev, ino, mode, uid, gid, size. A field left zero
		// (the ctime, device, inode and owner the standard library does not
		// give everywhere) only makes git compare the file's content once
		// and record what it stats.
		for _, v := range []uint32{sec, nsec, sec, nsec, 0, 0, 0o100644, 0, 0, size} {
			u32(v)
		}
		b.Write(files[n])
		flags := len(n)
		if flags > 0xfff {
			flags = 0xfff
		}
		_ = binary.Write(&b, binary.BigEndian, uint16(flags))
		b.WriteString(n)
		// One to eight NULs end the entry at a multiple of eight bytes.
		pad := 8 - (b.Len()-start)%8
		b.Write(make([]byte, pad))
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return writeAtomic(filepath.Join(r.gitDir, "index"), b.Bytes())
}

// writeAtomic writes data to path through a lock file renamed over it, as
// git does, so that a reader sees the old file or the new one.
func writeAtomic(path string, data []byte) error {
	lock := path + ".lock"
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = rename(lock, path)
	}
	if err != nil {
		os.Remove(lock)
	}
	return err
}

// rename renames lock over path. On Windows a rename over a file that a
// reader holds open (a guard's check reading the ref) is refused until
// the reader closes it: there, as Git for Windows does, it tries again for
// a while before it gives up.
func rename(lock, path string) error {
	err := os.Rename(lock, path)
	for wait := time.Millisecond; err != nil && runtime.GOOS == "windows" && errors.Is(err, fs.ErrPermission) && wait < time.Second; wait *= 2 {
		time.Sleep(wait)
		err = os.Rename(lock, path)
	}
	return err
}
