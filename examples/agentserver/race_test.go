//go:build unix && race

package main

// raceEnabled is true in a test binary built with -race: the programs the
// tests build are built with it too, so that they share the race build of
// the packages the test binary already needed.
const raceEnabled = true
