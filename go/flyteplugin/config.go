package flyteplugin

import (
	"fmt"
	"slices"
	"strings"

	pluginsConfig "github.com/flyteorg/flyte/flyteplugins/go/tasks/config"

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
	return o, nil
}
