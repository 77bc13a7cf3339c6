package gittest

import "os"

// EnvLong names the variable that makes the tests run whole (.ci/run sets
// it): every case of a matrix on every path, and the stress and soak
// loops at their full length. Without it, a test runs each behaviour it
// asserts at least once, in fewer repetitions, so that the README's test
// command stays within two minutes on a two-core machine.
const EnvLong = "RUNTIMEGUARD_LONG"

// Long reports whether EnvLong is set.
func Long() bool { return os.Getenv(EnvLong) != "" }

// Repeat is long where [Long] holds, else short.
func Repeat(long, short int) int {
	if Long() {
		return long
	}
	return short
}
