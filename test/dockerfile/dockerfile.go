// Package dockerfile reads the project's Dockerfile for the tests that
// check it: its stages and their instructions, as far as a Dockerfile
// without heredocs or parser directives other than comments needs.
// Continuation lines (a trailing backslash) are joined, comment lines
// dropped, and each instruction keeps its arguments as written.
package dockerfile

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Instruction is one instruction: its keyword in capitals (FROM, RUN,
// HEALTHCHECK, ...) and the rest of it, continuation lines joined.
type Instruction struct {
	Cmd, Args string
	Line      int // where it starts in the file, from 1
}

// Stage is a build stage: its base image, its name (AS ...), if any, and
// its instructions after FROM.
type Stage struct {
	From, Name   string
	Instructions []Instruction
}

// File is a parsed Dockerfile.
type File struct {
	Stages []Stage
}

// Parse reads the Dockerfile at path.
func Parse(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the Dockerfile: %w", err)
	}
	var f File
	var cur *Instruction
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (cur == nil && line == "") {
			continue
		}
		if cur == nil {
			cmd, args, _ := strings.Cut(line, " ")
			cur = &Instruction{Cmd: strings.ToUpper(cmd), Line: n}
			line = args
		}
		more := strings.HasSuffix(line, "\\")
		cur.Args = strings.TrimSpace(cur.Args + " " + strings.TrimSpace(strings.TrimSuffix(line, "\\")))
		if more {
			continue
		}
		if err := f.add(*cur); err != nil {
			return nil, fmt.Errorf("parsing the Dockerfile: %w", err)
		}
		cur = nil
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the Dockerfile: %w", err)
	}
	if cur != nil {
		return nil, fmt.Errorf("parsing the Dockerfile: line %d continues past the end", cur.Line)
	}
	if len(f.Stages) == 0 {
		return nil, fmt.Errorf("parsing the Dockerfile: no FROM")
	}
	return &f, nil
}

func (f *File) add(in Instruction) error {
	if in.Cmd == "FROM" {
		fields := strings.Fields(in.Args)
		st := Stage{From: fields[0]}
		if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
			st.Name = fields[2]
		} else if len(fields) != 1 {
			return fmt.Errorf("line %d: FROM %s: want IMAGE [AS NAME]", in.Line, in.Args)
		}
		f.Stages = append(f.Stages, st)
		return nil
	}
	if len(f.Stages) == 0 {
		return fmt.Errorf("line %d: %s before FROM", in.Line, in.Cmd)
	}
	st := &f.Stages[len(f.Stages)-1]
	st.Instructions = append(st.Instructions, in)
	return nil
}

// Final is the last stage, the one an image is built of.
func (f *File) Final() *Stage { return &f.Stages[len(f.Stages)-1] }

// Stage returns the stage named name, or nil.
func (f *File) Stage(name string) *Stage {
	for i := range f.Stages {
		if f.Stages[i].Name == name {
			return &f.Stages[i]
		}
	}
	return nil
}

// All returns the stage's instructions of the keyword cmd, in order.
func (s *Stage) All(cmd string) []Instruction {
	var out []Instruction
	for _, in := range s.Instructions {
		if in.Cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// Exec returns the instruction's exec form (a JSON array, as in
// ENTRYPOINT ["a", "b"] or HEALTHCHECK --interval=5s CMD ["a"]): the
// words of the array, after any --flags and, for HEALTHCHECK, CMD.
func (in Instruction) Exec() ([]string, error) {
	rest := in.Args
	for strings.HasPrefix(rest, "--") {
		_, rest, _ = strings.Cut(rest, " ")
		rest = strings.TrimSpace(rest)
	}
	if in.Cmd == "HEALTHCHECK" {
		rest = strings.TrimSpace(strings.TrimPrefix(rest, "CMD"))
	}
	var argv []string
	if err := json.Unmarshal([]byte(rest), &argv); err != nil {
		return nil, fmt.Errorf("line %d: %s is not in exec form (a JSON array): %w", in.Line, in.Cmd, err)
	}
	return argv, nil
}
