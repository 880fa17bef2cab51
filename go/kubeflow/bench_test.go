package kubeflow

import "testing"

// BenchmarkFields is what the propeller plugin adds to flyteplugins' pod
// machinery per task: decoding is not included, the job-level fields are
// (kubeflow.Fields renders the core job and converts it).
func BenchmarkFields(b *testing.B) {
	for _, tc := range []struct{ name, custom string }{
		{"v1_elastic", `{"workerReplicas":{"replicas":2},"elasticConfig":{"minReplicas":1,"maxReplicas":2,"nprocPerNode":4,"rdzvBackend":"c10d"}}`},
		{"v1_run_policy", `{"workerReplicas":{"replicas":100},"runPolicy":{"cleanPodPolicy":"CLEANPOD_POLICY_ALL","backoffLimit":100}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			task := decode(b, tc.custom)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := Fields(task, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
