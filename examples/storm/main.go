package main

import (
	"fmt"
	"os"
)

func main() {
	if _, err := run(os.Stdout, defaultScenarios()); err != nil {
		fmt.Fprintln(os.Stderr, "storm:", err)
		os.Exit(1)
	}
}
