package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Job ids that the flag package would take for flags.
var dashJobs = []string{"-1", "-h", "-prefix", "--", "-json", "--upstream=x"}

// printedCommands returns the commands a run printed: its "clear" rows,
// its "→" suggestions, and the command a usage error offers.
func printedCommands(r result) []string {
	var out []string
	for _, line := range strings.Split(r.stdout+"\n"+r.stderr, "\n") {
		if h, ok := strings.CutPrefix(line, "clear"); ok {
			out = append(out, strings.TrimSpace(h))
		}
		if _, h, ok := strings.Cut(line, "→ "); ok {
			out = append(out, strings.TrimSpace(h))
		}
		if _, h, ok := strings.Cut(line, "goes after --: "); ok {
			h, _, _ = strings.Cut(h, " (see retrygate help")
			out = append(out, h)
		}
	}
	return out
}

// paste runs a printed command line through the CLI's own argument
// parsing, as a shell would split it, with the connection flags (and
// flags, such as --json) before it.
func paste(t *testing.T, f *fixture, line string, flags ...string) result {
	t.Helper()
	args := shellWords(t, line)
	if args[0] != "retrygate" {
		t.Fatalf("printed %q is not a retrygate command", line)
	}
	conn := f.args
	if strings.Contains(line, "--prefix") {
		conn = conn[:len(conn)-2] // the printed command names the prefix itself
	}
	return runCLI(t, nil, append(append(append([]string{}, conn...), flags...), args[1:]...)...)
}

