package kafka

import (
	"testing"

	"go.uber.org/goleak"
)

// Every client of every channel is closed by Close: no goroutine outlives
// the tests (kfake's own included, closed by each test's cleanup).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
