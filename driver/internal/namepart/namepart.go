// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package namepart fits an object's name (a node's, a PersistentVolume's:
// up to 253 characters) into the name part of a qualified name, which a
// finalizer and a label key share: 63 characters at most.
package namepart

import (
	"crypto/sha256"
	"encoding/hex"
)

// Max is the longest name part of a qualified name.
const Max = 63

// Of is name itself when it fits, else its first 50 characters, a dash and
// the first 12 hex digits of its SHA-256: unambiguous in practice, and
// still readable. A DNS subdomain's first 50 characters end in a letter, a
// digit, a dot or a dash, all of which a name part allows inside it.
func Of(name string) string {
	if !Hashed(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:50] + "-" + hex.EncodeToString(sum[:])[:12]
}

// Hashed reports whether Of shortens name.
func Hashed(name string) bool { return len(name) > Max }

// LooksHashed reports whether part has the shape Of gives a long name: 50
// characters, a dash and 12 hex digits.
func LooksHashed(part string) bool {
	if len(part) != Max || part[50] != '-' {
		return false
	}
	_, err := hex.DecodeString(part[51:])
	return err == nil
}
