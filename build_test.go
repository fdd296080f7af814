package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// buildFlags is how one build of herd is made.
type buildFlags struct {
	env     []string // CGO_* as the go command sees them
	flags   []string // the rest, e.g. -trimpath
	gcflags []string
	ldflags []string
	tags    []string
}

// TestBuildFlagsAgree: scripts/build.sh is the one place herd's build flags
// are decided (docs/PERFORMANCE.md "First start (issue 26)"). `make build`
// and the Dockerfile call it; .goreleaser.yaml must repeat it, since
// GoReleaser's go builder cannot call a script. This fails when they drift.
func TestBuildFlagsAgree(t *testing.T) {
	makefile := readRepoFile(t, "Makefile")
	m := regexp.MustCompile(`(?m)^GOTAGS\s*\?=[ \t]*(\S*)[ \t]*$`).FindStringSubmatch(makefile)
	if m == nil {
		t.Fatal("Makefile: no `GOTAGS ?=` line, the one place build tags are set")
	}
	makeTags := splitTags(m[1])
	if !regexp.MustCompile(`(?m)^build:.*\n\t@?scripts/build\.sh herd$`).MatchString(makefile) {
		t.Error("Makefile: `make build` does not call scripts/build.sh herd")
	}
	if !regexp.MustCompile(`(?m)^RUN make build$`).MatchString(readRepoFile(t, "Dockerfile")) {
		t.Error("Dockerfile: the binary is not built by `RUN make build` (scripts/build.sh)")
	}

	script := scriptFlags(t, strings.Join(makeTags, ","))
	if !slices.Equal(script.tags, makeTags) {
		t.Errorf("scripts/build.sh -tags %q, Makefile GOTAGS %q", script.tags, makeTags)
	}
	if mm := regexp.MustCompile(`(?m)^export CGO_CFLAGS \?= (.*)$`).FindStringSubmatch(makefile); mm == nil || !slices.Contains(script.env, "CGO_CFLAGS="+mm[1]) {
		t.Errorf("Makefile's CGO_CFLAGS (for make test) %q, scripts/build.sh's %q", mm, script.env)
	}

	var rel struct {
		Builds []struct {
			Env       []string `yaml:"env"`
			Flags     []string `yaml:"flags"`
			Gcflags   []string `yaml:"gcflags"`
			Ldflags   []string `yaml:"ldflags"`
			Tags      []string `yaml:"tags"`
			Overrides []struct {
				Env []string `yaml:"env"`
			} `yaml:"overrides"`
		} `yaml:"builds"`
	}
	if err := yaml.Unmarshal([]byte(readRepoFile(t, ".goreleaser.yaml")), &rel); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	if len(rel.Builds) != 1 {
		t.Fatalf(".goreleaser.yaml: %d builds, want 1", len(rel.Builds))
	}
	b := rel.Builds[0]
	for _, c := range []struct {
		name            string
		script, release []string
	}{
		{"env", script.env, b.Env},
		{"flags", script.flags, b.Flags},
		{"gcflags", script.gcflags, b.Gcflags},
		{"ldflags", script.ldflags, b.Ldflags},
		{"tags", script.tags, b.Tags},
	} {
		if !slices.Equal(sorted(c.script), sorted(c.release)) {
			t.Errorf(".goreleaser.yaml %s = %q, scripts/build.sh's = %q", c.name, c.release, c.script)
		}
	}
	for i, o := range b.Overrides {
		for _, e := range script.env {
			if !slices.Contains(o.Env, e) {
				t.Errorf(".goreleaser.yaml overrides[%d] env lacks %s", i, e)
			}
		}
	}
}

// scriptFlags runs scripts/build.sh with a stand-in go command that prints
// what it was given, and sorts its arguments.
func scriptFlags(t *testing.T, gotags string) buildFlags {
	t.Helper()
	fake := filepath.Join(t.TempDir(), "go")
	stub := "#!/bin/sh\necho \"CGO_ENABLED=$CGO_ENABLED\"\necho \"CGO_CFLAGS=$CGO_CFLAGS\"\nprintf '%s\\n' \"$@\"\n"
	if err := os.WriteFile(fake, []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "scripts/build.sh", "OUT")
	// An empty CGO_CFLAGS: the script's own default, not the caller's.
	cmd.Env = append(os.Environ(), "GO="+fake, "GOTAGS="+gotags, "CGO_CFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/build.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) < 5 || lines[2] != "build" || !slices.Equal(lines[len(lines)-3:], []string{"-o", "OUT", "."}) {
		t.Fatalf("scripts/build.sh ran go with %q, want build … -o OUT .", lines)
	}
	f := buildFlags{env: lines[:2]}
	args := lines[3 : len(lines)-3]
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-p":
			// How many packages compile at once: the build's speed, not
			// the binary, so the release does not repeat it.
			i++
		case "-tags", "-gcflags", "-ldflags":
			if i+1 == len(args) {
				t.Fatalf("scripts/build.sh: %s without a value", args[i])
			}
			v := args[i+1]
			i++
			switch args[i-1] {
			case "-tags":
				f.tags = splitTags(v)
			case "-gcflags":
				f.gcflags = append(f.gcflags, v)
			case "-ldflags":
				f.ldflags = append(f.ldflags, v)
			}
		default:
			f.flags = append(f.flags, args[i])
		}
	}
	return f
}

func splitTags(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
