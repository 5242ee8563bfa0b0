package report

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCommand(t *testing.T) {
	dir := filepath.Join("..", "replay", "testdata")
	cfg, log := filepath.Join(dir, "compare", "old.yaml"), filepath.Join(dir, "incidents", "log.jsonl")
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var out, errb bytes.Buffer
	if err := Command(context.Background(), []string{"--log", log, "--config", cfg, "--price", "gpt-4o=0.005"}, now, nil, &out, &errb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"since 2026-11-01T00:00:00Z (0 earlier lines skipped)", "openai-direct × gpt-4o", "1. False ejections: 0 of 2",
		"310 requests failed over", "tokens unknown"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// An audit log without these requests: said, not silently zero.
	out.Reset()
	if err := Command(context.Background(), []string{"--log", log, "--config", cfg, "--audit-log", cfg + "-missing"}, now, nil, &out, &errb); err == nil {
		t.Error("a missing audit log is accepted")
	}
	if err := Command(context.Background(), []string{"--log", log, "--config", cfg, "--audit-log", log}, now, nil, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "310 moved requests have no record in the audit log") {
		t.Errorf("no note on the unaudited requests:\n%s", out.String())
	}
	// --since after the log: every line is skipped.
	out.Reset()
	if err := Command(context.Background(), []string{"--log", log, "--config", cfg, "--since", "2026-11-30T11:00:00Z", "--output", "json"}, now, nil, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"beforeSince": 3910`) {
		t.Errorf("since after the log:\n%s", out.String())
	}
	for _, bad := range [][]string{
		{"--log", log},
		{"--log", log, "--config", cfg, "--price", "gpt-4o"},
		{"--log", log, "--config", cfg, "--price", "gpt-4o=-1"},
		{"--log", log, "--config", cfg, "--since", "last month"},
		{"--log", log, "--config", cfg, "--output", "xml"},
		{"--log", log, "--config", cfg, "--audit-log", "-"},
		{"--log", "missing.jsonl", "--config", cfg},
	} {
		if err := Command(context.Background(), bad, now, nil, &out, &errb); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
