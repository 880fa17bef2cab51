package elasticidl

// Backend side: task -> Kubeflow Trainer v2.3 TrainJob (trainer.kubeflow.org/v1alpha1),
// as the reference's elastic_idl/_backend/trainjob.py. The TrainJob runs against the
// torch-distributed ClusterTrainingRuntime, which Trainer turns into a JobSet named
// after the TrainJob with one replicated job, "node". What the task states that a
// TrainJob cannot carry is reported (trainJobLosses), never dropped silently.

import "fmt"

const (
	trainJobAPIVersion = "trainer.kubeflow.org/v1alpha1"
	trainJobKind       = "TrainJob"
	// trainJobDefaultPort is Trainer's port for the nodes (PET_MASTER_PORT): the
	// rendezvous port when the task sets none.
	trainJobDefaultPort = 29500
	// ProposalAnnotation is the annotation of a TrainJob rendered with the proposed
	// spec.trainer.elasticPolicy (TargetOptions.TrainJobElasticPolicy, KEP-2903).
	ProposalAnnotation = "elastic-idl/proposal"
	proposalText       = "spec.trainer.elasticPolicy is KEP-2903 (kubeflow/trainer#3654), a proposal: " +
		"Trainer v2.3 has no such field"
)

// trainJobRuntime is the runtime the TrainJob references: Trainer's torch runtime (v2.3.0).
func trainJobRuntime() map[string]any {
	return map[string]any{"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"}
}

// trainJobLosses are every field the task sets that a TrainJob (v2.3) cannot carry, in task order.
func trainJobLosses(v *taskView, elasticPolicy bool) []TargetLoss {
	out := []TargetLoss{}
	if e := v.elastic; e != nil && e.GetMinReplicas() < e.GetMaxReplicas() {
		why := fmt.Sprintf("a TrainJob has a fixed numNodes: rendered at max_replicas (%d), the pods a PyTorchJob "+
			"creates; the launcher still forms a group of min..max, but the runtime's Job needs every node pod to "+
			"succeed", e.GetMaxReplicas())
		if elasticPolicy {
			why += "; the proposed spec.trainer.elasticPolicy (KEP-2903) states min:max, Trainer v2.3 does not read it"
		}
		out = append(out, newLoss("elastic_config.min_replicas", TargetTrainJob, why))
	}
	out = append(out, staticBackendLoss(v, TargetTrainJob)...)
	if w := workerSpec(v); w != nil && w.restart != 0 {
		out = append(out, newLoss(w.specPath+".restart_policy", TargetTrainJob, "the runtime's Job template decides "+
			"how node pods restart; a TrainJob (runtimePatches) cannot set it"))
	}
	out = append(out, masterLosses(v, TargetTrainJob)...)
	if rp := v.runPolicy; rp != nil {
		if rp.GetCleanPodPolicy() != 0 {
			out = append(out, newLoss("run_policy.clean_pod_policy", TargetTrainJob, "a TrainJob has no clean-pod policy"))
		}
		if rp.GetTtlSecondsAfterFinished() != 0 {
			out = append(out, newLoss("run_policy.ttl_seconds_after_finished", TargetTrainJob,
				"a TrainJob has no TTL (the runtime's JobSet template may set one)"))
		}
		if rp.GetBackoffLimit() != 0 {
			out = append(out, newLoss("run_policy.backoff_limit", TargetTrainJob, "the runtime's Job template and "+
				"JobSet failure policy bound restarts; a TrainJob cannot set them"))
		}
	}
	return out
}

// renderTrainJob is the TrainJob of a checked task and container (renderTarget checks both).
func renderTrainJob(v *taskView, name, namespace string, c *podContainer, nodes int32, elasticPolicy bool) map[string]any {
	trainer := map[string]any{"image": nodeImage(v, c), "command": c.command}
	if len(c.args) > 0 {
		trainer["args"] = c.args
	}
	trainer["env"] = envOf(c.env, rdzvEnv(v, name, trainJobDefaultPort))
	trainer["numNodes"] = nodes
	if e := v.elastic; e != nil && e.GetNprocPolicy() == 0 && e.GetNprocPerNode() != 0 {
		// auto/cpu/gpu (our extension) leave it out: Trainer's own default is auto; the launcher reads the task.
		trainer["numProcPerNode"] = e.GetNprocPerNode()
	}
	if res := nodeResources(v, c); res != nil {
		trainer["resourcesPerNode"] = res
	}
	metadata := objectMeta(name, namespace, c)
	if e := v.elastic; elasticPolicy && e != nil {
		trainer["elasticPolicy"] = map[string]any{"minNodes": e.GetMinReplicas(), "maxNodes": e.GetMaxReplicas()}
		annotations := map[string]string{}
		if a, ok := metadata["annotations"].(map[string]string); ok {
			annotations = a
		}
		annotations[ProposalAnnotation] = proposalText
		metadata["annotations"] = annotations
	}
	spec := map[string]any{"runtimeRef": trainJobRuntime(), "trainer": trainer}
	if rp := v.runPolicy; rp != nil && rp.GetActiveDeadlineSeconds() != 0 {
		spec["activeDeadlineSeconds"] = rp.GetActiveDeadlineSeconds()
	}
	if podMetadata := metadataOf(c); len(podMetadata) > 0 {
		// Labels and annotations reach the pods only through a patch of the runtime's node pod template.
		pod := map[string]any{"template": map[string]any{"metadata": podMetadata}}
		job := map[string]any{"name": nodeJob, "template": map[string]any{"spec": pod}}
		spec["runtimePatches"] = []any{map[string]any{
			"manager":             trainJobPatchManager,
			"trainingRuntimeSpec": map[string]any{"template": map[string]any{"spec": map[string]any{"replicatedJobs": []any{job}}}},
		}}
	}
	return map[string]any{"apiVersion": trainJobAPIVersion, "kind": trainJobKind, "metadata": metadata, "spec": spec}
}
