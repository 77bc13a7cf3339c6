package gitread

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/gittest"
)

// gitInitConfig is the config git init writes.
const gitInitConfig = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"

// configsGitReads are repository configs that git reads and go-git's config
// decoder refuses (internal/gogitcompare pins the refusals).
var configsGitReads = []struct{ name, config string }{
	{"legacy [remote.origin] section", gitInitConfig + "[remote.origin]\n\turl = https://example.invalid/agent.git\n"},
	{"key on the section header line", gitInitConfig + "[user] name = x\n"},
	{"UTF-8 byte order mark", "\ufeff" + gitInitConfig},
	{"[core] repositoryformatversion = 0 on one line", "[core] repositoryformatversion = 0\n"},
}

// trackedBranches returns the sections git push -u writes for n branches.
func trackedBranches(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "[branch \"feature/tracked-branch-%04d\"]\n\tremote = origin\n\tmerge = refs/heads/feature/tracked-branch-%04d\n", i, i)
	}
	return b.String()
}

// kv is an entry with a value.
func kv(key, value string) configEntry {
	return configEntry{key: key, value: value, hasValue: true}
}

// novalue is an entry without "=".
func novalue(key string) configEntry {
	return configEntry{key: key}
}

// gitConfigCases are config files with the entries git config --list
// gives for them, or err when git refuses them. Where git before 2.45
// reads them otherwise (white space inside a value), old is what it gives.
var gitConfigCases = []configCase{
	{"empty", "", nil, false, nil},
	{"git init", gitInitConfig, []configEntry{
		kv("core.repositoryformatversion", "0"), kv("core.filemode", "true"),
		kv("core.bare", "false"), kv("core.logallrefupdates", "true")}, false, nil},
	{"tracked branch", "[branch \"feature/x\"]\n\tremote = origin\n\tmerge = refs/heads/feature/x\n", []configEntry{
		kv("branch.feature/x.remote", "origin"), kv("branch.feature/x.merge", "refs/heads/feature/x")}, false, nil},
	{"legacy section", "[remote.origin]\n\turl = x\n", []configEntry{kv("remote.origin.url", "x")}, false, nil},
	{"legacy section lower-cased whole", "[Remote.Origin]\n\tURL = x\n", []configEntry{kv("remote.origin.url", "x")}, false, nil},
	{"subsection keeps its case", "[Branch \"Main\"]\n\tRemote = Origin\n", []configEntry{kv("branch.Main.remote", "Origin")}, false, nil},
	{"key on the header line", "[user] name = x\n[a]b=c\n", []configEntry{kv("user.name", "x"), kv("a.b", "c")}, false, nil},
	{"byte order mark", "\ufeff[core]\n\tbare = false\n", []configEntry{kv("core.bare", "false")}, false, nil},
	{"core on one line", "[core] repositoryformatversion = 0\n", []configEntry{kv("core.repositoryformatversion", "0")}, false, nil},
	{"no value and empty values", "[a]\n\tk\n\tj =\n\tl = \"\"\n", []configEntry{novalue("a.k"), kv("a.j", ""), kv("a.l", "")}, false, nil},
	{"quoting keeps space and comment characters", "[a]\n\tk = \" x \" y \"z;#\"\n", []configEntry{kv("a.k", " x  y z;#")}, false, nil},
	{"space inside a value, kept (a blank per byte before 2.45)", "[a]\n\tk =  a \t b  \n", []configEntry{kv("a.k", "a \t b")}, false, []configEntry{kv("a.k", "a   b")}},
	{"space before a comment is dropped", "[a]\n\tk = a \t# c\n", []configEntry{kv("a.k", "a")}, false, nil},
	{"space before a closing quote is kept", "[a]\n\tk = a\t\"\"\t\n", []configEntry{kv("a.k", "a\t")}, false, []configEntry{kv("a.k", "a ")}},
	{"space around a continuation", "[a]\n\tk = a\t\\\n\tb\n", []configEntry{kv("a.k", "a\t\tb")}, false, []configEntry{kv("a.k", "a  b")}},
	{"escapes", "[a]\n\tk = a\\tb\\nc\\bd\\\\e\\\"f\n", []configEntry{kv("a.k", "a\tb\nc\bd\\e\"f")}, false, nil},
	{"continuation", "[a]\n\tk = one \\\n  two\n", []configEntry{kv("a.k", "one   two")}, false, nil},
	{"continuation inside quotes", "[a]\n\tk = \"x\\\ny\"\n", []configEntry{kv("a.k", "xy")}, false, nil},
	{"continuation with CRLF", "[a]\r\n\tk = one\\\r\n two\r\n", []configEntry{kv("a.k", "one two")}, false, nil},
	{"backslash at the end of the file", "[a]k=v\\", []configEntry{kv("a.k", "v")}, false, nil},
	{"comments", "# c\n; c\n[a] ; c\n\tk = v # c\n\tj = \"v # not\" ; c\n", []configEntry{kv("a.k", "v"), kv("a.j", "v # not")}, false, nil},
	{"subsection escapes", "[a \"x\\\"y\\\\z\\q\"]\n\tk = v\n", []configEntry{kv("a.x\"y\\zq.k", "v")}, false, nil},
	{"subsection after tabs", "[a \t\"x y\"]\n\tk = v\n", []configEntry{kv("a.x y.k", "v")}, false, nil},
	{"CRLF", "[core]\r\n\tbare = false\r\n", []configEntry{kv("core.bare", "false")}, false, nil},
	{"lone CR is space, kept inside a value (a blank before 2.45)", "[a]\n\tk = x\ry\r\n", []configEntry{kv("a.k", "x\ry")}, false, []configEntry{kv("a.k", "x y")}},
	{"VT and FF are not space", "[a]\n\tk = \v1\f\n", []configEntry{kv("a.k", "\v1\f")}, false, nil},
	{"NUL ends a value", "[a]\n\tk = x\x00y\n", []configEntry{kv("a.k", "x")}, false, nil},
	{"NUL ends a key", "[a \"x\x00y\"]\n\tk = v\n", []configEntry{kv("a.x", "v")}, false, nil},
	{"include is not followed", "[include]\n\tpath = other\n", []configEntry{kv("include.path", "other")}, false, nil},
	{"no final newline", "[a]k=v", []configEntry{kv("a.k", "v")}, false, nil},
	{"key before any section", "k = v\n", []configEntry{kv("k", "v")}, false, nil},
	{"digits and dashes in names", "[a-1.b2]\n\tk-1 = v\n", []configEntry{kv("a-1.b2.k-1", "v")}, false, nil},

	{"unterminated quote", "[a]\n\tk = \"x\n", nil, true, nil},
	{"newline inside quotes", "[a]\n\tk = \"x\ny\"\n", nil, true, nil},
	{"unknown escape", "[a]\n\tk = a\\qb\n", nil, true, nil},
	{"underscore in a key", "[a]\n\tk_1 = v\n", nil, true, nil},
	{"key starting with a digit", "[a]\n\t1k = v\n", nil, true, nil},
	{"comment after a key without =", "[a]\n\tk # c\n", nil, true, nil},
	{"CR before =", "[a] k\r= v\n", nil, true, nil},
	{"empty section", "[]\n", nil, true, nil},
	{"unterminated section", "[a\n", nil, true, nil},
	{"space after the subsection", "[a \"x\" ]\n", nil, true, nil},
	{"newline in a subsection", "[a \"x\ny\"]\n", nil, true, nil},
	{"underscore in a section", "[a_b]\n", nil, true, nil},
	{"partial byte order mark", "\xef\xbb[a]\n", nil, true, nil},
	{"byte order mark after the start", "[a]\n\ufeffk = v\n", nil, true, nil},
}

