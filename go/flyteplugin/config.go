package flyteplugin

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	kubeflowv1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	pluginsConfig "github.com/flyteorg/flyte/flyteplugins/go/tasks/config"
	"github.com/flyteorg/flyte/flytestdlib/config"

	"github.com/elastic-idl/elastic-idl/go/elasticidl"
	"github.com/elastic-idl/elastic-idl/go/kubeflow"
)

// ConfigSection is the key of the plugin's section under propeller's `plugins`
// configuration (the plugin's id, beside flyteplugins' `kf-operator`).
const ConfigSection = PluginID

// Config is the plugin's section of propeller's configuration:
//
//	plugins:
//	  elastic-idl-pytorch:
//	    mode: upstream                       # or strict
//	    elastic-worker-restart-policy: ""    # "" (the mode's), Never or ExitCode
//	    max-worst-case: 0s                   # e.g. 2h: refuse a task whose worst case is above
//
// The zero value is the default: the upstream mode, which renders what
// flyteplugins' pytorch plugin renders, and upstream's Never for an elastic
// Worker whose task leaves its restart policy unset.
type Config struct {
	// Mode is "upstream" ("" means it too) or "strict": strict refuses what the
	// strict rules refuse and a task template field flyteplugins drops.
	Mode string `json:"mode"`
	// ElasticWorkerRestartPolicy is the restart policy of an elastic Worker
	// whose task leaves it unset (proto3 cannot tell a task's RESTART_POLICY_NEVER
	// from unset, so it applies to those too): "" for the mode's (upstream: Never,
	// strict: ExitCode), "Never" or "ExitCode". A task's OnFailure or Always wins.
	ElasticWorkerRestartPolicy string `json:"elastic-worker-restart-policy"`
	// MaxWorstCase, when above zero, refuses an elastic task whose worst case from
	// a fault to the job's end (elasticidl.Task.WorstCase, under the Worker
	// restart policy the job gets) is above it, or unbounded: a deployment's
	// ceiling on how long a stuck or crash-looping job may hold its nodes (rule
	// worst_case.max, as `elastic-idl validate --max-worst-case`). Zero: no ceiling.
	MaxWorstCase config.Duration `json:"max-worst-case"`
}

var (
	defaultConfig = &Config{}
	configSection = pluginsConfig.MustRegisterSubSection(ConfigSection, defaultConfig)
)

// GetConfig is the plugin's section of propeller's configuration as loaded.
func GetConfig() *Config {
	return configSection.GetConfig().(*Config)
}

// SetConfig replaces the plugin's section (tests, and programs that configure
// propeller in code).
func SetConfig(cfg *Config) error {
	return configSection.SetConfig(cfg)
}

// Options are the render options the configuration states, each value checked:
// an unknown mode or restart policy is an error naming its key.
func (c *Config) Options() (kubeflow.Options, error) {
	var o kubeflow.Options
	switch c.Mode {
	case "", string(elasticidl.ModeUpstream):
		o.Mode = elasticidl.ModeUpstream
	case string(elasticidl.ModeStrict):
		o.Mode = elasticidl.ModeStrict
	default:
		return o, fmt.Errorf("plugins.%s.mode: %q is not one of upstream, strict", ConfigSection, c.Mode)
	}
	policies := []string{elasticidl.RestartPolicyNever, elasticidl.RestartPolicyExitCode}
	if c.ElasticWorkerRestartPolicy != "" && !slices.Contains(policies, c.ElasticWorkerRestartPolicy) {
		return o, fmt.Errorf("plugins.%s.elastic-worker-restart-policy: %q is not one of %s (or empty: the mode's)",
			ConfigSection, c.ElasticWorkerRestartPolicy, strings.Join(policies, ", "))
	}
	o.ElasticWorkerRestartPolicy = c.ElasticWorkerRestartPolicy
	if c.MaxWorstCase.Duration < 0 {
		return o, fmt.Errorf("plugins.%s.max-worst-case: %v is below zero (0 means no ceiling)", ConfigSection, c.MaxWorstCase.Duration)
	}
	return o, nil
}

// checkWorstCase refuses a task whose worst case under the job's Worker restart
// policy is above the configured ceiling, or unbounded (rule worst_case.max); a
// task without an elastic config has none to refuse.
func (c *Config) checkWorstCase(task *elasticidl.Task, fields *kubeflow.JobFields) error {
	ceiling := c.MaxWorstCase.Duration
	worker, ok := fields.Replicas[kubeflowv1.PyTorchJobReplicaTypeWorker]
	if ceiling <= 0 || !ok || fields.ElasticPolicy == nil {
		return nil
	}
	w, err := task.WorstCase(string(worker.RestartPolicy))
	if err != nil || w == nil {
		return err
	}
	if w.Seconds != nil && *w.Seconds <= ceiling.Seconds() {
		return nil
	}
	shown := "unbounded"
	if w.Seconds != nil {
		shown = fmt.Sprintf("%s (%s s)", formatSeconds(*w.Seconds), strconv.FormatFloat(*w.Seconds, 'f', -1, 64))
	}
	return &elasticidl.ValidationError{Violations: []elasticidl.Violation{{
		Rule: "worst_case.max",
		Message: fmt.Sprintf("the worst case from a fault to the job's end is %s under restartPolicy %s, above the "+
			"ceiling %v (plugins.%s.max-worst-case)", shown, w.RestartPolicy, ceiling, ConfigSection),
	}}}
}

// formatSeconds writes a duration as 1h 2m 5s (whole seconds, rounded up), as
// elastic-idl validate prints it.
func formatSeconds(seconds float64) string {
	left := int64(math.Ceil(seconds))
	var parts []string
	for _, unit := range []struct {
		s    int64
		name string
	}{{3600, "h"}, {60, "m"}, {1, "s"}} {
		if n := left / unit.s; n > 0 {
			parts = append(parts, strconv.FormatInt(n, 10)+unit.name)
		}
		left %= unit.s
	}
	if len(parts) == 0 {
		return "0s"
	}
	return strings.Join(parts, " ")
}
