package gate

import (
	"fmt"
	"testing"
	"time"
)

// The cooldowns a Gate remembers stay bounded however many jobs it is
// refused by, and the ones that ended go first.
func TestCoolingHintsBounded(t *testing.T) {
	g := internalGate(t, Options{})
	now := time.Now()
	for i := 0; i < maxCoolingHints; i++ {
		g.noteCooling(fmt.Sprintf("old-%d", i), coolingHint{value: "c:1:x", until: now.Add(-time.Second)}) // ended
	}
	for i := 0; i < maxCoolingHints/2; i++ {
		g.noteCooling(fmt.Sprintf("new-%d", i), coolingHint{value: "c:1:x", until: now.Add(time.Hour)})
	}
	if n := len(g.hints); n > maxCoolingHints {
		t.Fatalf("%d hints, want at most %d", n, maxCoolingHints)
	}
	for i := 0; i < maxCoolingHints/2; i++ {
		if _, ok := g.hints[fmt.Sprintf("new-%d", i)]; !ok {
			t.Fatalf("hint new-%d dropped while ended ones could go", i)
		}
	}
	for i := 0; i < 3*maxCoolingHints; i++ {
		g.noteCooling(fmt.Sprintf("more-%d", i), coolingHint{value: "c:1:x", until: now.Add(time.Hour)})
		if n := len(g.hints); n > maxCoolingHints {
			t.Fatalf("%d hints, want at most %d", n, maxCoolingHints)
		}
	}
}
