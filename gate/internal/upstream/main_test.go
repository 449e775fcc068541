package upstream

import (
	"testing"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestMain stops the shared redis-server the agreement test starts.
func TestMain(m *testing.M) { redistest.Main(m) }
