//go:build !unix

package runtimeguard

import (
	"context"
	"errors"
)

// Handover fails here: no listening socket can be kept across a new
// process image on this platform. See [ExecHandover].
func (h *ExecHandover) Handover(ctx context.Context, plan *Plan) error {
	if err := h.check(ctx, plan); err != nil {
		return err
	}
	return errors.New("runtimeguard: exec handover: no socket can be kept across exec on this platform")
}

// Inherit returns nil: no [ExecHandover] starts an image here, and no
// service manager passes sockets.
func Inherit() (*Inherited, error) { return nil, nil }
