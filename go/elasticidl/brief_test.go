package elasticidl

import (
	"strings"
	"testing"
	"unicode/utf8"

	eidlkubeflowv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/kubeflow/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

// Expected values are what the reference's brief() and one_line() return.
func TestBriefAndOneLineAsPython(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"c10d", "'c10d'"},
		{"it's", `"it's"`},
		{`it's "x"`, `'it\'s "x"'`},
		{"a\tb\nc\\", `'a\tb\nc\\'`},
		{"\x00\x7f\u00a0\u00e9\u3000\U0001F600", `'\x00\x7f\xa0é\u3000😀'`},
		{string(appendWTF8(nil, 0xD800)), `'\ud800'`},
		{strings.Repeat("x", 100), "'" + strings.Repeat("x", 27) + "..." + strings.Repeat("x", 28) + "'"},
	} {
		if got := brief(tc.in); got != tc.want {
			t.Errorf("brief(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if got := briefList([]int32{-1, 0, 1, 2, 3}, func(n int32) string { return briefInt(int64(n)) }); got != "[-1, 0, 1, 2, ...]" {
		t.Errorf("briefList = %s", got)
	}
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"  a \n\t b  c\r\nd ", 500, "a b  c d"},
		{strings.Repeat("é", 10), 8, "ééééé..."},
		{"a\u2028b", 500, "a\u2028b"}, // only \r and \n break a line
	} {
		if got := oneLine(tc.in, tc.limit); got != tc.want {
			t.Errorf("oneLine(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

// As tests/test_validate.py: hostile values give short one-line messages, and the error lists 20.
func TestViolationMessagesAreBounded(t *testing.T) {
	e := &eidlpluginsv1.ElasticConfig{
		MinReplicas: 1, MaxReplicas: 1, NprocPerNode: 1,
		RdzvId: strings.Repeat("x", 100000), RdzvHost: strings.Repeat("h ", 50000),
	}
	for i := -1; i < 100000; i++ {
		e.LocalRanksFilter = append(e.LocalRanksFilter, int32(i))
	}
	e.RdzvOptions = append(e.RdzvOptions, &eidlpluginsv1.RendezvousOption{Key: strings.Repeat("k,\n", 10000), Value: "v"})
	for i := 0; i < 500; i++ {
		e.RdzvOptions = append(e.RdzvOptions, &eidlpluginsv1.RendezvousOption{Value: "v"})
	}
	task, err := NewTask(&eidlkubeflowv1.DistributedPyTorchTrainingTask{ElasticConfig: e})
	if err != nil {
		t.Fatal(err)
	}
	found := task.Violations()
	rules := map[string]bool{}
	for _, v := range found {
		rules[v.Rule] = true
		if utf8.RuneCountInString(v.Message) > maxErrorChars || strings.ContainsAny(v.String(), "\r\n") {
			t.Errorf("%s: a message of %d characters or lines", v.Rule, utf8.RuneCountInString(v.Message))
		}
	}
	for _, rule := range []string{"elastic.rdzv_id.format", "elastic.rdzv_host.format", "elastic.rdzv_options.key",
		"elastic.local_ranks_filter.range"} {
		if !rules[rule] {
			t.Errorf("%s not reported", rule)
		}
	}
	lines := strings.Split((&ValidationError{Violations: found}).Error(), "\n")
	if len(lines) != 1+maxViolationsShown+1 || !strings.HasPrefix(lines[len(lines)-1], "  ... and ") {
		t.Errorf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}
