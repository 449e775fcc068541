package main

import (
	"os"
	"testing"

	"github.com/retrygate/retrygate/internal/testkit/limitstorm"
)

// TestMain lets TestQuick's rate-limit storms start this test binary as
// their worker processes.
func TestMain(m *testing.M) {
	if code, ok := limitstorm.RunWorker(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
