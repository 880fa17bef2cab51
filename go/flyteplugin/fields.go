package flyteplugin

import (
	"fmt"
	"sort"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/flyteorg/flyte/flyteidl/gen/pb-go/flyteidl/core"
	k8sConfig "github.com/flyteorg/flyte/flyteplugins/go/tasks/pluginmachinery/flytek8s/config"
)

// fieldProblem is a field of a task template that flyteplugins' pod machinery
// (flytek8s.ToK8sPodSpec, propeller's plugin manager) does not carry into the
// job, with why and what to do. The Python renderer
// (elastic_idl.flytekit.render_pytorchjob_from_template) refuses the same
// fields under the same paths.
type fieldProblem struct {
	Field  string
	Reason string
}

func (p fieldProblem) String() string { return p.Field + ": " + p.Reason }

const podTemplateHint = "@task(pod_template=PodTemplate(...))"

// templateConfigKeys are the TaskTemplate.config keys a pytorch task may carry:
// the primary container's name (read by flytek8s.BuildRawPod), and the console's
// link (flytekit's ClassDecorator, e.g. @vscode).
var templateConfigKeys = map[string]bool{"primary_container_name": true, "link_type": true, "port": true}

// droppedFields lists the fields of tmpl that the pods would silently lose:
// fields flyteplugins' pod machinery does not read, and fields unknown to the
// flyteidl this plugin is built with. Sorted by field path.
func droppedFields(tmpl *core.TaskTemplate) []fieldProblem {
	var out []fieldProblem
	add := func(field, reason string) { out = append(out, fieldProblem{field, reason}) }
	unknown := func(path string, m proto.Message) {
		if number, ok := firstUnknownField(m); ok {
			field := fmt.Sprint(number)
			if path != "" {
				field = path + "." + field
			}
			add(field, fmt.Sprintf("field number %d of %s is unknown to the flyteidl this plugin is built with: "+
				"whether propeller carries it cannot be told", number, m.ProtoReflect().Descriptor().FullName()))
		}
	}
	unknown("", tmpl)
	if m := tmpl.GetMetadata(); m != nil {
		unknown("metadata", m)
	}
	if c := tmpl.GetContainer(); c != nil {
		unknown("container", c)
		//lint:ignore SA1019 the deprecated field is read to say it would be dropped
		if len(c.GetConfig()) > 0 {
			add("container.config", "propeller's pod machinery does not read the deprecated Container.config: "+
				"it would be dropped; remove it (task settings belong in custom)")
		}
		if len(c.GetPorts()) > 0 {
			add("container.ports", "propeller builds the container without the template's ports (flyteplugins' "+
				"BuildRawContainer); declare them on the primary container of a pod template ("+podTemplateHint+
				"), which is carried")
		}
		if c.GetArchitecture() != core.Container_UNKNOWN {
			add("container.architecture", "propeller does not schedule by Container.architecture: it would be "+
				"dropped; pin the nodes with nodeSelector kubernetes.io/arch in a pod template ("+podTemplateHint+")")
		}
	}
	if pod := tmpl.GetK8SPod(); pod != nil {
		unknown("k8s_pod", pod)
		if name, config := pod.GetPrimaryContainerName(), tmpl.GetConfig()["primary_container_name"]; name != "" && name != config {
			add("k8s_pod.primary_container_name", fmt.Sprintf("%q, but config['primary_container_name'] says %q "+
				"and propeller reads only the config: make them the same, or leave this field empty (flytekit does)",
				name, config))
		}
	}
	keys := make([]string, 0, len(tmpl.GetConfig()))
	for key := range tmpl.GetConfig() {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if !templateConfigKeys[key] {
			add("config."+key, "propeller's pytorch path reads only config['primary_container_name'] (and the "+
				"console reads link_type, port): the key would be ignored; remove it")
		}
	}
	if sc := tmpl.GetSecurityContext(); sc != nil {
		unknown("security_context", sc)
		if id := sc.GetRunAs(); id != nil {
			unknown("security_context.run_as", id)
			if id.GetIamRole() != "" {
				add("security_context.run_as.iam_role", "propeller takes the IAM role from the execution, never "+
					"from the task template: it would be dropped; give it to the execution, or annotate the "+
					"service account in a pod template")
			}
			if id.GetK8SServiceAccount() != "" {
				add("security_context.run_as.k8s_service_account", "propeller takes the pods' service account "+
					"from the execution (pyflyte run --service-account, the launch plan), never from the task "+
					"template: it would be dropped; to pin it, set serviceAccountName in the task's pod template ("+
					podTemplateHint+")")
			}
			if id.GetOauth2Client() != nil {
				add("security_context.run_as.oauth2_client", "propeller's pod machinery reads no identity from "+
					"the task template: it would be dropped; request the client secret with secret_requests")
			}
			if id.GetExecutionIdentity() != "" {
				add("security_context.run_as.execution_identity", "propeller labels the pods with the execution's "+
					"identity, not the task template's: it would be dropped")
			}
		}
		for i, s := range sc.GetSecrets() {
			unknown(fmt.Sprintf("security_context.secrets[%d]", i), s)
		}
		if len(sc.GetTokens()) > 0 {
			add("security_context.tokens", "propeller's pod machinery does not read OAuth2 token requests: they "+
				"would be dropped; request the credentials as secrets (secret_requests)")
		}
	}
	if er := tmpl.GetExtendedResources(); er != nil {
		unknown("extended_resources", er)
		if g := er.GetGpuAccelerator(); g != nil {
			unknown("extended_resources.gpu_accelerator", g)
		}
		if s := er.GetSharedMemory(); s != nil {
			unknown("extended_resources.shared_memory", s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out
}

// acceleratorDropped is the problem of an accelerator that no replica's pods
// can use: flytek8s.ApplyGPUNodeSelectors applies it only to a pod one of whose
// containers has a limit on the configured GPU resource; nil otherwise.
func acceleratorDropped(tmpl *core.TaskTemplate, specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) *fieldProblem {
	if tmpl.GetExtendedResources().GetGpuAccelerator() == nil {
		return nil
	}
	gpu := k8sConfig.GetK8sPluginConfig().GpuResourceName
	for _, spec := range specs {
		for _, c := range spec.Template.Spec.Containers {
			if _, ok := c.Resources.Limits[gpu]; ok {
				return nil
			}
		}
	}
	return &fieldProblem{"extended_resources.gpu_accelerator", fmt.Sprintf("no replica's pods request a GPU (%s), "+
		"and propeller applies the accelerator only to pods that do: it would be dropped; request a GPU "+
		"(@task(limits=Resources(gpu=...))) or remove the accelerator", gpu)}
}

// firstUnknownField is the number of the first field of m's unknown fields.
func firstUnknownField(m proto.Message) (protowire.Number, bool) {
	raw := m.ProtoReflect().GetUnknown()
	if len(raw) == 0 {
		return 0, false
	}
	number, _, n := protowire.ConsumeTag(raw)
	if n < 0 {
		return 0, true
	}
	return number, true
}
