package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestSetMemoryLimit: 80% of the container's limit, unless GOMEMLIMIT is set or no limit is known.
func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got := setMemoryLimit(env(map[string]string{"SWITCHYARD_MEMORY_LIMIT": "536870912"})); got != 429496728 || debug.SetMemoryLimit(-1) != got {
		t.Errorf("512Mi limit: soft limit %d, runtime %d", got, debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(math.MaxInt64)
	for _, m := range []map[string]string{
		{"SWITCHYARD_MEMORY_LIMIT": "536870912", "GOMEMLIMIT": "100MiB"},
		{"SWITCHYARD_MEMORY_LIMIT": "not a number"},
		{},
	} {
		if got := setMemoryLimit(env(m)); got != -1 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
			t.Errorf("%v: set %d", m, got)
		}
	}
}
