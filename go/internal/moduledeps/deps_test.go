// Package moduledeps holds one test: the core module
// (github.com/elastic-idl/elastic-idl/go) depends on the standard library and
// google.golang.org/protobuf only. Kubernetes and Flyte types live in the
// go/kubeflow and go/flyteplugin modules, so a program that imports the core
// builds nothing else.
package moduledeps

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const (
	coreModule = "github.com/elastic-idl/elastic-idl/go"
	protobuf   = "google.golang.org/protobuf"
)

// goCmd runs the go command in the core module's root, outside any workspace
// (go/go.work would add the other modules to the graph).
func goCmd(t *testing.T, args ...string) []byte {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(cmd.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
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

// allowedImport is a package the core's code (tests included) may import.
func allowedImport(path string, standard bool) bool {
	return standard || path == coreModule || strings.HasPrefix(path, coreModule+"/") ||
		path == protobuf || strings.HasPrefix(path, protobuf+"/")
}

// The packages the core's packages and their tests import, all the way down.
func TestCoreImportsOnlyStdlibAndProtobuf(t *testing.T) {
	out := goCmd(t, "list", "-deps", "-test", "-f", "{{.ImportPath}} {{.Standard}}", "./...")
	var bad []string
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, standard, _ := strings.Cut(line, " ")
		// A test binary's own packages are named "pkg.test" or "pkg [pkg.test]".
		path, _, _ = strings.Cut(path, " ")
		path = strings.TrimSuffix(path, ".test")
		seen++
		if !allowedImport(path, standard == "true") {
			bad = append(bad, path)
		}
	}
	if seen < 10 {
		t.Fatalf("go list -deps listed %d packages; expected the core's packages and their imports", seen)
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		t.Errorf("the core module imports packages outside the standard library and %s:\n  %s",
			protobuf, strings.Join(bad, "\n  "))
	}
}

// go.mod requires google.golang.org/protobuf and nothing else, and replaces nothing.
func TestCoreGoModRequiresOnlyProtobuf(t *testing.T) {
	var mod struct {
		Module  struct{ Path string }
		Require []struct {
			Path     string
			Version  string
			Indirect bool
		}
		Replace []json.RawMessage
	}
	if err := json.Unmarshal(goCmd(t, "mod", "edit", "-json"), &mod); err != nil {
		t.Fatal(err)
	}
	if mod.Module.Path != coreModule {
		t.Fatalf("module path %q, want %q", mod.Module.Path, coreModule)
	}
	if len(mod.Require) != 1 || mod.Require[0].Path != protobuf {
		t.Errorf("go.mod requires %+v; the core requires %s only", mod.Require, protobuf)
	}
	if len(mod.Replace) != 0 {
		t.Errorf("go.mod has replace directives %s; a consumer ignores them", mod.Replace)
	}
}
