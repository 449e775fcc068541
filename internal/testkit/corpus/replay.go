package corpus

import (
	"net/http"
	"testing"

	"github.com/retrygate/retrygate/classify"
)

// ReplayRule replays every case of the corpus at dir to an SDK: a client
// newClient makes around the case's response, called through each of
// calls (by name: a plain call, a stream, ...). rule must decide the
// error each call returns, as the case expects, and classify.Chain(rule)
// must agree with it.
func ReplayRule[C any](t *testing.T, dir string, rule classify.Rule, newClient func(*testing.T, http.Handler) C, calls map[string]func(*testing.T, C) error) {
	t.Helper()
	cases, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := classify.Chain(rule)
	for _, c := range cases {
		t.Run(c.Provider+"/"+c.Name, func(t *testing.T) {
			client := newClient(t, c)
			for mode, call := range calls {
				t.Run(mode, func(t *testing.T) {
					err := call(t, client)
					v, ok := rule(err)
					if !ok {
						t.Fatalf("Rule passed on %T %v", err, err)
					}
					if !c.Matches(v) {
						t.Errorf("verdict for %d %s\nsource: %s\nexp %+v\ngot %+v", c.Status, c.Body, c.Source, c.Expect, v)
					}
					if got := f(err); got != v {
						t.Errorf("Chain(Rule) = %+v, Rule = %+v", got, v)
					}
				})
			}
		})
	}
}