// wantBefore245 is what git before 2.45 gives for a case.
func (tc configCase) wantBefore245() []configEntry {
	if tc.old != nil {
		return tc.old
	}
	return tc.want
}

// configCase is a config file with the entries git config --list gives.
type configCase struct {
	name   string
	config string
	want   []configEntry
	err    bool
	old    []configEntry
}

func TestParseGitConfig(t *testing.T) {
	for _, tc := range gitConfigCases {
		for _, before245 := range []bool{false, true} {
			got, err := parseGitConfig([]byte(tc.config), before245)
			if tc.err {
				assert.Error(t, err, "parseGitConfig(%q, %v)", tc.config, before245)
			} else {
				assert.NoError(t, err, "parseGitConfig(%q, %v)", tc.config, before245)
			}
			want := tc.want
			if before245 {
				want = tc.wantBefore245()
			}
			assert.Equal(t, want, got, "parseGitConfig(%q, %v)", tc.config, before245)
		}
	}
}

// TestGitConfigCasesAsGitReadsThem: the expectations of TestParseGitConfig
// are what git config --list gives, for the git the tests run.
func TestGitConfigCasesAsGitReadsThem(t *testing.T) {
	before245 := !gittest.AtLeast(t, 2, 45)
	dir := tempDir(t)
	for i, tc := range gitConfigCases {
		path := filepath.Join(dir, fmt.Sprintf("config%d", i))
		require.NoError(t, os.WriteFile(path, []byte(tc.config), 0o644))
		got, ok := gitConfigList(t, path)
		assert.Equal(t, !tc.err, ok, "git config --list of %q succeeds", tc.config)
		want := tc.want
		if before245 {
			want = tc.wantBefore245()
		}
		assert.Equal(t, want, got, "git config --list of %q", tc.config)
	}
	t.Logf("%d configs compared with %s", len(gitConfigCases), gittest.Describe())
}

