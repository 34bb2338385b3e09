package lock_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestLinks: every relative link of README.md and of the guides under
// docs/ points at a file that exists, and every #anchor at a heading of
// its file, so that a guide moved or a heading renamed breaks no link.
func TestLinks(t *testing.T) {
	for _, doc := range docFiles(t) {
		for _, l := range links(t, doc) {
			path, anchor, _ := strings.Cut(l.target, "#")
			if path == "" {
				path = doc
			} else {
				path = filepath.Join(filepath.Dir(doc), path)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s:%d: link %q: %v", doc, l.num, l.target, err)
				continue
			}
			if anchor != "" && !headings(t, path)[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", doc, l.num, l.target, path, anchor)
			}
		}
	}
}

// A link is the target of a Markdown link, with its line.
type link struct {
	target string
	num    int
}

var (
	linkRE   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// links returns the relative links of the Markdown file path, outside
// fenced code blocks.
func links(t *testing.T, path string) []link {
	t.Helper()
	var ls []link
	for i, s := range prose(t, path) {
		for _, m := range linkRE.FindAllStringSubmatch(s, -1) {
			if !schemeRE.MatchString(m[1]) {
				ls = append(ls, link{m[1], i + 1})
			}
		}
	}
	return ls
}

// headings returns the anchors of the headings of the Markdown file path,
// as GitHub makes them: lower case, spaces as hyphens, punctuation left
// out, and -1, -2, ... after a repeated one.
func headings(t *testing.T, path string) map[string]bool {
	t.Helper()
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, s := range prose(t, path) {
		title, ok := strings.CutPrefix(strings.TrimLeft(s, "#"), " ")
		if !ok || !strings.HasPrefix(s, "#") {
			continue
		}
		a := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(title))
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// prose returns the lines of the Markdown file path, with those of fenced
// code blocks blanked.
func prose(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		s := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(s), "```") {
			fenced = !fenced
			s = ""
		}
		if fenced {
			s = ""
		}
		lines = append(lines, s)
	}
	return lines
}
