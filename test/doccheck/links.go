package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

var (
	// link is an inline Markdown link or image: [text](target "title").
	link = regexp.MustCompile(`!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// inlineCode is a code span, whose brackets are no links.
	inlineCode = regexp.MustCompile("`[^`]*`")
	// htmlAnchor is an explicit anchor: <a name="x"> or id="x".
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// Doc is a Markdown document as the link check reads it.
type Doc struct {
	// Links are the relative targets of its links, with the line of each.
	Links []Link
	// Anchors are the fragments its headings (and explicit anchors)
	// define, as GitHub renders them.
	Anchors map[string]bool
}

// Link is one relative link of a document.
type Link struct {
	Line   int
	Target string
}

// ReadDoc parses a Markdown document: its relative links outside code,
// and the anchors of its headings.
func ReadDoc(data []byte) Doc {
	d := Doc{Anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			d.Anchors[m[1]] = true
		}
		if strings.HasPrefix(line, "#") {
			slug := Slug(strings.TrimLeft(line, "#"))
			if k := seen[slug]; k > 0 {
				d.Anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				d.Anchors[slug] = true
			}
			seen[slug]++
		}
		for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			t := m[1]
			if t == "" || strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
				continue
			}
			d.Links = append(d.Links, Link{Line: n, Target: t})
		}
	}
	return d
}

// Slug is the anchor GitHub gives a heading's text: lower case, letters,
// digits, hyphens and underscores kept, spaces made hyphens, the rest
// (punctuation, code marks, link brackets) dropped.
func Slug(heading string) string {
	heading = strings.TrimSpace(heading)
	// A link in a heading counts by its text.
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Docs returns the Markdown documents users read, relative to root:
// README.md and every .md file under docs/.
func Docs(root string) ([]string, error) {
	out := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || filepath.Ext(path) != ".md" {
			return err
		}
		rel, err := filepath.Rel(root, path)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	return out, err
}

// CheckLinks reads the documents (relative to root) and returns one line
// per relative link that leads nowhere: a file or directory that does not
// exist, or a fragment that no heading of the Markdown file it names
// defines. It also returns the documents reached by links from each of
// them, so that a caller can tell what an index reaches.
func CheckLinks(root string, docs []string) (problems []string, reaches map[string][]string, err error) {
	parsed := map[string]Doc{}
	read := func(rel string) (Doc, error) {
		if d, ok := parsed[rel]; ok {
			return d, nil
		}
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return Doc{}, err
		}
		d := ReadDoc(data)
		parsed[rel] = d
		return d, nil
	}
	reaches = map[string][]string{}
	for _, rel := range docs {
		d, err := read(rel)
		if err != nil {
			return nil, nil, err
		}
		for _, l := range d.Links {
			target, frag, _ := strings.Cut(l.Target, "#")
			if unescaped, err := url.PathUnescape(target); err == nil {
				target = unescaped
			}
			dest := rel
			if target != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(rel), target)))
			}
			where := fmt.Sprintf("%s:%d: %s", rel, l.Line, l.Target)
			fi, err := os.Stat(filepath.Join(root, dest))
			if err != nil {
				problems = append(problems, where+": no such file")
				continue
			}
			if fi.IsDir() || filepath.Ext(dest) != ".md" {
				continue
			}
			reaches[rel] = append(reaches[rel], dest)
			if frag == "" {
				continue
			}
			td, err := read(dest)
			if err != nil {
				return nil, nil, err
			}
			if !td.Anchors[frag] {
				problems = append(problems, where+": no heading makes that anchor")
			}
		}
	}
	return problems, reaches, nil
}
