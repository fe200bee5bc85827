package main

import "testing"

func TestShellJoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"plain", []string{"-n", "2000", "--tls"}, "-n 2000 --tls"},
		{"spaces and braces", []string{"--agent-hcl", "limits { x = 40 }"}, "--agent-hcl 'limits { x = 40 }'"},
		{"quote", []string{"it's"}, `'it'\''s'`},
		{"empty", []string{""}, "''"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shellJoin(tc.args); got != tc.want {
				t.Errorf("shellJoin(%q) = %s, want %s", tc.args, got, tc.want)
			}
		})
	}
}
