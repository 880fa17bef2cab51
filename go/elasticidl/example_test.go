package elasticidl_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
)

// A propeller plugin's path: TaskTemplate.custom (a Struct) and task_type_version
// in, the PyTorchJob out, with the extension fields that upstream's plugin loses
// (here the GPU nproc policy, the join timeout and the rendezvous port).
func Example() {
	// What flytekit (or elastic_idl.to_custom) writes into TaskTemplate.custom.
	custom, _ := structpb.NewStruct(map[string]any{
		"workerReplicas": map[string]any{"common": map[string]any{"replicas": 4}},
		"elasticConfig": map[string]any{
			"rdzvBackend": "c10d", "minReplicas": 2, "maxReplicas": 4, "maxRestarts": 3,
			"nprocPolicy": "NPROC_POLICY_GPU", "joinTimeout": "900s", "rdzvPort": 29500,
		},
	})
	task, err := elasticidl.FromStruct(custom, 1) // taskTemplate.GetTaskTypeVersion()
	if err != nil {
		fmt.Println(err) // a *DecodeError naming the field, or *UnsupportedVersionError
		return
	}
	fmt.Println("extension fields:", task.ExtensionFields())

	job, err := task.RenderPyTorchJob(elasticidl.RenderOptions{
		Name:       "a1b2c3-n0-0",
		Namespace:  "flytesnacks-development",
		Image:      "ghcr.io/example/train:1",
		Entrypoint: []string{"train.py", "--epochs", "3"},
	})
	if err != nil {
		fmt.Println(err) // a *ValidationError with every violation, or a *RenderError
		return
	}
	policy, _ := json.Marshal(job.Spec.ElasticPolicy)
	fmt.Println("elasticPolicy:", string(policy))
	fmt.Println("nprocPerNode:", *job.Spec.NprocPerNode)
	worker := job.Spec.PyTorchReplicaSpecs[elasticidl.ReplicaWorker]
	fmt.Println("workers:", worker.Replicas)
	fmt.Println("args:", strings.Join(worker.Template.Spec.Containers[0].Args, " "))

	env, _ := elasticidl.PodEnv(job, elasticidl.ReplicaWorker, 0)
	fmt.Println("PET_RDZV_ENDPOINT:", env["PET_RDZV_ENDPOINT"])
	fmt.Println("PET_RDZV_CONF:", env["PET_RDZV_CONF"])
	// Output:
	// extension fields: [elastic_config.nproc_policy elastic_config.join_timeout elastic_config.rdzv_port]
	// elasticPolicy: {"minReplicas":2,"maxReplicas":4,"rdzvBackend":"c10d","rdzvPort":29500,"maxRestarts":3,"rdzvConf":[{"key":"join_timeout","value":"900"}]}
	// nprocPerNode: gpu
	// workers: 4
	// args: -- train.py --epochs 3
	// PET_RDZV_ENDPOINT: a1b2c3-n0-0-worker-0:29500
	// PET_RDZV_CONF: join_timeout=900
}

// The pieces a plugin needs when it builds the training operator's own typed
// PyTorchJob (kubeflowv1.ElasticPolicy, spec.nprocPerNode, replica counts).
func ExampleElasticPolicyOf() {
	task, err := elasticidl.Decode([]byte(`{"elasticConfig": {"minReplicas": 1, "maxReplicas": 3, "nprocPerNode": 8}}`),
		elasticidl.FormatJSON, 1)
	if err != nil || task.Validate() != nil {
		return
	}
	e := task.Kubeflow().GetElasticConfig()
	p := elasticidl.ElasticPolicyOf(e)
	fmt.Println(*p.MinReplicas, *p.MaxReplicas, *p.RdzvBackend, *p.MaxRestarts)
	fmt.Println(elasticidl.NprocPerNode(e))
	fmt.Println(task.ReplicaCounts())
	// Output:
	// 1 3 c10d 0
	// 8
	// map[Worker:3]
}

// The same task on a Kubeflow Trainer TrainJob and a JobSet: each render reports the
// task fields its target cannot carry; Strict refuses such a render instead.
func ExampleTask_RenderTarget() {
	task, err := elasticidl.Decode([]byte(`{"elasticConfig": {"minReplicas": 2, "maxReplicas": 4, "nprocPerNode": 8},
		"runPolicy": {"backoffLimit": 3}}`), elasticidl.FormatJSON, 1)
	if err != nil {
		return
	}
	options := elasticidl.RenderOptions{Name: "train", Image: "ghcr.io/example/train:1", Entrypoint: []string{"train.py"}}
	for _, target := range []string{elasticidl.TargetTrainJob, elasticidl.TargetJobSet} {
		rendered, err := task.RenderTarget(options, target, elasticidl.TargetOptions{})
		if err != nil {
			fmt.Println(err)
			return
		}
		obj := rendered.Objects[0].(map[string]any)
		fmt.Println(target, obj["apiVersion"], obj["kind"])
		for _, loss := range rendered.Losses {
			fmt.Println("  loses", loss.Field)
		}
	}
	_, err = task.RenderTarget(options, elasticidl.TargetTrainJob, elasticidl.TargetOptions{Strict: true})
	var lossErr *elasticidl.TargetLossError
	if errors.As(err, &lossErr) {
		fmt.Println(len(lossErr.Losses), "losses:", err)
	}
	// Output:
	// trainjob trainer.kubeflow.org/v1alpha1 TrainJob
	//   loses elastic_config.min_replicas
	//   loses run_policy.backoff_limit
	// jobset jobset.x-k8s.io/v1alpha2 JobSet
	// 2 losses: a trainjob cannot carry elastic_config.min_replicas, run_policy.backoff_limit (render without strict to accept the losses)
}
