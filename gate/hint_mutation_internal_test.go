package gate

import (
	"fmt"
	"testing"
	"time"
)

// The Gate remembers up to maxCoolingHints cooldowns, all of them while
// none has ended: the bound is a ceiling, not a target to evict towards.
// Past it, fresh hints are dropped to make room, the newest kept.
func TestCoolingHintsFillToTheBound(t *testing.T) {
	g := internalGate(t, Options{})
	until := time.Now().Add(time.Hour)
	for i := 0; i < maxCoolingHints; i++ {
		g.noteCooling(fmt.Sprintf("job-%d", i), coolingHint{value: "c:1:x", until: until})
	}
	if exp, got := maxCoolingHints, len(g.hints); exp != got {
		t.Fatalf("%d live hints noted, %d kept", exp, got)
	}
	g.noteCooling("one-more", coolingHint{value: "c:1:x", until: until})
	if n := len(g.hints); n > maxCoolingHints || n < maxCoolingHints/2 {
		t.Fatalf("%d hints after one past the bound, want at most %d and most of them", n, maxCoolingHints)
	}
	if _, ok := g.hints["one-more"]; !ok {
		t.Fatal("the newest hint was dropped")
	}
}
