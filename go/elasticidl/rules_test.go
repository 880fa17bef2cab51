package elasticidl

import (
	"reflect"
	"strings"
	"testing"
)

func TestChecksCoverEveryRule(t *testing.T) {
	ids := map[string]bool{}
	for _, r := range Rules() {
		ids[r.ID] = true
	}
	covered := map[string]bool{}
	for i, c := range checks {
		if len(c.rules) == 0 {
			t.Errorf("check %d names no rule", i)
		}
		for _, r := range c.rules {
			if !ids[r] {
				t.Errorf("check %d names %q, which is not in Rules", i, r)
			}
			covered[r] = true
		}
	}
	for _, r := range launchRules {
		if !ids[r] {
			t.Errorf("launch rule %q is not in Rules", r)
		}
		if covered[r] {
			t.Errorf("launch rule %q has a Go check", r)
		}
		covered[r] = true
	}
	for _, r := range Rules() {
		if !covered[r.ID] {
			t.Errorf("rule %q (%s) has no Go check: add one to checks at the reference's position", r.ID, r.Requires)
		}
	}
}

func TestChecksReportOnlyTheirRules(t *testing.T) {
	for _, v := range loadVectors(t) {
		if v.binary == nil {
			continue
		}
		task, err := Decode(v.binary, FormatBinary, v.version)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		view := task.view()
		for i, c := range checks {
			r := &report{}
			c.run(view, r)
			for _, found := range r.out {
				if !contains(c.rules, found.Rule) {
					t.Errorf("%s: check %d reports %s, which it does not name", v.name, i, found.Rule)
				}
			}
		}
	}
}

// Every key of the Go PyTorchJob types is a key of the reference's table K.
func TestJobKeysAreTheReferenceKeys(t *testing.T) {
	keys := map[string]bool{}
	for _, p := range k8sKeys {
		keys[p.value] = true
	}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Ptr || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			name := strings.Split(f.Tag.Get("json"), ",")[0]
			if !keys[name] {
				t.Errorf("%s.%s: key %q is not in elastic_idl._backend.pytorchjob.K", typ.Name(), f.Name, name)
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(PyTorchJob{}))
}

func TestPyRegexpIsPythonsRe(t *testing.T) {
	for _, tc := range []struct {
		pattern, in string
		want        bool
	}{
		{dns1035Pattern, "job", true},
		{dns1035Pattern, "job\n", true}, // Python's $ matches before a final newline
		{dns1035Pattern, "job\n\n", false},
		{dns1035Pattern, "Job", false},
		{durationPattern, "\u0663s", true}, // \d is any decimal digit
		{durationPattern, "1.5s", true},
		{durationPattern, "1.1234567891s", false},
	} {
		if got := pyRegexp(tc.pattern).MatchString(tc.in); got != tc.want {
			t.Errorf("%q matches %q: %v, want %v", tc.pattern, tc.in, got, tc.want)
		}
	}
}
