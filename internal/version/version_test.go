package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "6836afa0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6"
	for _, tc := range []struct {
		name, linked  string
		info          *debug.BuildInfo
		version, want string
	}{
		{"no build info", "dev", nil, "dev", "unknown"},
		{"make build", "v0.4.0-3-g6836afa", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")},
			"v0.4.0-3-g6836afa", rev},
		{"go build, clean", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, "dev", rev},
		{"go build, changed tree", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, "dev", rev + "-dirty"},
		{"go build -buildvcs=false", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev", "unknown"},
		{"go install @commit", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202150405-6836afa0c1d2"}},
			"v0.0.0-20261202150405-6836afa0c1d2", "6836afa0c1d2"},
		{"go install @commit after a tag", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.1-0.20261202150405-6836afa0c1d2+incompatible"}},
			"v0.4.1-0.20261202150405-6836afa0c1d2+incompatible", "6836afa0c1d2"},
		{"go install @tag", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "v0.4.0", "unknown"},
		{"a tag that only looks like one", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0-rc.abcdefabcdef"}}, "v1.0.0-rc.abcdefabcdef", "unknown"},
	} {
		v, commit := describe(tc.linked, tc.info)
		if v != tc.version || commit != tc.want {
			t.Errorf("%s: version %q commit %q, want %q %q", tc.name, v, commit, tc.version, tc.want)
		}
	}
}

func TestString(t *testing.T) {
	s := String()
	if !strings.HasPrefix(s, "switchyard ") || !strings.Contains(s, "(commit ") {
		t.Errorf("banner %q", s)
	}
}
