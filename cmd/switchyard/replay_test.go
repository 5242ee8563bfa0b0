package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayCompareExitStatus: the process exit status of replay --compare is what a CI gate
// reads: 1 when NEW fails more requests, 0 when it does not, 2 on bad input.
func TestReplayCompareExitStatus(t *testing.T) {
	dir := filepath.Join("..", "..", "internal", "replay", "testdata")
	old := filepath.Join(dir, "compare", "old.yaml")
	log := filepath.Join(dir, "incidents", "log.jsonl")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay", "--compare", old, filepath.Join(dir, "compare", "no-retry.yaml"), "--log", log}, 1, "NEW is worse"},
		{[]string{"replay", "--compare", old, filepath.Join(dir, "compare", "six-in-a-row.yaml"), "--log", log}, 0, ""},
		{[]string{"replay", "--compare", old, "--log", log}, 2, "--compare takes two paths"},
		{[]string{"replay", "--policy", old, "--log", log}, 0, ""},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}
