//go:build !unix

package testenv

import "io/fs"

// ownedByRoot is false: there is no root to run as.
func ownedByRoot(fs.FileInfo) bool { return false }
