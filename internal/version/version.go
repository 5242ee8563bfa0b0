// Package version reports the build's version: the one the Makefile sets at link time, or else
// what the Go toolchain recorded in the binary (go build in a clone, go install module@version).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is set with -ldflags "-X github.com/switchyard-io/switchyard/internal/version.Version=...".
var Version = "dev"

// Commit, when set with -X like Version (make build does), is the commit; else the build info's.
// The toolchain stamps no VCS information in a git worktree nor with -buildvcs=false.
var Commit = ""

// String is the one-line version banner printed by `switchyard version` and logged at start.
func String() string {
	info, _ := debug.ReadBuildInfo()
	v, commit := describe(Version, info)
	if Commit != "" {
		commit = Commit
	}
	return fmt.Sprintf("switchyard %s (commit %s, %s, %s/%s)", v, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// describe is the version and commit of a build whose link-time version is linked (Version) and
// whose build info is info (nil when the binary has none). The commit is the VCS revision `go
// build` stamps in a clone (with "-dirty" when the tree had changes), else the one a `go install
// module@version` pseudo-version names (v0.0.0-20261202150405-abcdef123456), else "unknown". A
// "dev" version takes the module's version when it is a real one (not "(devel)").
func describe(linked string, info *debug.BuildInfo) (version, commit string) {
	version, commit = linked, "unknown"
	if info == nil {
		return version, commit
	}
	mod := info.Main.Version
	if version == "dev" && mod != "" && mod != "(devel)" {
		version = mod
	}
	var revision string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	switch {
	case revision != "":
		commit = revision
		if modified {
			commit += "-dirty"
		}
	case pseudoRevision(mod) != "":
		commit = pseudoRevision(mod)
	}
	return version, commit
}

// pseudoRevision is the commit prefix a pseudo-version ends with (vX.Y.Z-[pre.]yyyymmddhhmmss-
// abcdefabcdef, maybe +incompatible), or "".
func pseudoRevision(v string) string {
	v, _, _ = strings.Cut(v, "+")
	i := strings.LastIndexAny(v, "-.")
	if i < 0 {
		return ""
	}
	rev, rest := v[i+1:], v[:i]
	j := strings.LastIndexAny(rest, "-.")
	if len(rev) != 12 || j < 0 || len(rest)-j-1 != 14 || !isDigits(rest[j+1:]) || !isHex(rev) {
		return ""
	}
	return rev
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}