func TestLookupConfig(t *testing.T) {
	entries, err := parseGitConfig([]byte("[a]\n\tk = 1\n[b]\n\tk = x\n[A]\n\tK = 2\n[a]\n\tk\n\tj = 3\n"), false)
	require.NoError(t, err)
	for _, tc := range []struct {
		key   string
		want  configEntry
		found bool
	}{
		{"a.k", novalue("a.k"), true},
		{"b.k", kv("b.k", "x"), true},
		{"a.j", kv("a.j", "3"), true},
		{"a.x", configEntry{}, false},
		{"A.k", configEntry{}, false}, // keys are canonical
	} {
		got, found := lookupConfig(entries, tc.key)
		assert.Equal(t, tc.found, found, "lookupConfig(%q) found", tc.key)
		assert.Equal(t, tc.want, got, "lookupConfig(%q)", tc.key)
	}
}

func TestParseRepoFormat(t *testing.T) {
	const v0, v1 = "[core]\n\trepositoryformatversion = 0\n", "[core]\n\trepositoryformatversion = 1\n"
	sha1 := repoFormat{objectFormat: "sha1", hashLen: 40}
	sha256 := repoFormat{objectFormat: "sha256", hashLen: 64}
	for _, tc := range []struct {
		name        string
		config      string
		want        repoFormat
		err         string // a part of the error, or "" for none
		unsupported bool   // the error matches errors.ErrUnsupported
	}{
		{"empty", "", sha1, "", false},
		{"git init", gitInitConfig, repoFormat{objectFormat: "sha1", hashLen: 40, worktreeKeys: worktreeKeys{bareSet: true}}, "", false},
		{"core on one line", "[core] repositoryformatversion = 0\n", sha1, "", false},
		{"byte order mark", "\ufeff" + v1 + "[extensions]\n\tobjectformat = sha256\n", sha256, "", false},
		{"legacy section", v0 + "[remote.origin]\n\turl = x\n", sha1, "", false},
		{"sha256", v1 + "[extensions]\n\tobjectformat = sha256\n", sha256, "", false},
		{"extension names ignore case", "[Core]\n\tRepositoryFormatVersion = 1\n[Extensions]\n\tObjectFormat = sha256\n", sha256, "", false},
		{"version in hex", "[core]\n\trepositoryformatversion = 0x1\n[extensions]\n\tobjectformat = sha256\n", sha256, "", false},
		{"version in octal", "[core]\n\trepositoryformatversion = 01\n[extensions]\n\tobjectformat = sha256\n", sha256, "", false},
		{"version with space inside quotes", "[core]\n\trepositoryformatversion = \" +1\"\n[extensions]\n\tobjectformat = sha256\n", sha256, "", false},
		{"version 2", "[core]\n\trepositoryformatversion = 2\n", sha1, "version 2 is not supported", true},
		{"version with a unit", "[core]\n\trepositoryformatversion = 1k\n", sha1, "version 1024 is not supported", true},
		{"version beyond int", "[core]\n\trepositoryformatversion = 2147483648\n", sha1, "bad numeric config value", false},
		{"version not a number", "[core]\n\trepositoryformatversion = one\n", sha1, "bad numeric config value", false},
		{"version 08", "[core]\n\trepositoryformatversion = 08\n", sha1, "bad numeric config value", false},
		{"version 0b1", "[core]\n\trepositoryformatversion = 0b1\n", sha1, "bad numeric config value", false},
		{"version with trailing space inside quotes", "[core]\n\trepositoryformatversion = \"1 \"\n", sha1, "bad numeric config value", false},
		{"version empty", "[core]\n\trepositoryformatversion =\n", sha1, "bad numeric config value", false},
		{"version without a value", "[core]\n\trepositoryformatversion\n", sha1, "bad numeric config value", false},
		{"version, last wins", "[core]\n\trepositoryformatversion = 2\n\trepositoryformatversion = 1\n", sha1, "", false},
		{"version checked where it appears", "[core]\n\trepositoryformatversion = x\n\trepositoryformatversion = 1\n", sha1, "bad numeric config value", false},
		{"no version: the extensions are forgotten", "[extensions]\n\tobjectformat = sha256\n\trefstorage = reftable\n\tsomeFutureThing\n", sha1, "", false},
		{"version -1 is no version", "[core]\n\trepositoryformatversion = -1\n[extensions]\n\tobjectformat = sha256\n", sha1, "", false},
		{"version below -1: extensions used, not checked", "[core]\n\trepositoryformatversion = -2\n[extensions]\n\tobjectformat = sha256\n\tsomeFutureThing\n", sha256, "", false},
		{"no version: values still checked", "[extensions]\n\tworktreeConfig = maybe\n", sha1, "bad boolean config value", false},
		{"objectFormat in version 0", v0 + "[extensions]\n\tobjectformat = sha1\n", sha1, `version 0 has the version 1 extensions "objectformat"`, false},
		{"noop-v1 in version 0", v0 + "[extensions]\n\tnoop-v1\n", sha1, `"noop-v1"`, false},
		{"refStorage in version 0", v0 + "[extensions]\n\trefStorage = files\n", sha1, `"refstorage"`, false},
		{"relativeWorktrees in version 0", v0 + "[extensions]\n\trelativeWorktrees\n", sha1, `"relativeworktrees"`, false},
		{"submodulePathConfig in version 0", v0 + "[extensions]\n\tsubmodulePathConfig\n", sha1, `"submodulepathconfig"`, false},
		{"submodulePathConfig in version 1", v1 + "[extensions]\n\tsubmodulePathConfig = true\n", sha1, "", false},
		{"submodulePathConfig not a boolean", v1 + "[extensions]\n\tsubmodulePathConfig = maybe\n", sha1, "bad boolean config value", false},
		{"compatObjectFormat in version 0", v0 + "[extensions]\n\tcompatObjectFormat = sha256\n", sha1, `"compatobjectformat"`, false},
		{"version 0 extensions", v0 + "[extensions]\n\tnoop\n\tpreciousObjects = 0x0\n\tpartialClone = origin\n\tworktreeConfig = YES\n", repoFormat{objectFormat: "sha1", hashLen: 40, worktreeConfig: true}, "", false},
		{"version 0 extensions in version 1", v1 + "[extensions]\n\tnoop\n\tpreciousObjects\n\tpartialClone = origin\n\tworktreeConfig = on\n", repoFormat{objectFormat: "sha1", hashLen: 40, worktreeConfig: true}, "", false},
		{"version 1 extensions", v1 + "[extensions]\n\tnoop-v1\n\trefStorage = files\n\trelativeWorktrees = false\n\tcompatObjectFormat = sha256\n", sha1, "", false},
		{"unknown extension in version 0", v0 + "[extensions]\n\tsomeFutureThing = true\n", sha1, "", false},
		{"unknown extension in version 1", v1 + "[extensions]\n\tsomeFutureThing = true\n", sha1, `repository extension "somefuturething" is not supported`, true},
		{"unknown extensions in version 1", v1 + "[extensions]\n\tfoo\n\tbar\n", sha1, `repository extensions "foo", "bar" are not supported`, true},
		{"extension in a subsection", v1 + "[extensions \"x\"]\n\ty\n", sha1, `"x.y"`, true},
		{"object format names are case-sensitive", v1 + "[extensions]\n\tobjectformat = SHA256\n", sha1, `object format "SHA256" is not supported`, true},
		{"unknown object format", v1 + "[extensions]\n\tobjectformat = sha3\n", sha1, `object format "sha3" is not supported`, true},
		{"object format checked where it appears", v1 + "[extensions]\n\tobjectformat = bad\n\tobjectformat = sha1\n", sha1, `object format "bad"`, true},
		{"object format without a value", v1 + "[extensions]\n\tobjectformat\n", sha1, "extensions.objectformat has no value", false},
		{"object format, last wins", v1 + "[extensions]\n\tobjectformat = sha256\n[extensions]\n\tobjectformat = sha1\n", sha1, "", false},
		{"reftable", v1 + "[extensions]\n\trefStorage = reftable\n", repoFormat{objectFormat: "sha1", hashLen: 40, reftable: true}, "", false},
		{"reftable, SHA-256", v1 + "[extensions]\n\tobjectFormat = sha256\n\trefStorage = reftable\n", repoFormat{objectFormat: "sha256", hashLen: 64, reftable: true}, "", false},
		{"reftable spelt otherwise", v1 + "[extensions]\n\trefStorage = Reftable\n", sha1, `ref storage "Reftable" is not supported`, true},
		{"files refs elsewhere", v1 + "[extensions]\n\trefStorage = files://elsewhere\n", sha1, `ref storage "files://elsewhere" is not supported`, true},
		{"unknown ref storage", v1 + "[extensions]\n\trefStorage = bogus\n", sha1, `ref storage "bogus" is not supported`, true},
		{"reftable, then files", v1 + "[extensions]\n\trefStorage = reftable\n\trefStorage = files\n", sha1, "", false},
		{"ref storage without a value", v1 + "[extensions]\n\trefStorage\n", sha1, "extensions.refstorage has no value", false},
		{"compatObjectFormat twice", v1 + "[extensions]\n\tcompatObjectFormat = sha256\n\tcompatObjectFormat = sha256\n", sha1, "set twice", false},
		{"compatObjectFormat without a value", v1 + "[extensions]\n\tcompatObjectFormat\n", sha1, "has no value", false},
		{"relativeWorktrees not a boolean", v1 + "[extensions]\n\trelativeWorktrees = maybe\n", sha1, "bad boolean config value", false},
		{"worktreeConfig not a boolean", v1 + "[extensions]\n\tworktreeConfig = maybe\n", sha1, "bad boolean config value", false},
		{"preciousObjects not a boolean", v1 + "[extensions]\n\tpreciousObjects = 1x\n", sha1, "bad boolean config value", false},
		{"partialClone without a value", v1 + "[extensions]\n\tpartialClone\n", sha1, "extensions.partialclone has no value", false},
		{"core.bare", v0 + "\tbare = true\n", repoFormat{objectFormat: "sha1", hashLen: 40, worktreeKeys: worktreeKeys{bare: true, bareSet: true}}, "", false},
		{"core.bare not a boolean", v0 + "\tbare = maybe\n", sha1, "bad boolean config value", false},
		{"core.worktree", v0 + "\tworktree = ../wt\n\tworktree = ../other\n", repoFormat{objectFormat: "sha1", hashLen: 40, worktreeKeys: worktreeKeys{worktree: "../other", worktreeSet: true}}, "", false},
		{"core.worktree empty", v0 + "\tworktree =\n", repoFormat{objectFormat: "sha1", hashLen: 40, worktreeKeys: worktreeKeys{worktreeSet: true}}, "", false},
		{"core.worktree without a value", v0 + "\tworktree\n", sha1, "core.worktree has no value", false},
		{"core.worktree with a tab inside", v0 + "\tworktree = ../a\tb\n", sha1, "to git 2.45 and later", false},
		{"core.worktree with a lone CR inside", v0 + "\tworktree = ../a\rb\n", sha1, "to git 2.45 and later", false},
		{"core.worktree with a tab quoted", v0 + "\tworktree = \"../a\tb\"\n", repoFormat{objectFormat: "sha1", hashLen: 40, worktreeKeys: worktreeKeys{worktree: "../a\tb", worktreeSet: true}}, "", false},
		{"core.worktree with a tab escaped", v0 + "\tworktree = ../a\\tb\n", repoFormat{objectFormat: "sha1", hashLen: 40, worktreeKeys: worktreeKeys{worktree: "../a\tb", worktreeSet: true}}, "", false},
		{"core.worktree with blanks inside", v0 + "\tworktree = ../a  b \n", repoFormat{objectFormat: "sha1", hashLen: 40, worktreeKeys: worktreeKeys{worktree: "../a  b", worktreeSet: true}}, "", false},
		{"core.worktree without a version", "[core]\n\tworktree = ../wt\n\tbare = true\n", sha1, "", false},
		{"malformed", v0 + "\tbare = \"x\n", sha1, "config line 3: unterminated quote", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRepoFormat([]byte(tc.config))
			if tc.err == "" {
				require.NoError(t, err, "parseRepoFormat(%q)", tc.config)
				assert.Equal(t, tc.want, got, "parseRepoFormat(%q)", tc.config)
				return
			}
			assert.ErrorContains(t, err, tc.err, "parseRepoFormat(%q)", tc.config)
			assert.Equal(t, strings.Contains(tc.err, "2.45"), errors.Is(err, ErrGitsDisagree), "errors.Is(parseRepoFormat(%q), ErrGitsDisagree)", tc.config)
			assert.Equal(t, tc.unsupported, errors.Is(err, errors.ErrUnsupported), "errors.Is(parseRepoFormat(%q), errors.ErrUnsupported)", tc.config)
		})
	}
}

