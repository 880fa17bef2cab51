package elasticidl

import (
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	eidlcorev1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/core/v1"
	eidlkubeflowv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/kubeflow/v1"
	eidlpluginsv1 "github.com/elastic-idl/elastic-idl/go/gen/elastic_idl/plugins/v1"
)

// One normalised view of both task shapes, so that rules and mappings are written
// once (the reference's _task/view.py).

// replicaView is the effective settings of one replica type, after upstream's
// rule that `common` wins when it is set.
type replicaView struct {
	path         string // "worker_replicas", "master_replicas" or "workers" (legacy)
	specPath     string // where the settings were read from; "" for the legacy shape
	replicasPath string // where the count was read from
	replicas     int32
	image        string
	resources    *eidlcorev1.Resources // nil when unset
	restart      int32                 // RestartPolicy number (0 = Never)
	present      bool                  // the spec was set in the message
}

type taskView struct {
	message   proto.Message // the task message, either shape
	version   int32
	elastic   *eidlpluginsv1.ElasticConfig // nil: not an elastic task
	worker    replicaView
	master    *replicaView // kubeflow shape only, when set
	runPolicy *eidlkubeflowv1.RunPolicy
	kf        *eidlkubeflowv1.DistributedPyTorchTrainingTask // nil for the legacy shape
}

func (t *Task) view() *taskView {
	if t.legacy != nil {
		return &taskView{
			message: t.legacy,
			version: TaskTypeVersionLegacy,
			elastic: t.legacy.GetElasticConfig(),
			worker: replicaView{
				path: "workers", replicasPath: "workers", replicas: t.legacy.GetWorkers(), present: true,
			},
		}
	}
	k := t.Kubeflow()
	v := &taskView{
		message:   k,
		version:   TaskTypeVersionKubeflow,
		elastic:   k.GetElasticConfig(),
		worker:    replicaOf(k.GetWorkerReplicas(), "worker_replicas", k.GetWorkerReplicas() != nil),
		runPolicy: k.GetRunPolicy(),
		kf:        k,
	}
	if k.GetMasterReplicas() != nil {
		m := replicaOf(k.GetMasterReplicas(), "master_replicas", true)
		v.master = &m
	}
	return v
}

func replicaOf(spec *eidlkubeflowv1.DistributedPyTorchTrainingReplicaSpec, path string, present bool) replicaView {
	if c := spec.GetCommon(); c != nil {
		return replicaView{
			path: path, specPath: path + ".common", replicasPath: path + ".common.replicas",
			replicas: c.GetReplicas(), image: c.GetImage(), resources: c.GetResources(),
			restart: int32(c.GetRestartPolicy()), present: present,
		}
	}
	// Upstream's rule: the deprecated fields are read when common is unset.
	//lint:file-ignore SA1019 the deprecated replica fields are read on purpose when common is unset
	return replicaView{
		path: path, specPath: path, replicasPath: path + ".replicas",
		replicas: spec.GetReplicas(), image: spec.GetImage(), resources: spec.GetResources(),
		restart: int32(spec.GetRestartPolicy()), present: present,
	}
}

// workerCount is the Worker pods: max_replicas for an elastic task, else the replica count.
func (v *taskView) workerCount() int32 {
	if v.elastic != nil {
		return v.elastic.GetMaxReplicas()
	}
	return v.worker.replicas
}

// ncclEnv is the NCCL env vars the elastic config sets, in ncclEnvFields order; an unset
// field exports nothing (the reference's ElasticValues.nccl_env).
func (v *taskView) ncclEnv() []EnvVar {
	if v.elastic == nil {
		return nil
	}
	m := v.elastic.ProtoReflect()
	var out []EnvVar
	for _, p := range ncclEnvFields {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(p.key))
		if fd.Kind() == protoreflect.MessageKind {
			if m.Has(fd) {
				s, _ := durationOf(m.Get(fd).Message())
				out = append(out, EnvVar{Name: p.value, Value: strconv.FormatInt(s, 10)})
			}
			continue
		}
		if text, ok := enumTextOf(toggleEnvValues, int32(m.Get(fd).Enum())); ok {
			out = append(out, EnvVar{Name: p.value, Value: text})
		}
	}
	return out
}

// ncclFieldOf is the ElasticConfig field exported as the NCCL env var name.
func ncclFieldOf(name string) string {
	for _, p := range ncclEnvFields {
		if p.value == name {
			return p.key
		}
	}
	return ""
}
