//go:build unix

package testenv

import (
	"io/fs"
	"syscall"
)

// ownedByRoot reports whether fi's owner is uid 0.
func ownedByRoot(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == 0
}
