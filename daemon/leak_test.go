package daemon

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests: Run must
// end every goroutine it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
