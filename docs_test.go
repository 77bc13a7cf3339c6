package runtimeguard

import (
	"context"
	"errors"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// markdownFiles are the repository's documents whose links are checked.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs, "no docs/*.md")
	return append([]string{"README.md", "CHANGELOG.md"}, docs...)
}

var (
	markdownLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	markdownHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	markdownFence   = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```\n")
)

// withoutCode is a document without its fenced code blocks, whose
// brackets are not links and whose # lines are not headings.
func withoutCode(doc string) string {
	return markdownFence.ReplaceAllString(doc, "")
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces to
// hyphens, punctuation other than hyphens and underscores dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchorsOf(t *testing.T, file string) []string {
	t.Helper()
	body, err := os.ReadFile(file)
	require.NoError(t, err)
	var anchors []string
	for _, m := range markdownHeading.FindAllStringSubmatch(withoutCode(string(body)), -1) {
		anchors = append(anchors, githubAnchor(m[1]))
	}
	return anchors
}

// Every relative link of the README, the changelog and docs/ names a file
// or directory of the repository, and every anchor a heading of its page:
// moving a page or renaming a heading breaks this test, not a reader's
// click.
func TestDocumentLinksResolve(t *testing.T) {
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	links := 0
	for _, file := range markdownFiles(t) {
		body, err := os.ReadFile(file)
		require.NoError(t, err, "%s", file)
		for _, m := range markdownLink.FindAllStringSubmatch(withoutCode(string(body)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			path, anchor, _ := strings.Cut(target, "#")
			resolved := file
			if path != "" {
				resolved = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				abs, err := filepath.Abs(resolved)
				require.NoError(t, err)
				if rel, err := filepath.Rel(root, abs); err != nil || !filepath.IsLocal(rel) {
					t.Errorf("%s: link %q leaves the repository", file, target)
					continue
				}
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s: link %q names nothing: %v", file, target, err)
					continue
				}
			}
			if anchor != "" {
				if !strings.HasSuffix(resolved, ".md") {
					t.Errorf("%s: link %q has an anchor into a file that is not a page", file, target)
					continue
				}
				assert.Contains(t, anchorsOf(t, resolved), anchor, "%s: link %q names no heading of %s", file, target, resolved)
			}
		}
	}
	assert.NotZero(t, links, "no relative link found: the pattern is wrong")
}

// trimmedLines are a piece of Go's lines without their indentation and
// without blank lines, for comparing code across indentation levels.
func trimmedLines(code string) []string {
	var lines []string
	for line := range strings.SplitSeq(code, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

func containsRun(haystack, needle []string) bool {
	for i := 0; i+len(needle) <= len(haystack); i++ {
		if slices.Equal(haystack[i:i+len(needle)], needle) {
			return true
		}
	}
	return false
}

// The README's and docs/'s Go is code that is compiled: the README's whole
// program (the first screen) is Example_server with the imports that body
// uses, and every other Go block is a run of lines of one of the package's
// test files, so
// that an API change that breaks the README's code breaks the build of
// the tests, and an edit of one without the other fails here.
func TestREADMEGoCompiles(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	for _, name := range docs {
		doc, err := os.ReadFile(name)
		require.NoError(t, err)
		readme = append(readme, doc...)
	}
	tests, err := filepath.Glob("*_test.go")
	require.NoError(t, err)
	var sources [][]string
	for _, name := range tests {
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		sources = append(sources, trimmedLines(string(src)))
	}

	programs := 0
	for _, m := range markdownFence.FindAllStringSubmatch(string(readme), -1) {
		if m[1] != "go" {
			continue
		}
		block := m[2]
		if strings.HasPrefix(block, "package main\n") {
			programs++
			checkProgramIsExample(t, block, "example_test.go", "Example_server")
			continue
		}
		found := slices.ContainsFunc(sources, func(src []string) bool { return containsRun(src, trimmedLines(block)) })
		assert.True(t, found, "a Go block of the README or docs/ is in no test file of the package:\n%s", block)
	}
	assert.Equal(t, 1, programs, "the README's first screen is one whole program")
}

// checkProgramIsExample checks that program's main is the body of the
// example function name in file, and that program imports exactly the
// packages that body uses.
func checkProgramIsExample(t *testing.T, program, file, name string) {
	t.Helper()
	fset := token.NewFileSet()
	prog, err := parser.ParseFile(fset, "README.md", program, parser.ParseComments)
	require.NoError(t, err, "README's program does not parse")
	formatted, err := format.Source([]byte(program))
	require.NoError(t, err)
	assert.Equal(t, string(formatted), program, "README's program is not gofmt'ed")
	exampleSrc, err := os.ReadFile(file)
	require.NoError(t, err)
	example, err := parser.ParseFile(fset, file, exampleSrc, parser.ParseComments)
	require.NoError(t, err)

	body := func(f *ast.File, src []byte, fn string) (string, *ast.BlockStmt) {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn && fd.Recv == nil {
				start, end := fset.Position(fd.Body.Lbrace).Offset, fset.Position(fd.Body.Rbrace).Offset
				return string(src[start+1 : end]), fd.Body
			}
		}
		t.Fatalf("%s has no func %s", fset.File(f.Pos()).Name(), fn)
		return "", nil
	}
	mainBody, _ := body(prog, []byte(program), "main")
	exampleBody, exampleBlock := body(example, exampleSrc, name)
	assert.Equal(t, trimmedLines(exampleBody), trimmedLines(mainBody), "README's main is not the body of %s in %s", name, file)

	// The imports the example's body uses, by the names the file gives them.
	byName := map[string]string{}
	for _, spec := range example.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		require.NoError(t, err)
		byName[filepath.Base(path)] = path
	}
	var used []string
	ast.Inspect(exampleBlock, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				if path, ok := byName[id.Name]; ok && !slices.Contains(used, path) {
					used = append(used, path)
				}
			}
		}
		return true
	})
	var imported []string
	for _, spec := range prog.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		require.NoError(t, err)
		imported = append(imported, path)
	}
	slices.Sort(used)
	slices.Sort(imported)
	assert.Equal(t, used, imported, "README's program imports other packages than its body uses")
}

// docSnippet is a fenced Go block of a document and the prose before it,
// back to the previous block or heading.
type docSnippet struct {
	doc, code, prose string
}

// goSnippets are the Go fragments (not whole programs) of the README and
// docs/, each with the prose that introduces it.
func goSnippets(t *testing.T) []docSnippet {
	t.Helper()
	var snippets []docSnippet
	for _, name := range append([]string{"README.md"}, must(filepath.Glob(filepath.Join("docs", "*.md")))...) {
		body, err := os.ReadFile(name)
		require.NoError(t, err)
		doc := string(body)
		last := 0
		for _, m := range markdownFence.FindAllStringSubmatchIndex(doc, -1) {
			prose := doc[last:m[0]]
			if h := markdownHeading.FindAllStringIndex(prose, -1); h != nil {
				prose = prose[h[len(h)-1][1]:]
			}
			last = m[1]
			if doc[m[2]:m[3]] != "go" || strings.HasPrefix(doc[m[4]:m[5]], "package main\n") {
				continue
			}
			snippets = append(snippets, docSnippet{name, doc[m[4]:m[5]], prose})
		}
	}
	return snippets
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var (
	testFileLink = regexp.MustCompile(`\]\(([^)\s#]+_test\.go)\)`)
	backquoted   = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*)(?:\\(\\))?`")
)

// freeNames are the names code uses that it does not declare (in its
// scopes, as the type checker finds them), in the order they appear.
func freeNames(t *testing.T, code string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "snippet.go", "package p\nfunc _() {\n"+code+"\n}\n", 0)
	require.NoError(t, err, "a Go block does not parse as statements:\n%s", code)
	var free []string
	conf := types.Config{Error: func(err error) {
		var te types.Error
		if errors.As(err, &te) {
			if name, ok := strings.CutPrefix(te.Msg, "undefined: "); ok && !slices.Contains(free, name) {
				free = append(free, name)
			}
		}
	}}
	_, _ = conf.Check("p", fset, []*ast.File{f}, nil)
	return free
}

// Every Go fragment of the README and docs/ can be read on its own: the
// prose before it links to the test file it runs in (and it is a run of
// lines of that file), and names in backquotes what it uses without
// declaring it, other than the packages that file imports: a reader who
// copies it knows what to supply.
func TestDocSnippetsShowWhatTheyUse(t *testing.T) {
	snippets := goSnippets(t)
	require.NotEmpty(t, snippets)
	for _, s := range snippets {
		links := testFileLink.FindAllStringSubmatch(s.prose, -1)
		if !assert.NotEmpty(t, links, "%s: a Go block without a link to the test file it runs in:\n%s", s.doc, s.code) {
			continue
		}
		file := filepath.Join(filepath.Dir(s.doc), filepath.FromSlash(links[len(links)-1][1]))
		src, err := os.ReadFile(file)
		require.NoError(t, err, "%s: the link to %s", s.doc, file)
		assert.True(t, containsRun(trimmedLines(string(src)), trimmedLines(s.code)), "%s: a Go block is not in %s, which it links to:\n%s", s.doc, file, s.code)

		parsed, err := parser.ParseFile(token.NewFileSet(), file, src, parser.ImportsOnly)
		require.NoError(t, err)
		imported := map[string]bool{}
		for _, spec := range parsed.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			require.NoError(t, err)
			imported[filepath.Base(path)] = true
			if spec.Name != nil {
				imported[spec.Name.Name] = true
			}
		}
		var named []string
		for _, m := range backquoted.FindAllStringSubmatch(s.prose, -1) {
			named = append(named, m[1])
		}
		for _, name := range freeNames(t, s.code) {
			if !imported[name] {
				assert.Contains(t, named, name, "%s: a Go block uses %s, which neither it nor the words before it show:\n%s", s.doc, name, s.code)
			}
		}
	}
}

// No stale message may contain "success", inside a word too: a client
// that searches the message for it must not find it, and the error says
// so rather than speak of a word the value does not hold.
func TestDocMessageRefusesSuccessInsideAWord(t *testing.T) {
	for _, field := range []string{"Options.Message", "Options.ReloadMessage", "Options.AgentName", "Options.ServerName"} {
		for _, value := range []string{"Update unsuccessful", "SUCCESSFUL", "success"} {
			var opts Options
			switch field {
			case "Options.Message":
				opts.Message = value
			case "Options.ReloadMessage":
				opts.ReloadMessage = value
			case "Options.AgentName":
				opts.AgentName = value
			case "Options.ServerName":
				opts.ServerName = value
			}
			_, err := New(opts)
			var oe *OptionError
			require.ErrorAs(t, err, &oe, "%s %q", field, value)
			assert.Equal(t, field, oe.Field)
			assert.Contains(t, oe.Reason, `contains "success"`, "%s %q", field, value)
			assert.NotContains(t, oe.Reason, "the word", "%s %q: the value need not hold the word", field, value)
		}
	}
	_, err := New(Options{Message: "Update done: restart by hand."})
	assert.NoError(t, err)
}

// Watch refuses an interval that is not positive whatever path the guard
// takes, the watch path too: the path may change while Watch runs.
func TestWatchRejectsIntervalZeroOnEitherPath(t *testing.T) {
	dir := tempDir(t)
	module, _ := agentRepo(t, dir)
	for _, noWatch := range []bool{false, true} {
		g, err := New(Options{ModulePath: module, HomeDir: tempDir(t), Check: map[bool]string{true: "stat"}[noWatch]})
		require.NoError(t, err)
		require.NoError(t, g.EnsureCurrent())
		for _, interval := range []time.Duration{0, -time.Second} {
			err := g.Watch(context.Background(), interval)
			assert.ErrorContains(t, err, "not positive", "check path %s, interval %v", g.Observe().Check, interval)
		}
		require.NoError(t, g.Close())
	}
}
