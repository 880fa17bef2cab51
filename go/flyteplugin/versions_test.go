package flyteplugin

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// flytepluginsVersion is the flyteplugins release this module builds against:
// the Flyte 1.16 line's latest tag.
const flytepluginsVersion = "v1.16.8"

// flyteModules are required by flyteplugins at v0.0.0 through replaces to ../,
// which a dependent module ignores: this module replaces them with their tags
// of the same release.
var flyteModules = []string{
	"github.com/flyteorg/flyte/flyteidl",
	"github.com/flyteorg/flyte/flytepropeller",
	"github.com/flyteorg/flyte/flytestdlib",
}

type goMod struct {
	Module  struct{ Path string }
	Require []struct {
		Path    string
		Version string
	}
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path, Version string }
	}
}

func goOutput(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

func readGoMod(t *testing.T, dir, file string) goMod {
	t.Helper()
	var m goMod
	if err := json.Unmarshal(goOutput(t, dir, "mod", "edit", "-json", file), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// flyteGoMod is the go.mod of a flyte module at flytepluginsVersion, from the module cache.
func flyteGoMod(t *testing.T, module string) goMod {
	var dl struct{ GoMod, Error string }
	out := goOutput(t, ".", "mod", "download", "-json", module+"@"+flytepluginsVersion)
	if err := json.Unmarshal(out, &dl); err != nil || dl.Error != "" {
		t.Fatalf("go mod download: %v %s", err, dl.Error)
	}
	return readGoMod(t, ".", dl.GoMod)
}

func flytepluginsGoMod(t *testing.T) goMod {
	return flyteGoMod(t, "github.com/flyteorg/flyte/flyteplugins")
}

// A propeller build that adds this module (and go/kubeflow) keeps its versions:
// every module our go.mod files require, flyteplugins requires too, at the same
// or a newer version; our replaces are the release tags of flyteplugins' local
// ones, and otherwise only what flytepropeller's go.mod (the main module of a
// propeller build, whose replaces are the only ones Go applies) replaces too.
// flyteplugins' own go.mod also pins k8s.io/klog/v2 to v2.60.1 for its own
// builds; propeller does not, so neither does this module: its tests run with
// the klog propeller runs (v2.130.1), not an older one.
func TestRequirementsNoNewerThanFlyteplugins(t *testing.T) {
	theirs := flytepluginsGoMod(t)
	want := map[string]string{}
	for _, r := range theirs.Require {
		want[r.Path] = r.Version
	}
	for _, r := range theirs.Replace {
		if strings.HasPrefix(r.New.Path, ".") {
			want[r.Old.Path] = flytepluginsVersion
		}
	}
	want["github.com/flyteorg/flyte/flyteplugins"] = flytepluginsVersion
	checked := 0
	for _, dir := range []string{".", "../kubeflow"} {
		ours := readGoMod(t, dir, "go.mod")
		for _, r := range ours.Require {
			if strings.HasPrefix(r.Path, "github.com/elastic-idl/elastic-idl/") {
				continue
			}
			v, ok := want[r.Path]
			switch {
			case !ok:
				t.Errorf("%s/go.mod requires %s %s, which flyteplugins %s does not require", dir, r.Path, r.Version, flytepluginsVersion)
			case compareVersions(r.Version, v) > 0:
				t.Errorf("%s/go.mod requires %s %s, newer than flyteplugins' %s", dir, r.Path, r.Version, v)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d requirements; expected the plugin's whole graph", checked)
	}

	ours := readGoMod(t, ".", "go.mod")
	replaced := map[string]string{}
	for _, r := range ours.Replace {
		replaced[r.Old.Path] = r.New.Path + " " + r.New.Version
	}
	for _, m := range flyteModules {
		if got := replaced[m]; got != m+" "+flytepluginsVersion {
			t.Errorf("go.mod replaces %s with %q, want its tag %s", m, got, flytepluginsVersion)
		}
	}
	propeller := map[string]string{}
	for _, r := range flyteGoMod(t, "github.com/flyteorg/flyte/flytepropeller").Replace {
		propeller[r.Old.Path] = r.New.Path + " " + r.New.Version
	}
	for _, r := range ours.Replace {
		if strings.HasPrefix(r.New.Path, ".") {
			t.Errorf("go.mod replaces %s with the directory %s: a consumer ignores it (go.work is for development)", r.Old.Path, r.New.Path)
			continue
		}
		if slices.Contains(flyteModules, r.Old.Path) {
			continue
		}
		if got, want := r.New.Path+" "+r.New.Version, propeller[r.Old.Path]; got != want {
			t.Errorf("go.mod replaces %s => %s; flytepropeller %s replaces it with %q: a propeller build would not run what this module tests",
				r.Old.Path, got, flytepluginsVersion, want)
		}
	}
}

// compareVersions orders two module versions as semantic versions (pseudo-versions
// are pre-releases); "+incompatible" is ignored.
func compareVersions(a, b string) int {
	split := func(v string) ([3]int, string) {
		v = strings.TrimSuffix(strings.TrimPrefix(v, "v"), "+incompatible")
		core, pre, _ := strings.Cut(v, "-")
		var n [3]int
		for i, part := range strings.SplitN(core, ".", 3) {
			n[i], _ = strconv.Atoi(part)
		}
		return n, pre
	}
	an, ap := split(a)
	bn, bp := split(b)
	for i := range an {
		if an[i] != bn[i] {
			if an[i] < bn[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case ap == bp:
		return 0
	case ap == "":
		return 1
	case bp == "":
		return -1
	}
	ai, bi := strings.Split(ap, "."), strings.Split(bp, ".")
	for i := 0; i < len(ai) && i < len(bi); i++ {
		if ai[i] == bi[i] {
			continue
		}
		x, xerr := strconv.Atoi(ai[i])
		y, yerr := strconv.Atoi(bi[i])
		switch {
		case xerr == nil && yerr == nil:
			if x < y {
				return -1
			}
			return 1
		case xerr == nil:
			return -1
		case yerr == nil:
			return 1
		case ai[i] < bi[i]:
			return -1
		default:
			return 1
		}
	}
	return len(ai) - len(bi)
}

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"v1.2.3", "v1.2.3", 0}, {"v1.2.3", "v1.10.0", -1}, {"v1.0.0-rc.1", "v1.0.0", -1},
		{"v0.0.0-20240719175910-8a7402abbf56", "v0.0.0-20250101000000-000000000000", -1},
		{"v2.2.0+incompatible", "v2.1.0+incompatible", 1}, {"v1.0.0-rc.2", "v1.0.0-rc.10", -1},
	} {
		if got := compareVersions(c.a, c.b); (got > 0) != (c.want > 0) || (got < 0) != (c.want < 0) {
			t.Errorf("compareVersions(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
