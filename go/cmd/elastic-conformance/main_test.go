package main

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/elastic-idl/elastic-idl/go/internal/conformance"
)

// endless is a request of n bytes made up as it is read: a JSON string that never ends.
type endless struct{ read, n int }

func (e *endless) Read(p []byte) (int, error) {
	if e.read == e.n {
		return 0, io.EOF
	}
	k := min(len(p), e.n-e.read)
	for i := range p[:k] {
		p[i] = 'a'
	}
	if e.read == 0 {
		p[0] = '"'
	}
	e.read += k
	return k, nil
}

// A 64 MiB request is refused after reading one byte more than the limit, with
// about the limit's memory (the command read and copied it whole before).
func TestTooLargeRequestIsRefusedBeforeACopy(t *testing.T) {
	in := &endless{n: 64 << 20}
	var out, errOut bytes.Buffer
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code := run(nil, in, &out, &errOut)
	runtime.ReadMemStats(&after)
	if code != 2 || !strings.Contains(errOut.String(), "larger than") || out.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	if in.read > conformance.MaxRequestBytes+1 {
		t.Errorf("read %d bytes of a request over the %d limit", in.read, conformance.MaxRequestBytes)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*conformance.MaxRequestBytes {
		t.Errorf("allocated %d bytes", alloc)
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		stdin string
		code  int
		out   string
	}{
		{[]string{"--help"}, "", 0, "usage: elastic-conformance"},
		{[]string{"-x"}, "", 2, ""},
		{nil, "{", 2, ""},
		{nil, `{"version": 1, "cases": "x"}`, 2, ""},
		{nil, `{"version": 1, "cases": []}`, 0, `"results":{}`},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, strings.NewReader(tc.stdin), &out, &errOut)
		if code != tc.code || !strings.Contains(out.String(), tc.out) {
			t.Errorf("%v %q: exit %d, stdout %q, stderr %q", tc.args, tc.stdin, code, out.String(), errOut.String())
		}
	}
	var errOut bytes.Buffer
	if code := run(nil, strings.NewReader(`{"version": 1, "cases": []}`), failingWriter{}, &errOut); code != 1 {
		t.Errorf("an unwritable stdout: exit %d", code)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }
