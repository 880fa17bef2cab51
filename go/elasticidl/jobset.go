package elasticidl

// Backend side: task -> JobSet v0.12 (jobset.x-k8s.io/v1alpha2), as the reference's
// elastic_idl/_backend/jobset.py: the shape Flyte 2's clustered tasks use (one
// replicated job of identical node pods on an Indexed Job, DNS host names under the
// JobSet's headless Service), plus what an elastic task needs:
//
//   - the rendezvous endpoint, node 0 (rdzvEnv), and a rendezvous id per JobSet
//     restart attempt, "<rdzv_id or name>-<attempt>", from the pod label JobSet sets
//     on every pod (restartAttemptLabel) through the downward API and Kubernetes'
//     $(VAR) expansion;
//   - JobSet creates the headless Service itself (network.enableDNSHostnames), with
//     publishNotReadyAddresses, so no Service is rendered;
//   - the training operator's ExitCode rule as a Job pod failure policy: the pod
//     entrypoint's final failures (exit 1-4) fail the Job, a disruption is not
//     counted, any other exit recreates the pod against backoffLimit;
//   - the elastic success rule (a worker succeeded) as the Job's success policy.

import "fmt"

const (
	jobSetAPIVersion = "jobset.x-k8s.io/v1alpha2"
	jobSetKind       = "JobSet"
	// jobSetDefaultPort is the rendezvous port when the task sets none (torch's c10d default, Trainer's too).
	jobSetDefaultPort = 29500
	// restartAttemptLabel is the label JobSet v0.12 puts on every Job and pod: the JobSet's restart attempt.
	restartAttemptLabel = "jobset.sigs.k8s.io/restart-attempt"
	// restartAttemptEnv is the container env var holding it (the downward API), which PET_RDZV_ID expands.
	restartAttemptEnv = "ELASTIC_IDL_RESTART_ATTEMPT"
)

// finalExitCodes are the pod entrypoint's exit codes that end a job for good
// (invalid, usage, job failed, rendezvous never completed); every other non-zero
// exit is retryable.
func finalExitCodes() []any { return []any{1, 2, 3, 4} }

// jobSetLosses are every field the task sets that a JobSet (v0.12) cannot carry, in task order.
func jobSetLosses(v *taskView) []TargetLoss {
	out := append([]TargetLoss{}, staticBackendLoss(v, TargetJobSet)...)
	if w := workerSpec(v); w != nil && w.restart == restartAlways {
		out = append(out, newLoss(w.specPath+".restart_policy", TargetJobSet, "a Job's pods cannot be Always: "+
			"rendered as OnFailure (the kubelet restarts a failed container)"))
	}
	out = append(out, masterLosses(v, TargetJobSet)...)
	if rp := v.runPolicy; rp != nil && rp.GetCleanPodPolicy() != 0 {
		out = append(out, newLoss("run_policy.clean_pod_policy", TargetJobSet, "a JobSet has no clean-pod policy: "+
			"a finished Job stops its running pods and keeps the others until the JobSet is deleted "+
			"(ttl_seconds_after_finished)"))
	}
	return out
}

// restartAlways is the RestartPolicy number of Always, which a Job's pods cannot have.
const restartAlways = 2

// jobRestartPolicy is a Job pod's restart policy for the task's RestartPolicy number:
// a Job takes Never or OnFailure only (Always is rendered as OnFailure).
func jobRestartPolicy(restart int32) string {
	if restart == 0 {
		return RestartPolicyNever
	}
	return "OnFailure"
}

// jobSpec is the Indexed Job of the node replicated job: its pods, their restarts and its success rule.
func jobSpec(v *taskView, c *podContainer, env []any, nodes int32, never bool) map[string]any {
	container := map[string]any{"name": nodeJob, "image": nodeImage(v, c), "command": c.command}
	if len(c.args) > 0 {
		container["args"] = c.args
	}
	container["env"] = env
	if res := nodeResources(v, c); res != nil {
		container["resources"] = res
	}
	var restart int32
	if w := workerSpec(v); w != nil {
		restart = w.restart
	}
	policy := jobRestartPolicy(restart)
	pod := map[string]any{}
	if metadata := metadataOf(c); len(metadata) > 0 {
		pod["metadata"] = metadata
	}
	pod["spec"] = map[string]any{"restartPolicy": policy, "containers": []any{container}}
	spec := map[string]any{"parallelism": nodes, "completions": nodes, "completionMode": "Indexed"}
	rp := v.runPolicy
	if never {
		spec["backoffLimit"] = 0
	} else if rp != nil && rp.GetBackoffLimit() != 0 {
		spec["backoffLimit"] = rp.GetBackoffLimit()
	}
	if rp != nil && rp.GetActiveDeadlineSeconds() != 0 {
		spec["activeDeadlineSeconds"] = rp.GetActiveDeadlineSeconds()
	}
	if policy == RestartPolicyNever { // a pod failure policy needs the pods' restartPolicy Never
		spec["podFailurePolicy"] = map[string]any{"rules": []any{
			map[string]any{
				"action":      "FailJob",
				"onExitCodes": map[string]any{"containerName": nodeJob, "operator": "In", "values": finalExitCodes()},
			},
			map[string]any{"action": "Ignore", "onPodConditions": []any{
				map[string]any{"type": "DisruptionTarget", "status": "True"},
			}},
		}}
	}
	if v.elastic != nil {
		spec["successPolicy"] = map[string]any{"rules": []any{map[string]any{"succeededCount": 1}}}
	}
	spec["template"] = pod
	return spec
}

// attemptEnv is the restart attempt (downward API) and PET_RDZV_ID from it, for an elastic task.
func attemptEnv(v *taskView, name string) []any {
	if v.elastic == nil {
		return nil
	}
	id := v.elastic.GetRdzvId()
	if id == "" {
		id = name
	}
	field := map[string]any{"fieldPath": fmt.Sprintf("metadata.labels['%s']", restartAttemptLabel)}
	return []any{
		map[string]any{"name": restartAttemptEnv, "valueFrom": map[string]any{"fieldRef": field}},
		EnvVar{Name: envRdzvId, Value: fmt.Sprintf("%s-$(%s)", id, restartAttemptEnv)},
	}
}

// renderJobSet is the JobSet of a checked task and container (renderTarget checks both).
func renderJobSet(v *taskView, name, namespace string, c *podContainer, nodes int32, never bool) map[string]any {
	env := envOf(c.env, rdzvEnv(v, name, jobSetDefaultPort), attemptEnv(v, name))
	job := map[string]any{"name": nodeJob, "replicas": 1, "template": map[string]any{"spec": jobSpec(v, c, env, nodes, never)}}
	spec := map[string]any{
		"replicatedJobs": []any{job},
		"network":        map[string]any{"enableDNSHostnames": true, "publishNotReadyAddresses": true},
		"successPolicy":  map[string]any{"operator": "All", "targetReplicatedJobs": []any{nodeJob}},
	}
	if rp := v.runPolicy; rp != nil && rp.GetTtlSecondsAfterFinished() != 0 {
		spec["ttlSecondsAfterFinished"] = rp.GetTtlSecondsAfterFinished()
	}
	return map[string]any{"apiVersion": jobSetAPIVersion, "kind": jobSetKind, "metadata": objectMeta(name, namespace, c),
		"spec": spec}
}
