package elasticidl

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// PodEnv is the env the Kubeflow training operator (v1.9) injects into pod index
// of a replica type of job (the reference's pod_env). The container's own env
// (ELASTIC_IDL_TASK, ...) is not included: it is in the job.
//
//   - every pod: PYTHONUNBUFFERED=1;
//   - a job with a Master: MASTER_ADDR/PET_MASTER_ADDR = <job>-master-0, MASTER_PORT/
//     PET_MASTER_PORT = the Master's pytorchjob-port, WORLD_SIZE = replicas x
//     nprocPerNode (1 when not a number), RANK/PET_NODE_RANK = index (+1 for a
//     Worker), PET_NPROC_PER_NODE;
//   - not elastic: PET_NNODES = total replicas;
//   - elastic: PET_RDZV_ENDPOINT = <rdzvHost or <job>-worker-0>:<rdzvPort or the
//     Worker's pytorchjob-port>, PET_RDZV_BACKEND (default c10d), PET_NNODES =
//     <min>:<max> (one alone stands for both; the Worker count when neither is
//     set), PET_NPROC_PER_NODE (default auto), and when set PET_MAX_RESTARTS,
//     PET_RDZV_ID, PET_RDZV_CONF=k=v,k=v.
//
// Errors: *RenderError for a job without replica specs or name, an unknown
// replica type, or an index out of range.
func PodEnv(job *PyTorchJob, replicaType string, index int) (map[string]string, error) {
	if job == nil || len(job.Spec.PyTorchReplicaSpecs) == 0 {
		return nil, renderErr("spec.pytorchReplicaSpecs", "the job has no replica specs")
	}
	specs := job.Spec.PyTorchReplicaSpecs
	if _, ok := specs[replicaType]; !ok {
		types := make([]string, 0, len(specs))
		for k := range specs {
			types = append(types, k)
		}
		sort.Strings(types)
		return nil, renderErr("replica_type", "%q is not a replica type of this job (it has %s)",
			replicaType, strings.Join(types, ", "))
	}
	counts := map[string]int{}
	total := 0
	for rtype, rs := range specs {
		n := 1 // the operator defaults a missing spec's replicas to 1
		if rs != nil {
			n = int(rs.Replicas)
		}
		counts[rtype] = n
		total += n
	}
	if index < 0 || index >= counts[replicaType] {
		return nil, renderErr("index", "%d is out of range for %s (0..%d)", index, replicaType, counts[replicaType]-1)
	}
	name := job.Metadata.Name
	if name == "" {
		return nil, renderErr("metadata.name", "the job has no name")
	}
	nproc := defaultNproc
	if job.Spec.NprocPerNode != nil {
		nproc = *job.Spec.NprocPerNode
	} else if e := job.Spec.ElasticPolicy; e != nil && e.NProcPerNode != nil {
		nproc = strconv.Itoa(int(*e.NProcPerNode)) // the operator's defaulting copies the deprecated field
	}

	env := map[string]string{envPythonunbuffered: "1"}
	if _, ok := specs[ReplicaMaster]; ok {
		masterPort := strconv.Itoa(int(portOf(job, ReplicaMaster)))
		masterAddr := ReplicaName(name, ReplicaMaster, 0)
		rank := index
		if replicaType == ReplicaWorker {
			rank++
		}
		env[envMasterPort] = masterPort
		env[envPetMasterPort] = masterPort
		env[envMasterAddr] = masterAddr
		env[envPetMasterAddr] = masterAddr
		env[envWorldSize] = strconv.Itoa(total * nprocInt(nproc))
		env[envRank] = strconv.Itoa(rank)
		env[envNprocPerNode] = nproc
		env[envPetNodeRank] = strconv.Itoa(rank)
	}
	e := job.Spec.ElasticPolicy
	if e == nil {
		env[envNnodes] = strconv.Itoa(total)
		return env, nil
	}
	host := ReplicaName(name, ReplicaWorker, 0)
	if e.RdzvHost != nil {
		host = *e.RdzvHost
	}
	port := portOf(job, ReplicaWorker)
	if e.RdzvPort != nil {
		port = *e.RdzvPort
	}
	env[envRdzvEndpoint] = fmt.Sprintf("%s:%d", host, port)
	env[envRdzvBackend] = defaultRdzvBackend
	if e.RdzvBackend != nil {
		env[envRdzvBackend] = *e.RdzvBackend
	}
	switch lo, hi := e.MinReplicas, e.MaxReplicas; {
	case lo == nil && hi == nil:
		env[envNnodes] = strconv.Itoa(counts[ReplicaWorker])
	case lo == nil: // the operator's defaulting: only max -> min = max
		env[envNnodes] = fmt.Sprintf("%d:%d", *hi, *hi)
	case hi == nil: // only min -> max = min
		env[envNnodes] = fmt.Sprintf("%d:%d", *lo, *lo)
	default:
		env[envNnodes] = fmt.Sprintf("%d:%d", *lo, *hi)
	}
	if e.MaxRestarts != nil {
		env[envMaxRestarts] = strconv.Itoa(int(*e.MaxRestarts))
	}
	env[envNprocPerNode] = nproc
	if e.RdzvID != nil {
		env[envRdzvId] = *e.RdzvID
	}
	if len(e.RdzvConf) > 0 {
		items := make([]string, len(e.RdzvConf))
		for i, c := range e.RdzvConf {
			items[i] = c.Key + "=" + c.Value
		}
		env[envRdzvConf] = strings.Join(items, ",")
	}
	return env, nil
}

// portOf is the pytorchjob-port of the pytorch container of a replica type, default 23456.
func portOf(job *PyTorchJob, replicaType string) int32 {
	rs := job.Spec.PyTorchReplicaSpecs[replicaType]
	if rs == nil {
		return DefaultPort
	}
	for _, c := range rs.Template.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == PortName {
				return p.ContainerPort
			}
		}
	}
	return DefaultPort
}

// nprocInt is the operator's getNprocPerNodeInt: the number, or 1 when it is none.
func nprocInt(nproc string) int {
	n, err := strconv.Atoi(nproc)
	if err != nil {
		return 1
	}
	return n
}
