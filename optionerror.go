package runtimeguard

import (
	"fmt"
	"time"
)

// OptionError is a field of [Options], its [Layout] or [ReloaderOptions]
// that describes no guard: New (also for an [Options.ExpectRevision] of
// another length than the repository's object ids), [Observe],
// [NewReloader] return one, which a caller gets with
// errors.As. Its message is "runtimeguard: ", the field, the
// value and the reason.
type OptionError struct {
	// Field names the field as its type spells it, such as
	// "Options.ReadTimeout", "Layout.Marker" or
	// "ReloaderOptions.DrainTimeout".
	Field string
	// Value is the value rejected: for Layout.RecoveryMarkers, the one
	// name rejected.
	Value any
	// Reason says why it is rejected.
	Reason string
}

// Error returns the field, the value and why it is rejected.
func (e *OptionError) Error() string {
	var v string
	switch x := e.Value.(type) {
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
