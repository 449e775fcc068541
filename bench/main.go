package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"

	"github.com/retrygate/retrygate/internal/testkit/limitstorm"
)

func main() {
	// The rate-limit storms' Gates run in worker processes: this binary,
	// started again.
	if code, ok := limitstorm.RunWorker(); ok {
		os.Exit(code)
	}
	out := flag.String("out", "", "write the markdown report to this file too")
	quick := flag.Bool("quick", false, "smoke test: one short round, not a measurement")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	scripts := flag.Int("scripts", 0, "instead of the suite: where a success's Redis time goes, over this many successes per provider")
	flag.Parse()
	if *scripts > 0 {
		if err := runScripts(*scripts); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*out, *quick, *cpuprofile); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func runScripts(n int) error {
	if addr := os.Getenv("RETRYGATE_BENCH_REDIS"); addr != "" {
		return scriptCost(context.Background(), addr, n, os.Stdout)
	}
	srv, err := startRedis()
	if err != nil {
		return err
	}
	defer srv.stop()
	return scriptCost(context.Background(), srv.addr, n, os.Stdout)
}

func run(out string, quick bool, cpuprofile string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	srv, err := startRedis()
	if err != nil {
		return err
	}
	defer srv.stop()
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	set := fullSettings
	if quick {
		set = quickSettings
	}
	res, err := runSuite(ctx, server{srv.addr, srv.cmd.Process.Pid}, set, os.Stderr)
	if err != nil {
		return err
	}
	md := res.markdown(quick)
	fmt.Print(md)
	if out != "" {
		return os.WriteFile(out, []byte(md), 0o644)
	}
	return nil
}
