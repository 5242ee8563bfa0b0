package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestEveryCommandHelps: `switchyard <command> --help` (and -h) exits 0 and prints a usage line and
// a description of what the command does, not only its flags.
func TestEveryCommandHelps(t *testing.T) {
	flagLine := regexp.MustCompile(`^\s+-\S`)
	var names [][]string
	for name := range commands {
		names = append(names, []string{name})
	}
	names = append(names, []string{"audit", "verify"})
	for _, name := range names {
		for _, h := range []string{"--help", "-h"} {
			var out, errb bytes.Buffer
			args := append(append([]string{}, name...), h)
			code := run(context.Background(), args, &out, &errb)
			text := out.String() + errb.String()
			if code != 0 {
				t.Errorf("%s: exit %d\n%s", strings.Join(args, " "), code, text)
				continue
			}
			lines := strings.Split(text, "\n")
			if !strings.HasPrefix(lines[0], "Usage: switchyard "+name[0]) {
				t.Errorf("%s: first line %q, want a usage line", strings.Join(args, " "), lines[0])
			}
			prose := 0
			for _, l := range lines[1:] {
				if strings.TrimSpace(l) != "" && !flagLine.MatchString(l) && !strings.HasPrefix(l, "    \t") && l != "Flags:" {
					prose++
				}
			}
			if prose == 0 {
				t.Errorf("%s: no description, only flags:\n%s", strings.Join(args, " "), text)
			}
		}
	}
}

func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "switchyard ") ||
			!strings.Contains(out.String(), "(commit ") {
			t.Errorf("%v: exit %d, %q %q", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"version", "extra"}, &out, &errb); code != 1 || out.Len() != 0 {
		t.Errorf("version extra: exit %d, %q", code, out.String())
	}
}
