// Package conformance is the Go backend's conformance entry point
// (contract/README.md, "The conformance entry point") for cmd/elastic-conformance
// and the tests; it is no API. Package elasticidl, which holds the decoders the
// answers need, registers its implementation when it is linked in.
package conformance

import (
	"errors"
	"fmt"
	"io"
)

// MaxRequestBytes is the largest request Read accepts (32 MiB): room for every
// contract vector at once, each case's input at most elasticidl.MaxTaskBytes.
const MaxRequestBytes = 32 << 20

// ErrTooLarge is the error of Read for a request larger than MaxRequestBytes.
var ErrTooLarge = fmt.Errorf("the request is larger than %d bytes", MaxRequestBytes)

var respond func(request []byte) ([]byte, error)

// Register sets the implementation of Respond (package elasticidl calls it from init).
func Register(f func(request []byte) ([]byte, error)) { respond = f }

// Read reads a whole request from r, refusing one larger than MaxRequestBytes
// after reading at most one byte more.
// The buffer doubles as it fills, so what it allocates is at most about twice
// what it read.
func Read(r io.Reader) ([]byte, error) {
	request := make([]byte, 0, 64<<10)
	for {
		if len(request) == cap(request) {
			request = append(request, make([]byte, min(cap(request), MaxRequestBytes+1-len(request)))...)[:len(request)]
		}
		n, err := r.Read(request[len(request):min(cap(request), MaxRequestBytes+1)])
		request = request[:len(request)+n]
		switch {
		case len(request) > MaxRequestBytes:
			return nil, ErrTooLarge
		case err == io.EOF:
			return request, nil
		case err != nil:
			return nil, err
		}
	}
}

// Respond answers a conformance request (JSON, UTF-8). A per-case failure is part
// of the answer; an error means the request itself is unusable (where the
// reference's entry point exits 2: a malformed request, a missing key, render
// options that are no keyword arguments of render_pytorchjob).
func Respond(request []byte) ([]byte, error) {
	if respond == nil {
		return nil, errors.New("package elasticidl is not linked in")
	}
	return respond(request)
}
