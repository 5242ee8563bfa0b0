package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/internal/audit"
)

func TestAuditVerifyCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := audit.Open(audit.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		l.Record(&audit.Line{RequestID: "r", Client: "team/search", Status: 200, Attempts: []audit.Attempt{}})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"audit", "verify", path}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "ok: 5 line(s)") {
		t.Fatalf("intact log: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	b, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(b), "\n")
	lines[1] = strings.Replace(lines[1], `"status":200`, `"status":403`, 1)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"audit", "verify", path}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), path+":2:") || !strings.Contains(errOut.String(), "edited") {
		t.Fatalf("edited log: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if code := run(context.Background(), []string{"audit", "verify"}, &out, &errOut); code == 0 {
		t.Fatal("verify without files succeeded")
	}
}
