package gate

import (
	"strconv"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// The failures Redis did not take are refused in-process with what they
// stand for, for as long as it lasts: a cooldown, a failed mark.
func TestUnwrittenRefusal(t *testing.T) {
	var u unwritten
	addWrite(&u, "cool", jobWrite{kind: store.Cooling, ttl: time.Minute, state: CoolingDown, attempts: 1, reason: "timeout"})
	addWrite(&u, "failed", jobWrite{kind: store.Failed, ttl: time.Hour, state: Failed, attempts: 1, reason: "context_length_exceeded"})
	if b, left := u.refusal("cool"); b == nil || b.State != CoolingDown || left <= 59*time.Second || left > time.Minute {
		t.Errorf("cooling, read back: %+v for %v, want cooling for its time left", b, left)
	}
	if b, left := u.refusal("failed"); b == nil || b.State != Failed || left <= 59*time.Minute || left > time.Hour {
		t.Errorf("failed, read back: %+v for %v, want failed for its hour", b, left)
	}
}

// A process that cannot write to Redis for long keeps at most
// maxUnwritten failures in memory, and drops none below that.
func TestUnwrittenIsBounded(t *testing.T) {
	var u unwritten
	for i := range maxUnwritten {
		addWrite(&u, strconv.Itoa(i), jobWrite{kind: store.Cooling, ttl: time.Hour, state: CoolingDown})
	}
	if n := len(u.m); n != maxUnwritten {
		t.Fatalf("%d unwritten failures kept of %d, all live: want every one", n, maxUnwritten)
	}
	for i := maxUnwritten; i < maxUnwritten+1000; i++ {
		addWrite(&u, strconv.Itoa(i), jobWrite{kind: store.Cooling, ttl: time.Hour, state: CoolingDown})
		// Full of live failures: a quarter goes, then the new one is
		// kept, so the next adds do not each scan the whole map.
		if exp, got := maxUnwritten*3/4+1, len(u.m); i == maxUnwritten && exp != got {
			t.Fatalf("%d unwritten failures kept after the first overflow, want %d", got, exp)
		}
		if n := len(u.m); n > maxUnwritten {
			t.Fatalf("%d unwritten failures kept after %d, want at most %d", n, i+1, maxUnwritten)
		}
	}
	if b, _ := u.refusal(strconv.Itoa(maxUnwritten + 999)); b == nil {
		t.Fatal("the newest failure was dropped")
	}
}

// addWrite remembers w, the failure of job that Redis did not take, as
// settle does.
func addWrite(u *unwritten, job string, w jobWrite) {
	u.add(w.refusal(job), w.ttl)
}
