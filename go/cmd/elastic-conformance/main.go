// Command elastic-conformance is the Go backend's conformance entry point
// (contract/README.md): it reads a request (JSON, at most 32 MiB) on stdin and
// writes the response (JSON) on stdout.
//
// Exit codes: 0 answered (per-case errors are part of the answer); 1 the
// response could not be written; 2 usage, or an unusable request (unreadable,
// larger than 32 MiB, malformed, or missing a key).
package main

import (
	"fmt"
	"io"
	"os"

	_ "github.com/elastic-idl/elastic-idl/go/elasticidl" // registers the implementation
	"github.com/elastic-idl/elastic-idl/go/internal/conformance"
)

const usage = `usage: elastic-conformance < request.json > response.json

Reads a conformance request (JSON, at most 32 MiB) on stdin and writes the
response (JSON) on stdout; see contract/README.md. Exit codes: 0 answered,
1 the response could not be written, 2 usage or an unusable request.
`

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprint(stderr, usage)
		return 2
	}
	request, err := conformance.Read(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "conformance: bad request: %v\n", err)
		return 2
	}
	response, err := conformance.Respond(request)
	if err != nil {
		fmt.Fprintf(stderr, "conformance: bad request: %v\n", err)
		return 2
	}
	if _, err := stdout.Write(response); err != nil {
		fmt.Fprintf(stderr, "conformance: %v\n", err)
		return 1
	}
	return 0
}
