package flyteplugin

import (
	"os"
	"testing"

	"github.com/flyteorg/flyte/flytestdlib/logger"
)

// TestMain keeps flyteplugins' info logs (one per resource override) out of the test output.
func TestMain(m *testing.M) {
	if err := logger.SetConfig(&logger.Config{Level: logger.ErrorLevel}); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
