package elasticidl

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Managed mode sets go_package and nothing else: the Go descriptors are protos/ as written.
func TestGeneratedDescriptorsCarryOnlyGoPackage(t *testing.T) {
	module := strings.TrimSuffix(reflect.TypeOf(Task{}).PkgPath(), "/elasticidl") // go.mod's module path
	n := 0
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(fd.Path(), "elastic_idl/") {
			return true
		}
		n++
		opts := protodesc.ToFileDescriptorProto(fd).GetOptions()
		want := &descriptorpb.FileOptions{GoPackage: opts.GoPackage}
		dir := fd.Path()[:strings.LastIndex(fd.Path(), "/")]
		if !strings.HasPrefix(opts.GetGoPackage(), module+"/gen/"+dir+";eidl") {
			t.Errorf("%s: go_package %q", fd.Path(), opts.GetGoPackage())
		}
		if !proto.Equal(opts, want) {
			t.Errorf("%s: options beyond go_package: %v", fd.Path(), opts)
		}
		return true
	})
	if n != 6 {
		t.Errorf("%d elastic_idl files registered, want 6", n)
	}
}
