// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package tree

import "golang.org/x/sys/unix"

// mountID is what is known of the mount a directory is on.
type mountID struct {
	id    uint64
	known bool
	root  bool // the directory is the root of a mount
}

// statxMount says whether to ask statx for the mount ID and the mount-root
// attribute (Linux 5.8+). Tests turn it off to walk as on an older kernel,
// where the mount ID comes from name_to_handle_at(2) (Linux 2.6.39+) and a
// mount of another filesystem shows by its device number.
var statxMount = true

// mountOf tells the mount of the directory open at fd.
func mountOf(fd int) mountID {
	var m mountID
	if statxMount {
		var st unix.Statx_t
		if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &st) == nil {
			m.root = st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
			if st.Mask&unix.STATX_MNT_ID != 0 {
				m.id, m.known = st.Mnt_id, true
				return m
			}
		}
	}
	if _, id, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH); err == nil {
		m.id, m.known = uint64(id), true
	}
	return m
}
