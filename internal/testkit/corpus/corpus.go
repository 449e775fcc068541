package corpus

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/code"
)

// Case is one provider response and the verdict it deserves.
type Case struct {
	// Provider is the file's provider name, such as "openai".
	Provider string
	// Name is unique across the corpus.
	Name string
	// Source is where the response comes from: one or more URLs.
	Source string
	// Why explains the expected verdict where it is not obvious.
	Why    string
	Status int
	Header http.Header
	Body   []byte
	// Expect is what classify.Default must return, hint included. Its
	// Evidence is checked only where the case gives one.
	Expect classify.Verdict
}

// ServeHTTP replays the response.
func (c Case) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	for k, vs := range c.Header {
		w.Header()[k] = vs
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(c.Status)
	_, _ = w.Write(c.Body)
}

// file is the JSON form of one provider's file.
type file struct {
	Provider string `json:"provider"`
	Cases    []struct {
		Name   string            `json:"name"`
		Source string            `json:"source"`
		Why    string            `json:"why"`
		Status int               `json:"status"`
		Header map[string]string `json:"header"`
		// Body is the response body: a JSON string is sent as its text
		// (for HTML, plain text or an empty body), any other JSON value
		// byte for byte as written in the file.
		Body   json.RawMessage `json:"body"`
		Expect struct {
			Class        string `json:"class"`
			Reason       string `json:"reason"`
			ProviderWide bool   `json:"provider_wide"`
			RetryAfter   string `json:"retry_after"`
			Suspect      bool   `json:"suspect"`
			Evidence     string `json:"evidence"`
		} `json:"expect"`
	} `json:"cases"`
}

// Matches reports whether got is what c expects: every field, and
// Evidence only where the case names one.
func (c Case) Matches(got classify.Verdict) bool {
	if c.Expect.Evidence == "" {
		got.Evidence = ""
	}
	return got == c.Expect
}

// Load reads every *.json file in dir, in name order.
func Load(dir string) ([]Case, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("corpus: no *.json files in %s", dir)
	}
	sort.Strings(paths)
	var (
		cases []Case
		errs  []error
		seen  = map[string]bool{}
	)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var f file
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("corpus: %s: %w", filepath.Base(p), err)
		}
		if f.Provider == "" {
			errs = append(errs, fmt.Errorf("%s: no provider", filepath.Base(p)))
		}
		for i, fc := range f.Cases {
			where := fmt.Sprintf("%s case %d (%q)", filepath.Base(p), i, fc.Name)
			c := Case{Provider: f.Provider, Name: fc.Name, Source: fc.Source, Why: fc.Why, Status: fc.Status}
			var bad []string
			switch {
			case fc.Name == "":
				bad = append(bad, "no name")
			case seen[fc.Name]:
				bad = append(bad, "duplicate name")
			}
			seen[fc.Name] = true
			if !strings.HasPrefix(fc.Source, "https://") {
				bad = append(bad, "source must start with https://")
			}
			if fc.Status < 400 || fc.Status > 599 {
				bad = append(bad, fmt.Sprintf("status %d is not an error status", fc.Status))
			}
			if len(fc.Header) > 0 {
				c.Header = make(http.Header, len(fc.Header))
				for k, v := range fc.Header {
					c.Header.Set(k, v)
				}
			}
			c.Body, err = body(fc.Body)
			if err != nil {
				bad = append(bad, "body: "+err.Error())
			}
			class, ok := parseClass(fc.Expect.Class)
			if !ok {
				bad = append(bad, fmt.Sprintf("unknown class %q", fc.Expect.Class))
			}
			if fc.Expect.Reason == "" {
				bad = append(bad, "no reason")
			}
			var hint time.Duration
			if fc.Expect.RetryAfter != "" {
				if hint, err = time.ParseDuration(fc.Expect.RetryAfter); err != nil || hint < 0 {
					bad = append(bad, fmt.Sprintf("bad retry_after %q", fc.Expect.RetryAfter))
				}
			}
			if fc.Expect.Suspect && class != classify.ClassPermanent {
				bad = append(bad, "suspect on a verdict that is not permanent")
			}
			if fc.Expect.Evidence != "" && !code.Evidence(fc.Expect.Evidence) {
				bad = append(bad, fmt.Sprintf("bad evidence %q", fc.Expect.Evidence))
			}
			c.Expect = classify.Verdict{Class: class, Reason: fc.Expect.Reason, ProviderWide: fc.Expect.ProviderWide, RetryAfter: hint,
				Suspect: fc.Expect.Suspect, Evidence: fc.Expect.Evidence}
			if len(bad) > 0 {
				errs = append(errs, fmt.Errorf("%s: %s", where, strings.Join(bad, "; ")))
				continue
			}
			cases = append(cases, c)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("corpus: %w", errors.Join(errs...))
	}
	return cases, nil
}

// body decodes a case's body: a JSON string is the body's text, any other
// JSON value is the body as written, and no value is an empty body.
func body(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []byte(s), nil
	}
	return []byte(raw), nil
}

// parseClass maps a class name back to its classify.Class.
func parseClass(name string) (classify.Class, bool) {
	for _, c := range [...]classify.Class{classify.ClassTransient, classify.ClassPermanent, classify.ClassSystemic, classify.ClassCanceled} {
		if c.String() == name {
			return c, true
		}
	}
	return 0, false
}
