package lock_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMESnippets: every ```go block of README.md and of the guides
// under docs/ is code that compiles, so the docs and the code cannot drift
// apart. A block's lines, each with its
// white space normalised and blank lines left out, must appear as a
// contiguous run in a Go file of the module: an Example, a test, or a test
// file of internal/testing/readme, which holds the fragments that need a
// function around them (ctx, a client, a return). The block's leading import declarations
// must appear, as a run of their own, in the same file.
func TestREADMESnippets(t *testing.T) {
	files := goFiles(t)
	for _, doc := range docFiles(t) {
		blocks := goBlocks(t, doc)
		if doc == "README.md" && len(blocks) == 0 {
			t.Error("README.md has no ```go block, want some")
		}
		for _, b := range blocks {
			if !b.foundIn(files) {
				t.Errorf("%s", b.explain(files))
			}
		}
	}
}

// docFiles returns README.md and every .md file under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// A line is a line of text, normalised, with where it came from.
type line struct {
	text string // its words joined by single spaces
	num  int    // 1-based
}

// normalise returns the non-blank lines of text, from line first on.
func normalise(text []string, first int) []line {
	var lines []line
	for i, s := range text {
		if s := strings.Join(strings.Fields(s), " "); s != "" {
			lines = append(lines, line{s, first + i})
		}
	}
	return lines
}

// A block is a ```go block of a Markdown file, split into its leading
// import declarations and the rest.
type block struct {
	doc           string // the Markdown file
	start         int    // the line of its ```go fence
	imports, body []line
}

func goBlocks(t *testing.T, path string) []block {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks []block
		text   []string
		start  int // 0: outside a ```go block
	)
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; sc.Scan(); n++ {
		s := sc.Text()
		switch {
		case start == 0 && strings.TrimSpace(s) == "```go":
			start, text = n, nil
		case start != 0 && strings.TrimSpace(s) == "```":
			blocks = append(blocks, splitImports(path, start, normalise(text, start+1)))
			start = 0
		case start != 0:
			text = append(text, s)
		}
	}
	if start != 0 {
		t.Fatalf("%s:%d: ```go block never closed", path, start)
	}
	return blocks
}

// splitImports splits off the block's leading import declarations.
func splitImports(doc string, start int, lines []line) block {
	n, inGroup := 0, false
	for ; n < len(lines); n++ {
		s := lines[n].text
		switch {
		case inGroup:
			inGroup = s != ")"
		case s == "import (":
			inGroup = true
		case strings.HasPrefix(s, "import "):
		default:
			return block{doc, start, lines[:n], lines[n:]}
		}
	}
	return block{doc, start, lines, nil}
}

// goFiles returns the normalised lines of every Go file of the module, by
// path; bench/ is a module of its own.
func goFiles(t *testing.T) map[string][]line {
	t.Helper()
	files := make(map[string][]line)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (path == "bench" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "."):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go"):
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[path] = normalise(strings.Split(string(data), "\n"), 1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// foundIn reports whether one file holds both parts of b.
func (b block) foundIn(files map[string][]line) bool {
	for _, f := range files {
		if contains(f, b.imports) && contains(f, b.body) {
			return true
		}
	}
	return false
}

// contains reports whether run appears in f as a contiguous run.
func contains(f, run []line) bool {
	for i := range f {
		if matched(f[i:], run) == len(run) {
			return true
		}
	}
	return len(run) == 0
}

// matched returns how many lines of run match f from its start.
func matched(f, run []line) int {
	n := 0
	for n < len(run) && n < len(f) && f[n].text == run[n].text {
		n++
	}
	return n
}

// explain says where b drifted: the file that holds the longest start of
// its body, and the line of the Markdown file where they part.
func (b block) explain(files map[string][]line) string {
	part := b.body
	if len(part) == 0 || bodyFound(files, part) {
		part = b.imports // the body is somewhere, but not with these imports
	}
	best, bestFile, at := 0, "", 0
	for path, f := range files {
		for i := range f {
			if n := matched(f[i:], part); n > best || n == best && n > 0 && path < bestFile {
				best, bestFile, at = n, path, f[i].num
			}
		}
	}
	msg := fmt.Sprintf("%s:%d: the ```go block is in no Go file of the module, so nothing compiles it", b.doc, b.start)
	if best == 0 {
		return msg + fmt.Sprintf("; no file has its line %s:%d %q. Make it an Example, or a function in internal/testing/readme", b.doc, part[0].num, part[0].text)
	}
	msg += fmt.Sprintf("; %s:%d holds %s:%d-%d", bestFile, at, b.doc, part[0].num, part[best-1].num)
	if best < len(part) {
		msg += fmt.Sprintf(", then %s:%d %q differs", b.doc, part[best].num, part[best].text)
	} else {
		msg += ", but not its imports, or its imports but not its body"
	}
	return msg + fmt.Sprintf(". Change %s or the Go file until they agree", b.doc)
}

func bodyFound(files map[string][]line, body []line) bool {
	for _, f := range files {
		if contains(f, body) {
			return true
		}
	}
	return false
}
