package docs

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, relative to this package's directory.
const root = ".."

// markdown returns the Markdown files a reader sees: the README, the changelog and docs/*.md,
// as paths relative to the repository.
func markdown(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", "CHANGELOG.md"}
	for _, p := range pages {
		files = append(files, filepath.Join("docs", filepath.Base(p)))
	}
	return files
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// internalRef matches what only the team can resolve: issue numbers and section signs of
// internal design documents.
var internalRef = regexp.MustCompile("[Ii]ssue \\d|\u00a7")

// sharedDir is the team's directory beside the repository, spelled so that this file passes.
const sharedDir = "../" + "shared"

// TestNoInternalReferences checks the Markdown and every Go file (comments, help texts, errors)
// for issue numbers, section signs and paths into the team's shared directory. Tests may read
// the Open Responses schema from beside the repository: a schemaFile constant may name it.
func TestNoInternalReferences(t *testing.T) {
	for _, f := range markdown(t) {
		for i, line := range strings.Split(read(t, f), "\n") {
			if internalRef.MatchString(line) || strings.Contains(line, sharedDir) {
				t.Errorf("%s:%d: internal reference: %s", f, i+1, line)
			}
		}
	}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			shared := strings.Contains(line, sharedDir) && !strings.HasPrefix(line, "const schemaFile = ")
			if internalRef.MatchString(line) || shared {
				t.Errorf("%s:%d: internal reference: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadmeOpening checks the README's first lines: a title, one sentence, then a code block
// with the two commands; and its length.
func TestReadmeOpening(t *testing.T) {
	lines := strings.Split(read(t, "README.md"), "\n")
	if n := len(lines); n > 300 {
		t.Errorf("README.md has %d lines, want at most 300", n)
	}
	if len(lines) < 9 || !strings.HasPrefix(lines[0], "# ") || lines[1] != "" || lines[3] != "" || lines[4] != "```" {
		t.Fatalf("README.md does not open with a title, one sentence and a code block:\n%s", strings.Join(lines[:min(9, len(lines))], "\n"))
	}
	if s := lines[2]; !strings.HasSuffix(s, ".") || strings.Count(s, ". ") != 0 {
		t.Errorf("README.md line 3 is not one sentence: %q", s)
	}
	block := strings.Join(lines[5:8], "\n")
	if !strings.HasPrefix(lines[5], "go run ./cmd/tether serve ") || !strings.HasPrefix(lines[6], "go test -race ./... ") || lines[7] != "```" {
		t.Errorf("README.md's first code block is not the two commands:\n%s", block)
	}
}

// mdLink matches an inline Markdown link or image: its target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestLinks checks that every relative link of the Markdown names a file of the repository, and
// that its #anchor is a heading of the target page.
func TestLinks(t *testing.T) {
	for _, f := range markdown(t) {
		text := stripCode(read(t, f))
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			page := f
			if file != "" {
				page = filepath.Join(filepath.Dir(f), file)
				if _, err := os.Stat(filepath.Join(root, page)); err != nil {
					t.Errorf("%s: link %s: %v", f, target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(page, ".md") && !anchors(t, page)[anchor] {
				t.Errorf("%s: link %s: %s has no heading with the anchor #%s", f, target, page, anchor)
			}
		}
	}
}

// stripCode removes fenced code blocks and inline code spans, where brackets are not links.
func stripCode(s string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// anchors returns the anchors GitHub gives the headings of a page.
func anchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range strings.Split(stripCode(read(t, page)), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := slug(title)
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// slug is GitHub's heading anchor: lower case, punctuation other than '-' and '_' dropped,
// spaces turned into '-'.
func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string { return string(rune('0' + n)) }

// TestTablesUnbroken checks that no blank line splits a Markdown table: a row, a blank line,
// then a row that is not the start of a new table.
func TestTablesUnbroken(t *testing.T) {
	for _, f := range markdown(t) {
		lines := strings.Split(stripCode(read(t, f)), "\n")
		for i := 1; i+1 < len(lines); i++ {
			if lines[i] != "" || !strings.HasPrefix(lines[i-1], "|") || !strings.HasPrefix(lines[i+1], "|") {
				continue
			}
			if i+2 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i+2]), "|") || !strings.Contains(lines[i+2], "--") {
				t.Errorf("%s: a blank line splits a table before %q", f, lines[i+1])
			}
		}
	}
}

// TestGoSnippetsAreExamples checks that every Go code block of the Markdown is a complete
// program of examples/ (go build and go vet compile them, and their tests run them), so that no
// snippet uses an undefined name.
func TestGoSnippetsAreExamples(t *testing.T) {
	examples := map[string]string{}
	err := filepath.WalkDir(filepath.Join(root, "examples"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			examples[string(b)] = path
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range markdown(t) {
		sc := bufio.NewScanner(strings.NewReader(read(t, f)))
		var block *bytes.Buffer
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case block == nil && line == "```go":
				block = &bytes.Buffer{}
			case block != nil && line == "```":
				if _, ok := examples[block.String()]; !ok {
					t.Errorf("%s:%d: a Go code block that is not a file of examples/", f, n)
				}
				block = nil
			case block != nil:
				block.WriteString(line + "\n")
			}
		}
	}
}

// TestNpmInstallsOutsideTheCheckout checks that every `npm i`/`npm install` of a code block in the
// Markdown first leaves the checkout (a `cd` earlier in the block, or a `--prefix`): run where a
// reader stands, in the checkout, it would fill it with node_modules. And in case one does,
// .gitignore keeps node_modules out of git.
func TestNpmInstallsOutsideTheCheckout(t *testing.T) {
	for _, f := range markdown(t) {
		in, left := false, false
		for i, line := range strings.Split(read(t, f), "\n") {
			s := strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(s, "```"):
				in, left = !in, false
			case !in:
			case strings.HasPrefix(s, "cd "), strings.Contains(s, "&& cd "):
				left = true
			case (strings.HasPrefix(s, "npm i ") || strings.HasPrefix(s, "npm install ")) && !left && !strings.Contains(s, "--prefix"):
				t.Errorf("%s:%d: %q runs in the reader's directory (the checkout): cd to a scratch directory first", f, i+1, s)
			}
		}
	}
	ignored := false
	for _, line := range strings.Split(read(t, ".gitignore"), "\n") {
		if l := strings.TrimSpace(line); l == "node_modules" || l == "node_modules/" {
			ignored = true
		}
	}
	if !ignored {
		t.Error(".gitignore does not list node_modules/")
	}
}
