// An empty stand-in for google.golang.org/grpc/stats/opentelemetry, used by
// go/go.work only (see there): the package lives in google.golang.org/grpc
// itself since v1.69, so this module must provide no package. Never required by
// a go.mod; consumers never see it.
module google.golang.org/grpc/stats/opentelemetry

go 1.22
