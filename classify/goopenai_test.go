package classify_test

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

// TestGoOpenAIRequestErrorBody: a body go-openai cannot read (Gemini's
// error list) comes back from a client without a Transport as a
// *RequestError holding it; Default reads that body, in both call modes.
func TestGoOpenAIRequestErrorBody(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { reply{400, nil, geminiKeyList}.write(w) })
	c := newClient(t, srv.URL+"/v1", srv.Client(), true)
	for mode, call := range map[string]func(*testing.T, *openai.Client) error{"chat": callChat, "stream": callStream} {
		t.Run(mode, func(t *testing.T) {
			err := call(t, c)
			var re *openai.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("%T %v, want go-openai's RequestError", err, err)
			}
			assertVerdict(t, systemic(classify.ReasonAuth, true), classify.Default(err), err)
		})
	}
}

// TestGoOpenAISentinels: every error go-openai returns for a request it
// refuses to send is a client error, read without importing go-openai,
// wrapped or not; so is nothing else with another type or text.
func TestGoOpenAISentinels(t *testing.T) {
	sentinels := []error{
		openai.ErrChatCompletionInvalidModel,
		openai.ErrChatCompletionStreamNotSupported,
		openai.ErrContentFieldsMisused,
		openai.ErrCompletionUnsupportedModel,
		openai.ErrCompletionStreamNotSupported,
		openai.ErrCompletionRequestPromptTypeNotSupported,
		openai.ErrResponseStreamNotSupported,
		openai.ErrModerationInvalidModel,
		openai.ErrReasoningEffortUnsupported,
		openai.ErrReasoningToolsRequireResponses,
		openai.ErrReasoningSamplingUnsupported,
		openai.ErrReasoningModelMaxTokensDeprecated,
		openai.ErrReasoningModelLimitationsLogprobs,
		openai.ErrReasoningModelLimitationsOther,
		openai.ErrO1MaxTokensDeprecated, //nolint:staticcheck // deprecated; older go-openai versions return it
		openai.ErrO1BetaLimitationsMessageTypes,
		openai.ErrO1BetaLimitationsTools,
		openai.ErrO1BetaLimitationsLogprobs, //nolint:staticcheck // deprecated; older go-openai versions return it
		openai.ErrO1BetaLimitationsOther,    //nolint:staticcheck // deprecated; older go-openai versions return it
	}
	exp := classify.Verdict{Class: classify.ClassPermanent, Reason: classify.ReasonClientSide, Evidence: "go:client"}
	for _, s := range sentinels {
		for _, err := range []error{s, fmt.Errorf("summarize: %w", s)} {
			if got := classify.Default(err); got != exp {
				t.Errorf("Default(%q) = %+v, want %+v", err, got, exp)
			}
		}
	}
	// The same text in another type, or another text, is not go-openai's.
	unknown := transient(classify.ReasonUnknown, false, 0)
	for _, err := range []error{
		textError(openai.ErrContentFieldsMisused.Error()),
		errors.New(openai.ErrContentFieldsMisused.Error() + "!"),
	} {
		assertVerdict(t, unknown, classify.Default(err), err)
	}
}

// textError is an error of another type than errors.New's.
type textError string

func (e textError) Error() string { return string(e) }

// APIError has go-openai's name and fields but not its package: it is not
// read as go-openai's.
type APIError struct {
	Code           any
	Message        string
	HTTPStatusCode int
}

func (e *APIError) Error() string { return e.Message }

func TestGoOpenAIShapeNeedsItsPackage(t *testing.T) {
	err := &APIError{Code: "insufficient_quota", Message: "x", HTTPStatusCode: 429}
	assertVerdict(t, transient(classify.ReasonUnknown, false, 0), classify.Default(err), err)
	// go-openai's own, for contrast.
	real := &openai.APIError{Code: "insufficient_quota", Message: "x", HTTPStatusCode: 429}
	assertVerdict(t, systemic(classify.ReasonQuotaExhausted, true), classify.Default(real), real)
	var typedNil *openai.APIError
	assertVerdict(t, transient(classify.ReasonUnknown, false, 0), classify.Default(typedNil), typedNil)
}

// TestNoGoOpenAIImport: classify reads go-openai's errors without
// importing it, so an application on another client does not build
// go-openai; the Transport that builds go-openai's own errors lives in
// classify/goopenai.
func TestNoGoOpenAIImport(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, goOpenAI) {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}

// goOpenAI is go-openai's module path.
const goOpenAI = "github.com/sashabaranov/go-openai"

// TestNoGoOpenAIDependency: nothing classify imports, however indirectly,
// brings go-openai into a build that imports classify. (go test puts its
// own go command first on the PATH.)
func TestNoGoOpenAIDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/retrygate/retrygate/classify") {
		t.Fatalf("go list -deps . does not list classify itself: %q", out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, goOpenAI) {
			t.Errorf("classify depends on %s", p)
		}
	}
}
