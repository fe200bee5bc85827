// Package comments finds figures in the comments of the repository's
// deployment manifests and examples, so that tests can hold them to the
// defaults of the code they describe: a comment that says "138 services
// are watched" goes stale silently when the code changes, a test does not.
package comments

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Dirs are the folders, relative to the repository's root, whose comments
// are searched: the deployment manifests and the examples (compose
// included).
var Dirs = []string{"deploy", "examples"}

// Match is one match of a pattern in a comment.
type Match struct {
	// File and Line locate the comment block's first line.
	File string
	Line int
	// Groups are the pattern's submatches (Groups[0] the whole match).
	Groups []string
}

// Find returns the matches of re in the comments of the YAML and HCL
// files under Dirs of the repository at root. Consecutive comment lines
// are joined with single spaces before matching, so that a figure and
// the words around it may wrap across lines.
func Find(root string, re *regexp.Regexp) ([]Match, error) {
	var out []Match
	for _, d := range Dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			switch filepath.Ext(path) {
			case ".yaml", ".yml", ".hcl":
			default:
				return nil
			}
			blocks, err := commentBlocks(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, b := range blocks {
				for _, g := range re.FindAllStringSubmatch(b.text, -1) {
					out = append(out, Match{File: rel, Line: b.line, Groups: g})
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

type block struct {
	line int
	text string
}

// commentBlocks returns the runs of consecutive comment lines of a file,
// each joined into one line. A comment is what follows a # that starts
// the line or follows whitespace (a # inside a value, such as a URL
// fragment, is not one).
func commentBlocks(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []block
	var cur []string
	start := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, block{line: start, text: strings.Join(cur, " ")})
			cur = nil
		}
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		i := strings.Index(l, "#")
		for i > 0 && l[i-1] != ' ' && l[i-1] != '\t' {
			j := strings.Index(l[i+1:], "#")
			if j < 0 {
				i = -1
				break
			}
			i += j + 1
		}
		if i < 0 {
			flush()
			continue
		}
		if len(cur) == 0 {
			start = n
		}
		cur = append(cur, strings.TrimSpace(l[i+1:]))
	}
	flush()
	return out, sc.Err()
}
