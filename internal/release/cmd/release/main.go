// Command release makes a release of every published module of the
// repository, locally (make release VERSION=v0.2.0): see release.Release.
// It pushes nothing; it prints the command that would.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/retrygate/retrygate/internal/release"
)

func main() {
	version := flag.String("version", "", "the version to release, such as v0.2.0")
	root := flag.String("root", "../..", "the repository's root directory")
	flag.Parse()
	tags, err := release.Release(*root, *version, time.Now())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("committed and tagged %s locally; to publish:\n\tgit push origin HEAD %s\n", *version, strings.Join(tags, " "))
}
