package runtimeguard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/check"
)

// A piece of an executor's work that panics is reported as a *PanicError
// that unwraps to the error it panicked with; a piece that ended its
// goroutine keeps its error.
func TestPieceErrIsAPanicError(t *testing.T) {
	var x check.Executor
	tk, s := check.Submit(context.Background(), &x, nil, time.Minute, func(*check.Task[int]) { panic(errors.New("the reader broke")) }, nil)
	require.Nil(t, s)
	var pe *PanicError
	require.ErrorAs(t, pieceErr(tk.Err), &pe)
	assert.EqualError(t, pe.Unwrap(), "the reader broke")
	assert.NotEmpty(t, pe.Stack)
	assert.ErrorContains(t, pe, "runtimeguard: read panicked: the reader broke")

	assert.ErrorIs(t, pieceErr(check.ErrExited), check.ErrExited)
	assert.NoError(t, pieceErr(nil))
}
