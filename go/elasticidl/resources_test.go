package elasticidl

import (
	"strconv"
	"strings"
	"testing"

	eidlcorev1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/core/v1"
	eidlkubeflowv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/kubeflow/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

// canonical writes a decimal as <coefficient without trailing zeros>e<exponent>, "0" for zero.
func (d decimal) canonical() string {
	if d.digits == "" {
		return "0"
	}
	digits := strings.TrimRight(d.digits, "0")
	exp := d.exp + int64(len(d.digits)-len(digits))
	if d.neg {
		digits = "-" + digits
	}
	return digits + "e" + strconv.FormatInt(exp, 10)
}

// The values are what the reference's parse_quantity returns (normalised), exactly.
func TestParseQuantityIsExact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1", "1e0"}, {"+1", "1e0"}, {"-1", "-1e0"}, {"1.", "1e0"}, {".5", "5e-1"}, {"0.5", "5e-1"}, {"1.50", "15e-1"},
		{"0001.500", "15e-1"}, {"500m", "5e-1"}, {"1.5m", "15e-4"}, {"1n", "1e-9"}, {"1u", "1e-6"},
		{"1k", "1e3"}, {"1M", "1e6"}, {"1G", "1e9"}, {"1T", "1e12"}, {"1P", "1e15"}, {"1E", "1e18"},
		// Binary suffixes; above 2^63-1 the parser's cap.
		{"1Ki", "1024e0"}, {"1.5Ki", "1536e0"}, {"4Gi", "4294967296e0"}, {"1Ei", "1152921504606846976e0"},
		{"8Ei", "9223372036854775807e0"}, {"-8Ei", "-9223372036854775807e0"}, {"9Ei", "9223372036854775807e0"},
		// Exponents: int32, any size of value.
		{"1e3", "1e3"}, {"1E3", "1e3"}, {"1e+3", "1e3"}, {"1e-3", "1e-3"}, {"5e-1", "5e-1"},
		{"1e2147483647", "1e2147483647"},
		// Finer than 10^-9: rounded away from zero.
		{"1e-2147483648", "1e-9"}, {"0.1n", "1e-9"}, {"-0.1n", "-1e-9"}, {"0.0000000001Ki", "103e-9"},
		{"1.0000000001", "1000000001e-9"},
		{"0", "0"}, {"-0", "0"}, {"0e-20", "0"},
		{"123456789012345678901234567890", "12345678901234567890123456789e1"},
	} {
		got, err := parseQuantity(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if got.canonical() != tc.want {
			t.Errorf("%q = %s, want %s", tc.in, got.canonical(), tc.want)
		}
	}
}

func TestParseQuantityRefuses(t *testing.T) {
	for _, in := range []string{
		"", " 1", "1 ", "+", "-", ".", "1e1.5", "1K", "1Mi ", "e3", "1ki", "0x10", "1,5", "\u0661", "1.5.5", "1e",
		"Ki", "--1", "1e2147483648", "1e-2147483649",
	} {
		if v, err := parseQuantity(in); err == nil {
			t.Errorf("%q read as %s", in, v.canonical())
		} else if !strings.HasPrefix(err.Error(), pyStrRepr(in)) {
			t.Errorf("%q: %v does not quote the input", in, err)
		}
	}
	_, err := parseQuantity("1e2147483648")
	if err == nil || !strings.Contains(err.Error(), "exponent does not fit in 32 bits") {
		t.Errorf("int32 exponent: %v", err)
	}
}

