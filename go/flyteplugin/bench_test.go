package flyteplugin

import (
	"context"
	"testing"

	"github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/k8s"
)

// benchTemplates are TaskTemplates of upstream's pytorch plugin tests that both
// plugins render (pytorch_test.go lines cited in upstreamCases).
var benchTemplates = []struct {
	name    string
	version int32
	custom  string
}{
	{"v0_elastic", 0, elasticV0},
	{"v0_workers100", 0, `{"workers":100}`},
	{"v1_run_policy", 1, `{"workerReplicas":{"replicas":100},"runPolicy":` + runPolicy + `}`},
	{"v1_worker_resources", 1, `{"workerReplicas":{"common":{"replicas":100,"resources":` + workerResources + `}}}`},
	{"v1_elastic", 1, `{"workerReplicas":{"replicas":2},"elasticConfig":{"minReplicas":1,"maxReplicas":2,"nprocPerNode":4,"rdzvBackend":"c10d"}}`},
}

// BenchmarkBuildResource is BuildResource per task, ours beside flyteplugins'
// pytorch plugin, on the same templates and the same mocked context (whose
// testify mocks cost both the same). bench/bench_plugin.py runs it and writes
// bench/results/plugin_buildresource.json.
func BenchmarkBuildResource(b *testing.B) {
	for _, tc := range benchTemplates {
		for _, p := range []struct {
			name   string
			plugin k8s.Plugin
		}{{"ours", Plugin{}}, {"upstream", upstreamPlugin(b)}} {
			b.Run(tc.name+"/"+p.name, func(b *testing.B) {
				tctx := taskContext(taskTemplate(b, "job", tc.version, tc.custom))
				ctx := context.Background()
				if _, err := p.plugin.BuildResource(ctx, tctx); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := p.plugin.BuildResource(ctx, tctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