// TestBindsWithConfigsGitReads: a checkout whose config git reads binds to
// the revision git gives.
func TestBindsWithConfigsGitReads(t *testing.T) {
	configs := append([]struct{ name, config string }{
		{"over 64 KiB: 800 tracked branches", gitInitConfig + trackedBranches(800)},
	}, configsGitReads...)
	for _, tc := range configs {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := tempDir(t)
			module, _ := agentRepo(t, dir)
			writeFile(t, filepath.Join(dir, ".git", "config"), tc.config)
			assertBindsToHead(t, dir, module)
		})
	}
	t.Run("over 16 MiB", func(t *testing.T) {
		t.Parallel()
		dir := tempDir(t)
		module, _ := agentRepo(t, dir)
		block := []byte(trackedBranches(1000))
		config := append([]byte(gitInitConfig), bytes.Repeat(block, (16<<20)/len(block)+1)...)
		require.Greater(t, len(config), 16<<20)
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "config"), config, 0o644))
		assertBindsToHead(t, dir, module)
	})
	t.Run("sha256 with a byte order mark and one-line sections", func(t *testing.T) {
		t.Parallel()
		dir := tempDir(t)
		initRepo(t, dir, map[string]string{"run_agent.py": "x\n"}, "--object-format=sha256")
		writeFile(t, filepath.Join(dir, ".git", "config"), "\ufeff[core] repositoryformatversion = 1\n[Extensions] objectFormat = sha256\n")
		assert.Len(t, assertBindsToHead(t, dir, filepath.Join(dir, "run_agent.py")), 64)
	})
}

