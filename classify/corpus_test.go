package classify_test

import (
	"net/http/httptest"
	"sort"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/testkit/corpus"
)

// TestCorpus replays every real provider response of testdata/corpus to a
// real go-openai client whose HTTPClient is a classify.Transport, for a plain
// call and at stream start, and checks Default's verdict and retry hint
// against the verdict decided from the provider's own documentation.
func TestCorpus(t *testing.T) {
	cases, err := corpus.Load("testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	perProvider := map[string]int{}
	for _, c := range cases {
		perProvider[c.Provider]++
		t.Run(c.Provider+"/"+c.Name, func(t *testing.T) {
			srv := httptest.NewServer(c)
			t.Cleanup(srv.Close)
			client := newClient(t, srv.URL+"/v1", srv.Client(), false)
			for mode, call := range map[string]func(*testing.T, *openai.Client) error{"chat": callChat, "stream": callStream} {
				t.Run(mode, func(t *testing.T) {
					err := call(t, client)
					if got := classify.Default(err); !c.Matches(got) {
						t.Errorf("verdict for %d %s\nsource: %s\nexp %+v\ngot %+v", c.Status, c.Body, c.Source, c.Expect, got)
					}
				})
			}
		})
	}
	providers := make([]string, 0, len(perProvider))
	for p := range perProvider {
		providers = append(providers, p)
	}
	sort.Strings(providers)
	for _, p := range providers {
		t.Logf("%-14s %3d cases", p, perProvider[p])
	}
	t.Logf("%-14s %3d cases", "total", len(cases))
}
