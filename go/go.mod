module github.com/elastic-idl/elastic-idl/go

go 1.22

require google.golang.org/protobuf v1.34.2
