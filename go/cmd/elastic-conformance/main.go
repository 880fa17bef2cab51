// Command elastic-conformance is the Go backend's conformance entry point
// (contract/README.md): it reads a request (JSON) on stdin and writes the
// response (JSON) on stdout.
//
// Exit codes: 0 answered (per-case errors are part of the answer), 2 usage or an
// unusable request.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
)

const usage = `usage: elastic-conformance < request.json > response.json

Reads a conformance request (JSON) on stdin and writes the response (JSON) on
stdout; see contract/README.md.
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
	request, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "conformance: bad request: %v\n", err)
		return 2
	}
	response, err := elasticidl.RespondConformance(request)
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
