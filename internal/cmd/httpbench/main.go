// Command httpbench measures what the guard costs a server, in the terms
// its users see: requests per second of one trivial handler, on loopback,
// bare and behind the guard, driven by the load generator wrk.
//
// It has two roles. With -serve it is the server: it makes its own Git
// checkouts in a temporary directory (with git isolated from the user's
// configuration, internal/gittest), binds its guards, and serves one
// loopback port per case:
//
//   - bare: the handler alone;
//   - watch: the handler behind [runtimeguard.Guard.Middleware], checks on
//     the watch path;
//   - stat: the same, checks forced onto the stat path;
//   - stale: a guard whose checkout moved after it bound: every answer is
//     a 409 with its diagnostic;
//   - seed: the check the guard replaces, three git processes per request
//     (the top level, whether the module is tracked, HEAD) compared with
//     what they said at startup.
//
// Without -serve it is the driver: given one or more servers as
// name=path (builds of this program, such as one of an older tree of the
// module), it starts each, and runs wrk against every port of every server
// in interleaved rounds (each round visits every port in turn, so that a
// change in the machine's load hits each alike), then prints requests per
// second per port (the median of the rounds and their range) and its
// ratio to the bare port of the same server, taken round by round.
//
// httpbench.sh beside it builds it and runs it; docs/performance.md says how
// to read its table. It lives under internal so that it is no command of
// the module a user installs.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	serveRole := flag.Bool("serve", false, "be a server: make the checkouts, bind the guards, print the ports and serve them until standard input ends")
	rounds := flag.Int("rounds", 5, "rounds (each visits every port of every server once)")
	duration := flag.Duration("duration", 10*time.Second, "how long wrk loads each port in each round")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: httpbench [-rounds n] [-duration d] name=server...\n       httpbench -serve\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	var err error
	if *serveRole {
		err = serve()
	} else {
		err = drive(*rounds, *duration, flag.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpbench:", err)
		os.Exit(1)
	}
}