// assertBindsToHead checks that git reads the repository at dir and that a
// read of module as a guard binding to it makes gives the revision git
// rev-parse HEAD gives.
func assertBindsToHead(t *testing.T, dir, module string) string {
	t.Helper()
	want := git(t, dir, "rev-parse", "HEAD")
	got, err := readHead(t, module)
	require.NoError(t, err, "Read(%q)", module)
	assert.Equal(t, want, got, "Read(%q)", module)
	return got
}

// TestConfigGitRefusesFailsClosed: a config git refuses is an error, not an
// unsupported format and not "no checkout".
func TestConfigGitRefusesFailsClosed(t *testing.T) {
	for _, config := range []string{
		gitInitConfig + "[user]\n\tname = \"unterminated\n",
		gitInitConfig + "[user]\n\tname = a\\qb\n",
		"[core]\n\trepositoryformatversion = zero\n",
		"[core]\n\trepositoryformatversion = 0\n\tbare = maybe\n",
		gitInitConfig + "[extensions]\n\tobjectFormat = sha256\n",
	} {
		dir := tempDir(t)
		module, _ := agentRepo(t, dir)
		writeFile(t, filepath.Join(dir, ".git", "config"), config)
		assert.Error(t, gittest.Command(dir, "rev-parse", "HEAD").Run(), "git rev-parse HEAD with config %q", config)
		_, err := readHead(t, module)
		assert.Error(t, err, "Read with config %q", config)
		assert.NotErrorIs(t, err, errors.ErrUnsupported, "Read with config %q", config)
		rev, err := readRevision(module)
		assert.Error(t, err, "Read with config %q", config)
		assert.Empty(t, rev, "Read with config %q", config)
	}
}
