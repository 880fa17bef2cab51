module github.com/elastic-idl/elastic-idl/go

go 1.19

require google.golang.org/protobuf v1.28.1

// Offline builds on Debian: golang-google-protobuf-dev ships v1.28.1's source
// here, and no module proxy is reachable. A module that requires this one
// ignores the replace and gets google.golang.org/protobuf from its own proxy.
replace google.golang.org/protobuf => /usr/share/gocode/src/google.golang.org/protobuf