func TestDecimalOrder(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1", "1000m", 0}, {"1Gi", "1073741824", 0}, {"1e2147483647", "1e2147483646", 1}, {"1e-9", "1n", 0},
		{"-1e2147483647", "1", -1}, {"0", "-0", 0}, {"999m", "1", -1}, {"1.5", "2", -1}, {"-2", "-1.5", -1},
		{"10", "9.99", 1},
	} {
		a, _ := parseQuantity(tc.a)
		b, _ := parseQuantity(tc.b)
		if got := a.cmp(b); got != tc.want {
			t.Errorf("cmp(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := b.cmp(a); got != -tc.want {
			t.Errorf("cmp(%s, %s) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

func TestExtendedResources(t *testing.T) {
	for _, tc := range []struct {
		name              string
		extended, overcom bool
	}{
		{"cpu", false, true}, {"memory", false, true}, {"storage", false, true}, {"ephemeral-storage", false, true},
		{"hugepages-2Mi", false, false}, {"nvidia.com/gpu", true, false}, {"example.com/fpga", true, false},
		{"kubernetes.io/x", false, true}, {"requests.example.com/x", false, true},
	} {
		if isExtended(tc.name) != tc.extended || overcommitAllowed(tc.name) != tc.overcom {
			t.Errorf("%s: extended %v, overcommit %v", tc.name, isExtended(tc.name), overcommitAllowed(tc.name))
		}
	}
}

const (
	cpu    = eidlcorev1.Resources_CPU
	gpu    = eidlcorev1.Resources_GPU
	memory = eidlcorev1.Resources_MEMORY
)

type entry struct {
	name  eidlcorev1.Resources_ResourceName
	value string
}

func resourcesTask(t *testing.T, requests, limits []entry) *Task {
	t.Helper()
	res := &eidlcorev1.Resources{}
	for _, e := range requests {
		res.Requests = append(res.Requests, &eidlcorev1.Resources_ResourceEntry{Name: e.name, Value: e.value})
	}
	for _, e := range limits {
		res.Limits = append(res.Limits, &eidlcorev1.Resources_ResourceEntry{Name: e.name, Value: e.value})
	}
	task, err := NewTask(&eidlkubeflowv1.DistributedPyTorchTrainingTask{
		ElasticConfig: &eidlpluginsv1.ElasticConfig{MinReplicas: 1, MaxReplicas: 2, NprocPerNode: 1},
		//lint:ignore SA1019 the deprecated resources field is what this test reads
		WorkerReplicas: &eidlkubeflowv1.DistributedPyTorchTrainingReplicaSpec{Resources: res},
	})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// The cases of tests/test_validate.py (issue #9: Kubernetes quantities).
func TestQuantitiesTheAPIServerRefusesAreViolations(t *testing.T) {
	for _, tc := range []struct {
		what             string
		requests, limits []entry
		fields           []string
	}{
		{"not a quantity", []entry{{gpu, "x"}}, nil, []string{"requests[0]"}},
		{"negative", []entry{{cpu, "-1"}}, nil, []string{"requests[0]"}},
		{"trailing space", []entry{{memory, "4Gi "}}, nil, []string{"requests[0]"}},
		{"leading space", []entry{{memory, " 4Gi"}}, nil, []string{"requests[0]"}},
		{"a GPU is whole", nil, []entry{{gpu, "1.5"}}, []string{"limits[0]"}},
		{"request above its limit", []entry{{cpu, "2"}}, []entry{{cpu, "1"}}, []string{"requests[0]"}},
		{"GPU request and limit differ", []entry{{gpu, "1"}}, []entry{{gpu, "2"}}, []string{"requests[0]"}},
		{"the last value of a name counts", []entry{{cpu, "1"}, {cpu, "3"}}, []entry{{cpu, "2"}}, []string{"requests[1]"}},
		{"each entry", []entry{{cpu, "1K"}, {memory, "1e1.5"}}, []entry{{cpu, "-0.1n"}},
			[]string{"requests[0]", "requests[1]", "limits[0]"}},
		{"the last valid value counts", []entry{{cpu, "3"}, {cpu, "x"}}, []entry{{cpu, "2"}}, []string{"requests[0]", "requests[1]"}},
		{"the limit's last value counts", []entry{{cpu, "2"}}, []entry{{cpu, "3"}, {cpu, "1"}}, []string{"requests[0]"}},
		{"an unknown name gets the text checks", []entry{{0, "-1"}}, []entry{{0, "x"}}, []string{"requests[0]", "limits[0]"}},
	} {
		found := resourcesTask(t, tc.requests, tc.limits).Violations()
		var got []string
		for _, v := range found {
			if v.Rule == "resources.quantity" {
				got = append(got, strings.TrimSuffix(strings.TrimPrefix(v.Field, "worker_replicas.resources."), ".value"))
			}
			if len(v.Message) > maxErrorChars {
				t.Errorf("%s: message of %d characters", tc.what, len(v.Message))
			}
		}
		// Requests first, each list in entry order.
		if strings.Join(got, " ") != strings.Join(tc.fields, " ") {
			t.Errorf("%s: %v, want %v", tc.what, got, tc.fields)
		}
	}
}

func TestQuantitiesTheAPIServerAcceptsAreValid(t *testing.T) {
	for _, tc := range []struct{ requests, limits []entry }{
		{[]entry{{cpu, "500m"}, {memory, "1Gi"}, {gpu, "1"}}, []entry{{cpu, "1"}, {memory, "1024Mi"}, {gpu, "1000m"}}},
		{[]entry{{cpu, ".5"}, {memory, "+1."}}, []entry{{cpu, "5e-1"}, {memory, "1E3"}}},
		{[]entry{{gpu, "2"}}, nil}, // a GPU request alone is not refused here (see _task/resources.py)
		{[]entry{{cpu, "0"}}, []entry{{cpu, "0"}}},
		{[]entry{{memory, "1e2147483647"}}, nil}, // int32 exponent
		{[]entry{{cpu, "2"}, {cpu, "1"}}, []entry{{cpu, "1"}}},
	} {
		if found := resourcesTask(t, tc.requests, tc.limits).Violations(); len(found) != 0 {
			t.Errorf("%v / %v: %v", tc.requests, tc.limits, found)
		}
	}
}

// The cases of tests/test_kubeflow.py: the resources option is checked by the same rules.
func TestResourcesOptionTheAPIServerWouldRefuse(t *testing.T) {
	for _, tc := range []struct{ resources, field string }{
		{`{"requests": {"cpu": "-1"}}`, "resources.requests.cpu"},
		{`{"requests": {"cpu": -1}}`, "resources.requests.cpu"},
		{`{"requests": {"memory": "4Gi "}}`, "resources.requests.memory"},
		{`{"limits": {"nvidia.com/gpu": "1.5"}}`, "resources.limits.nvidia.com/gpu"},
		{`{"limits": {"example.com/fpga": "500m"}}`, "resources.limits.example.com/fpga"},
		{`{"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}`, "resources.requests.cpu"},
		{`{"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}`, "resources.requests.nvidia.com/gpu"},
		{`{"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "4Mi"}}`, "resources.requests.hugepages-2Mi"},
		{`{"requests": {"cpu ": "1"}}`, "resources.requests.cpu "},
		{`{"requests": {"cpu": NaN}}`, "resources.requests.cpu"},
		{`{"requests": {"cpu": Infinity}}`, "resources.requests.cpu"},
		{`{"requests": {"memory": "1Gi", "cpu": "x"}}`, "resources.requests.cpu"}, // the first problem, in name order
	} {
		o, err := RenderOptionsFromJSON([]byte(`{"name": "job", "image": "i", "entrypoint": ["t"], "resources": ` +
			tc.resources + `}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = elasticTask(t).RenderPyTorchJob(o)
		if re, ok := err.(*RenderError); !ok || re.Field != tc.field {
			t.Errorf("%s: got %v, want a RenderError on %q", tc.resources, err, tc.field)
		}
	}
	o := okOptions()
	o.Resources = &ResourceRequirements{
		Requests: map[string]string{"cpu": ".5", "memory": "1Gi", "nvidia.com/gpu": "1"},
		Limits:   map[string]string{"cpu": "500m", "nvidia.com/gpu": "1"},
	}
	job, err := elasticTask(t).RenderPyTorchJob(o)
	if err != nil {
		t.Fatal(err)
	}
	c := job.Spec.PyTorchReplicaSpecs[ReplicaWorker].Template.Spec.Containers[0]
	if c.Resources.Requests["cpu"] != ".5" || c.Resources.Limits["cpu"] != "500m" {
		t.Errorf("quantities are rendered as given: %+v", c.Resources)
	}
}
