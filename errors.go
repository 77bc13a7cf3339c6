package runtimeguard

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors a host can tell apart with errors.Is. A repository format that
// cannot be read (a split index, an unknown extension) matches
// [errors.ErrUnsupported].
var (
	// ErrStale matches every [StaleError].
	ErrStale = errors.New("runtimeguard: the loaded runtime is stale")
	// ErrReadTimeout matches a wait for the file system that timed out.
	ErrReadTimeout = errors.New("runtimeguard: read timed out")
	// ErrNoModule matches a module path that leads to no file.
	ErrNoModule = errors.New("runtimeguard: the module path leads to no file")
	// ErrNotCheckout matches a module that no Git checkout tracks, where one is
	// required, and a checkout whose HEAD names no revision any more.
	ErrNotCheckout = errors.New("runtimeguard: the module is not in a tracked Git checkout")
)

// classError is an error that also matches one of the package's classes.
type classError struct{ err, class error }

func (e *classError) Error() string   { return e.err.Error() }
func (e *classError) Unwrap() []error { return []error{e.err, e.class} }

// PanicError is a panic recovered from a read of the file system: the call
// fails closed, and the host lives on.
type PanicError struct {
	// Value is the panic's value, and Stack the goroutine's stack.
	Value any
	Stack []byte
}

// Error returns the panic's value and stack.
func (e *PanicError) Error() string {
	if e == nil {
		return "runtimeguard: <nil *PanicError>"
	}
	return fmt.Sprintf("runtimeguard: read panicked: %v\n\n%s", e.Value, e.Stack)
}

// Unwrap returns the panic's value where it is an error.
func (e *PanicError) Unwrap() error {
	if e == nil {
		return nil
	}
	err, _ := e.Value.(error)
	return err
}

// panicError is the error of a read that panicked with value: the Panicked
// of the package's executors.
func panicError(value any, stack []byte) error {
	return &PanicError{Value: value, Stack: stack}
}

// readTimeout is the error of a call that gave up waiting for a file
// system; msg says what it waited for, and for how long (see stuckWhy).
func readTimeout(msg string) error {
	return classed(ErrReadTimeout, "%s: %s", msg, classWords(ErrReadTimeout))
}

// noRevision is why a read of the checkout found no revision, as an
// error that matches [ErrNotCheckout].
func noRevision(reason string) error {
	return &classError{errors.New(cmp.Or(reason, "HEAD names no commit")), ErrNotCheckout}
}

// classed is the error format and args say, matching class too.
func classed(class error, format string, args ...any) error {
	return &classError{fmt.Errorf(format, args...), class}
}

// errNilContext is the error of op given a nil context: returned at once,
// as net/http does, rather than a panic on a goroutine of its own.
func errNilContext(op string) error {
	return fmt.Errorf("runtimeguard: %s: nil Context", op)
}

// classWords is what class says without the package's prefix, for a message
// that has the prefix at its start already.
func classWords(class error) string {
	return strings.TrimPrefix(class.Error(), "runtimeguard: ")
}

// OptionError is a field of [Options], its [Layout] or [ReloaderOptions]
// that describes no guard, as [New], [Observe] and [NewReloader] return it.
type OptionError struct {
	// Field names the field, such as "Options.ReadTimeout".
	Field string
	// Value is the value rejected; nil for a func field.
	Value any
	// Reason says why it is rejected.
	Reason string
}

// Error returns the field, the value (unless nil) and why it is rejected.
func (e *OptionError) Error() string {
	if e == nil {
		return "runtimeguard: <nil *OptionError>"
	}
	var v string
	switch x := e.Value.(type) {
	case nil:
		return "runtimeguard: " + e.Field + ": " + e.Reason
	case string:
		v = fmt.Sprintf("%q", x)
	case time.Duration:
		v = x.String()
	default:
		v = fmt.Sprint(x)
	}
	return "runtimeguard: " + e.Field + " " + v + ": " + e.Reason
}

// optionError returns an *OptionError.
func optionError(field string, value any, reason string) error {
	return &OptionError{Field: field, Value: value, Reason: reason}
}