// Every command the CLI prints, pasted, runs and reaches the job it
// names, for job ids that start with '-': the clear hint of status, its
// "did you mean" suggestions, the hint of a usage error, and the upstream
// resume after an operator's pause.
func TestPrintedCommandsPaste(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, tg)
			for _, job := range dashJobs {
				if err := f.g.Do(ctx, job, func(context.Context, *gate.Lease) error { return errTimeout }); err == nil {
					t.Fatalf("%q: want a failure", job)
				}
			}
			for _, job := range dashJobs {
				// Typed as the usage says (after --), status prints a clear
				// hint; pasted, it resets that job and no other.
				r := f.run(t, "status", "--", printable(job))
				if r.code != exitOK {
					t.Fatalf("status -- %q: exit %d, %q", job, r.code, r.stderr)
				}
				cmds := printedCommands(r)
				if len(cmds) != 1 || !strings.Contains(cmds[0], " reset ") {
					t.Fatalf("status %q printed %q, want one reset command:\n%s", job, cmds, r.stdout)
				}
				mustOK(t, paste(t, f, cmds[0]))
				if st := mustStatusOf(t, f.g, job); st.State != gate.Ready || st.Attempts != 0 {
					t.Fatalf("%q after the pasted %q: %v, %d attempts", job, cmds[0], st.State, st.Attempts)
				}
				if err := f.g.Do(ctx, job, func(context.Context, *gate.Lease) error { return errTimeout }); err == nil {
					t.Fatalf("%q: want a failure", job)
				}
			}
			// Typed without --: refused with the command to type instead,
			// which, pasted, runs.
			for _, job := range []string{"-1", "-prefix"} {
				r := f.run(t, "status", job)
				cmds := printedCommands(r)
				if r.code != exitUsage || len(cmds) != 1 {
					t.Fatalf("status %s: exit %d, printed %q, stderr %q", job, r.code, cmds, r.stderr)
				}
				if st := statusOf(t, paste(t, f, cmds[0], "--json")); st.Job != job || st.State != "cooling_down" {
					t.Fatalf("pasted %q: %+v", cmds[0], st)
				}
			}
			// reset -h is reset's help, which says how to name the job -h;
			// the job is left alone.
			if r := f.run(t, "reset", "-h"); r.code != exitOK || !strings.Contains(r.stdout, "goes after --: retrygate reset -- -h") {
				t.Fatalf("reset -h: exit %d, %q", r.code, r.stdout)
			}
			if st := mustStatusOf(t, f.g, "-h"); st.State != gate.CoolingDown {
				t.Fatalf("job -h after reset -h: %v, want still cooling", st.State)
			}
			// The suggestions for a name that holds no key.
			r := f.run(t, "status", "--", "-")
			cmds := printedCommands(r)
			if len(cmds) == 0 {
				t.Fatalf("status -- -: no suggestions:\n%s", r.stdout)
			}
			for _, c := range cmds {
				if st := statusOf(t, paste(t, f, c, "--json")); !strings.HasPrefix(st.Job, "-") || st.State != "cooling_down" {
					t.Fatalf("pasted %q: %+v", c, st)
				}
			}

			// An operator's pause: the status of a job behind it prints the
			// resume, which pasted ends it.
			up := "openai:prod"
			mustOK(t, f.run(t, "--upstream", up, "upstream", "pause", "--for", "1h", "--reason", "key rotation"))
			r = f.run(t, "--upstream", up, "status", "--", "-1")
			cmds = printedCommands(r)
			if len(cmds) != 1 || !strings.HasSuffix(cmds[0], "upstream resume") || !strings.Contains(r.stdout, "key rotation") {
				t.Fatalf("status behind an operator's pause printed %q:\n%s", cmds, r.stdout)
			}
			mustOK(t, paste(t, f, cmds[0]))
			g, err := gate.New(tg.Client, gate.Options{Prefix: f.prefix, Upstream: up})
			if err != nil {
				t.Fatal(err)
			}
			if ups, err := g.Upstreams(ctx); err != nil || ups[0].State != gate.Ready {
				t.Fatalf("after the pasted %q: %+v, %v", cmds[0], ups, err)
			}
		})
	}
	// help help is help's own usage.
	if r := runCLI(t, nil, "help", "help"); r.code != exitOK || !strings.Contains(r.stdout, "retrygate help [COMMAND]") {
		t.Fatalf("help help: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

// A pause from the CLI refuses the calls of its upstream in four
// processes (four gates, four go-redis clients) at their next call, with
// the operator's reason and the time left, and ends on time by itself.
func TestUpstreamPauseFromTheCLI(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			prefix, up := redistest.UniqueKey(t), "openai:prod"
			gates := make([]*gate.Gate, 4)
			for i := range gates {
				g, err := gate.New(tg.OwnClient(t), gate.Options{Prefix: prefix, Upstream: up})
				if err != nil {
					t.Fatal(err)
				}
				if err := g.Do(ctx, redistest.UniqueKey(t), func(context.Context, *gate.Lease) error { return nil }); err != nil {
					t.Fatal(err)
				}
				gates[i] = g
			}
			d := time.Hour
			if tg.FastForward == nil {
				d = 300 * time.Millisecond // real time: short, polled
			}
			args := append(redisArgs(t, tg), "--prefix", prefix, "--upstream", up)
			paused := time.Now()
			r := runCLI(t, nil, append(args, "upstream", "pause", "--for", d.String(), "--reason", "key rotation\x1b[2J")...)
			mustOK(t, r)
			assertTerminalSafe(t, "upstream pause", r.stdout)
			for i, g := range gates {
				ran := false
				err := g.Do(ctx, redistest.UniqueKey(t), func(context.Context, *gate.Lease) error { ran = true; return nil })
				b, ok := err.(*gate.BlockedError)
				if ran || !ok || b.State != gate.UpstreamCooling || b.Reason != gate.ReasonOperator || b.Upstreams[0].Note != "key rotation [2J" ||
					b.RetryAfter <= 0 || b.RetryAfter > d {
					t.Fatalf("gate %d: ran %v, %v; want refused by the operator's pause", i, ran, err)
				}
			}
			if tg.FastForward != nil {
				tg.FastForward(d)
			} else {
				deadline := time.Now().Add(10 * time.Second)
				for {
					if err := gates[0].Do(ctx, redistest.UniqueKey(t), func(context.Context, *gate.Lease) error { return nil }); err == nil {
						break
					} else if time.Now().After(deadline) {
						t.Fatalf("the pause of %v is not over after %v: %v", d, time.Since(paused), err)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if took := time.Since(paused); took < d {
					t.Fatalf("the pause of %v ended after %v", d, took)
				}
			}
			for i, g := range gates {
				if err := g.Do(ctx, redistest.UniqueKey(t), func(context.Context, *gate.Lease) error { return nil }); err != nil {
					t.Fatalf("gate %d after the pause: %v", i, err)
				}
			}
			// --for and --reason are required, and pause's alone.
			for _, bad := range [][]string{{"pause", "--reason", "x"}, {"pause", "--for", "1m"}, {"resume", "--for", "1m"}} {
				if r := runCLI(t, nil, append(append([]string{}, args...), append([]string{"upstream"}, bad...)...)...); r.code != exitUsage {
					t.Errorf("upstream %q: exit %d, want a usage error", bad, r.code)
				}
			}
		})
	}
}
