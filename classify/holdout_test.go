package classify_test

import (
	"net/http/httptest"
	"testing"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/testkit/corpus"
)

// TestHoldout replays testdata/holdout: real responses from providers,
// gateways and servers whose errors were not used to design the
// vocabulary, with the outcome each provider documents, collected before
// the rules were written. It asserts what the issue promised: no account,
// key, budget or model-availability case is ever permanent, and at least
// 95 % get their documented outcome: the class, provider-wide and, for a
// permanent verdict, whether it is proof (Failed at once) or a suspect
// (Failed on the second sight). Reason mismatches are logged, not failed.
func TestHoldout(t *testing.T) {
	cases, err := corpus.Load("testdata/holdout")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 40 {
		t.Fatalf("holdout has %d cases, want at least 40", len(cases))
	}
	right, reasons := 0, 0
	for _, c := range cases {
		srv := httptest.NewServer(c)
		client := newClient(t, srv.URL+"/v1", srv.Client(), false)
		got := classify.Default(callChat(t, client))
		srv.Close()
		exp := c.Expect
		if exp.Class == classify.ClassSystemic && got.Class == classify.ClassPermanent {
			t.Errorf("%s: an account, key, budget or model problem is permanent: %+v (source %s)", c.Name, got, c.Source)
		}
		if got.Class == exp.Class && got.ProviderWide == exp.ProviderWide && got.Suspect == exp.Suspect {
			right++
		} else {
			t.Logf("outcome miss %s: exp %s, got %s (%s)", c.Name, outcome(exp), outcome(got), got.Evidence)
		}
		if got.Reason == exp.Reason {
			reasons++
		} else {
			t.Logf("reason differs %s: exp %s, got %s (%s)", c.Name, exp.Reason, got.Reason, got.Evidence)
		}
	}
	t.Logf("holdout: %d/%d documented outcome (%.1f %%), %d/%d same reason", right, len(cases), 100*float64(right)/float64(len(cases)), reasons, len(cases))
	if 100*right < 95*len(cases) {
		t.Errorf("holdout: %d/%d cases get their documented outcome, want at least 95 %%", right, len(cases))
	}
}

// outcome names what the gate does with v, for the holdout's log.
func outcome(v classify.Verdict) string {
	s := v.Class.String()
	if v.Suspect {
		s += " suspect"
	}
	if v.ProviderWide {
		s += " provider-wide"
	}
	return s
}
