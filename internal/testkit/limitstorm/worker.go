package limitstorm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// workerEnv holds a worker's configuration (JSON) in the environment of
// the process started as one.
const workerEnv = "LIMITSTORM_WORKER"

// workerConfig is what a worker process runs: its share of a storm.
type workerConfig struct {
	Config   Config
	Gate     json.RawMessage // Config.Gate, its data fields
	Provider string
	Proc     int
}

// The worker's protocol, one line each on its stdin and stdout: it
// writes readyLine once its Gates are built, reads "start <unix ns>",
// runs its jobs and writes their outcome as JSON.
const (
	readyLine    = "ready"
	startFormat  = "start %d\n"
	readyTimeout = time.Minute // a test binary built with -race starts slowly on a busy machine
	resultSlack  = 30 * time.Second
)

// RunWorker runs this process as a storm's worker when Run started it as
// one and returns the exit code; ok is false in any other process, which
// goes on as usual. A binary that runs storms with Config.Procs ≥ 2 calls
// it first thing:
//
//	func TestMain(m *testing.M) {
//		if code, ok := limitstorm.RunWorker(); ok {
//			os.Exit(code)
//		}
//		os.Exit(m.Run())
//	}
func RunWorker() (code int, ok bool) {
	raw, ok := os.LookupEnv(workerEnv)
	if !ok {
		return 0, false
	}
	if err := work(raw, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "limitstorm worker:", err)
		return 1, true
	}
	return 0, true
}

func work(raw string, in io.Reader, out io.Writer) error {
	var wc workerConfig
	if err := json.Unmarshal([]byte(raw), &wc); err != nil {
		return err
	}
	if err := json.Unmarshal(wc.Gate, &wc.Config.Gate); err != nil {
		return err
	}
	s, err := newShare(wc.Config, wc.Provider, wc.Proc)
	if err != nil {
		return err
	}
	defer s.close()
	fmt.Fprintln(out, readyLine)
	var ns int64
	if _, err := fmt.Fscanf(in, startFormat, &ns); err != nil {
		return fmt.Errorf("reading the start: %w", err)
	}
	return json.NewEncoder(out).Encode(s.run(context.Background(), time.Unix(0, ns)))
}

// dataFields encodes o's fields that are data, leaving out functions and
// interfaces (Classify, Observer), so options added later cross too.
func dataFields(o gate.Options) (json.RawMessage, error) {
	v := reflect.ValueOf(o)
	m := map[string]any{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		switch f.Type.Kind() {
		case reflect.Func, reflect.Interface, reflect.Chan:
			continue
		}
		if f.IsExported() {
			m[f.Name] = v.Field(i).Interface()
		}
	}
	return json.Marshal(m)
}

// worker is one worker process, seen from Run.
type worker struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string   // its stdout, line by line; closed at EOF
	runs   time.Duration // how long its jobs may take: Arrivals + Drain
	stderr bytes.Buffer
}

type workers []*worker

// startWorkers starts c.Procs workers and waits until each is ready.
func startWorkers(ctx context.Context, c Config, url string) (workers, error) {
	opts, err := dataFields(c.Gate)
	if err != nil {
		return nil, err
	}
	var ws workers
	for proc := range c.Procs {
		w, err := startWorker(ctx, workerConfig{Config: c, Gate: opts, Provider: url, Proc: proc})
		if err != nil {
			ws.kill()
			return nil, err
		}
		ws = append(ws, w)
	}
	for _, w := range ws {
		if _, err := w.line(readyTimeout, readyLine); err != nil {
			ws.kill()
			return nil, err
		}
	}
	return ws, nil
}

func startWorker(ctx context.Context, wc workerConfig) (*worker, error) {
	raw, err := json.Marshal(wc)
	if err != nil {
		return nil, err
	}
	// -test.run=^$: a test binary that forgot RunWorker runs no test.
	w := &worker{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^$"), lines: make(chan string, 4),
		runs: wc.Config.Arrivals + wc.Config.Drain}
	w.cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
	w.cmd.SysProcAttr = sysProcAttr()
	w.cmd.Stderr = &w.stderr
	if w.in, err = w.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
	}()
	return w, nil
}

// line waits for the worker's next line starting with prefix, skipping
// others (a library's output).
func (w *worker) line(within time.Duration, prefix string) (string, error) {
	timeout := time.After(within)
	for {
		select {
		case l, ok := <-w.lines:
			if !ok {
				_ = w.cmd.Wait()
				return "", fmt.Errorf("worker exited (%v) before %q; does its binary call RunWorker first? stderr:\n%s", w.cmd.ProcessState, prefix, w.stderr.String())
			}
			if strings.HasPrefix(l, prefix) {
				return l, nil
			}
		case <-timeout:
			return "", fmt.Errorf("no %q from the worker within %v", prefix, within)
		}
	}
}

// run starts every worker's jobs at start and merges their outcomes.
func (ws workers) run(c Config, start time.Time) (Outcome, error) {
	defer ws.kill()
	var out Outcome
	for _, w := range ws {
		if _, err := fmt.Fprintf(w.in, startFormat, start.UnixNano()); err != nil {
			return out, err
		}
	}
	defer faults(c, start, func() { _ = ws[0].cmd.Process.Kill() })()
	var errs []error
	for i, w := range ws {
		if i == 0 && len(c.Faults) > 0 && killsWorker(c) {
			// Killed during the storm (or, if the storm ended first, not):
			// its jobs are not counted either way.
			_, _ = w.line(time.Until(start)+w.runs+resultSlack, "{")
			_ = w.cmd.Wait()
			out.killed = jobsOf(c, 0)
			continue
		}
		var o Outcome
		l, err := w.line(time.Until(start)+w.runs+resultSlack, "{")
		if err == nil {
			err = json.Unmarshal([]byte(l), &o)
		}
		if err == nil {
			err = w.cmd.Wait()
		}
		if err != nil {
			errs = append(errs, err)
		}
		out.add(o)
	}
	return out, errors.Join(errs...)
}

// kill stops the workers still running.
func (ws workers) kill() {
	for _, w := range ws {
		if w.cmd.ProcessState == nil {
			_ = w.cmd.Process.Kill()
			_ = w.cmd.Wait()
		}
	}
}

func killsWorker(c Config) bool {
	for _, f := range c.Faults {
		if f.KillWorker {
			return true
		}
	}
	return false
}

// jobsOf counts the jobs worker proc runs.
func jobsOf(c Config, proc int) int {
	n := 0
	for _, j := range schedule(c) {
		if (j.ID%c.Gates)%c.procs() == proc {
			n++
		}
	}
	return n
}

// faults runs c's faults during the storm that starts at start, kill
// killing a worker; the function returned waits for them.
func faults(c Config, start time.Time, kill func()) (wait func()) {
	var wg sync.WaitGroup
	for _, f := range c.Faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(f.At)))
			switch {
			case f.KillWorker && kill != nil:
				kill()
			case f.Do != nil:
				f.Do()
			}
		}()
	}
	return wg.Wait
}
