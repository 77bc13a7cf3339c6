package runtimeguard

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimeguard/runtimeguard/internal/bounded"
)

// A piece of the package's executors' work that panics is reported as a
// *PanicError that unwraps to the error it panicked with; a piece that
// ended its goroutine keeps its error.
func TestPieceErrIsAPanicError(t *testing.T) {
	x := checkoutExecutor(t.TempDir())
	tk, s := bounded.Submit(context.Background(), x, nil, time.Minute, func(*bounded.Task[int]) { panic(errors.New("the reader broke")) }, nil)
	require.Nil(t, s)
	var pe *PanicError
	require.ErrorAs(t, tk.Err, &pe)
	assert.EqualError(t, pe.Unwrap(), "the reader broke")
	assert.NotEmpty(t, pe.Stack)
	assert.ErrorContains(t, pe, "runtimeguard: read panicked: the reader broke")

	tk, s = bounded.Submit(context.Background(), x, nil, time.Minute, func(*bounded.Task[int]) { runtime.Goexit() }, nil)
	require.Nil(t, s)
	assert.ErrorIs(t, tk.Err, bounded.ErrExited)
}
