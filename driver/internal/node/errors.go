// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"liken.sh/per-node/driver/internal/holders"
	"liken.sh/per-node/driver/internal/layout"
	"liken.sh/per-node/driver/internal/metrics"
	"liken.sh/per-node/driver/internal/reclaim"
	"liken.sh/per-node/driver/internal/tree"
)

var (
	// ErrHeld means another pod on this node holds the copy.
	ErrHeld = errors.New("copy is held by another pod on this node")
	// ErrUncertain means the kernel could not tell whether a pod holds the
	// copy. It never counts as "not held": the caller retries.
	ErrUncertain = errors.New("cannot tell whether a pod on this node holds the copy")
	// ErrMismatch means a publish at a target that already shows the copy
	// asks for something else than what is mounted there.
	ErrMismatch = errors.New("the target is already published with other options")
	// ErrNotTheCopy means an unpublish's target has something else than
	// the volume's copy mounted.
	ErrNotTheCopy = errors.New("something else than the volume's copy is mounted at the target")
	// ErrNotFound means the copy, or its mount at the given path, does not exist.
	ErrNotFound = errors.New("not found")
)

// HeldError says who holds a copy that a second pod asked for.
type HeldError struct {
	Handle string
	Holder holders.Holder
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("volume %q is held on this node by %s (mounted at %s)", e.Handle, e.Holder.Who(), e.Holder.Target)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// invalid is the status for a request that is wrong whatever the node's state.
func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// toStatus turns a helper's error into the one status the RPC returns.
func (s *Server) toStatus(op, handle string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var held *HeldError
	switch {
	case errors.As(err, &held):
		s.refused(handle, metrics.RefusedHeld, held.Error())
		return status.Errorf(codes.FailedPrecondition,
			"%s: one pod per node may use a per-node volume; this pod will start once %s leaves node %s",
			held.Error(), held.Holder.Who(), s.nodeID)
	case errors.Is(err, ErrUncertain):
		return status.Errorf(codes.Unavailable,
			"%s volume %q on node %s: %v; the copy is treated as held until the kernel answers, kubelet retries",
			op, handle, s.nodeID, err)
	case errors.Is(err, ErrNotTheCopy):
		return status.Errorf(codes.FailedPrecondition,
			"%s volume %q on node %s: %v; it is left as it is: unmount it by hand if it is stale", op, handle, s.nodeID, err)
	case errors.Is(err, ErrMismatch):
		return status.Errorf(codes.AlreadyExists,
			"%s volume %q: %v; unpublish it first", op, handle, err)
	case errors.Is(err, layout.ErrInvalidHandle):
		return status.Errorf(codes.InvalidArgument,
			"%s: %v; the volumeHandle of a per-node PersistentVolume must be the PersistentVolume's name", op, err)
	case errors.Is(err, ErrNotFound):
		return status.Errorf(codes.NotFound, "%s volume %q: %v", op, handle, err)
	case errors.Is(err, tree.ErrLimit):
		return status.Errorf(codes.ResourceExhausted,
			"%s volume %q on node %s: its copy was not measured: %v; the copy's shape is past what the driver walks (--measure-timeout, --measure-max-entries), it is measured again after --stats-ttl",
			op, handle, s.nodeID, err)
	case errors.Is(err, ErrMeasuring):
		return status.Errorf(codes.Unavailable, "%s volume %q on node %s: %v; it goes on, and a later call gets the figure", op, handle, s.nodeID, err)
	case errors.Is(err, reclaim.ErrDeleting):
		s.refused(handle, metrics.RefusedDeleting, "the PersistentVolume is being deleted")
		return status.Errorf(codes.FailedPrecondition,
			"%s volume %q: the PersistentVolume is being deleted and its copies with it; it is not mounted again", op, handle)
	case errors.Is(err, reclaim.ErrNoVolume):
		return status.Errorf(codes.NotFound, "%s volume %q: %v; the volumeHandle must be the PersistentVolume's name", op, handle, err)
	case errors.Is(err, reclaim.ErrNotOurs):
		s.refused(handle, metrics.RefusedNotOurs, err.Error())
		return status.Errorf(codes.FailedPrecondition, "%s volume %q: %v; nothing was created or recorded", op, handle, err)
	case errors.Is(err, reclaim.ErrConflict):
		return status.Errorf(codes.Aborted, "%s volume %q on node %s: %v; kubelet retries", op, handle, s.nodeID, err)
	case errors.Is(err, reclaim.ErrForbidden):
		return status.Errorf(codes.PermissionDenied,
			"%s volume %q on node %s: %v; check the driver's RBAC and the per-node.liken.sh-records admission policy (deploy/)",
			op, handle, s.nodeID, err)
	case errors.Is(err, reclaim.ErrAPI):
		return status.Errorf(codes.Unavailable,
			"%s volume %q on node %s: %v; the copy is not created until this node is recorded on the PersistentVolume, kubelet retries",
			op, handle, s.nodeID, err)
	default:
		return status.Errorf(codes.Internal, "%s volume %q on node %s: %v; see the per-node driver log on that node",
			op, handle, s.nodeID, err)
	}
}

// refused tells the PV's story when a mount is refused.
func (s *Server) refused(handle, reason, why string) {
	s.metrics.Refused(reason)
	if s.tracker != nil {
		s.tracker.Event(context.Background(), handle, "", "Warning", "MountRefused", "node "+s.nodeID+": "+why)
	}
}
