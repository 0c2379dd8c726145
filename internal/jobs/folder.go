package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// Folder names. An ID of the old rule (what a run name may be, and that does not look
// derived) names its folders itself, as every ID did before IDs could be any string;
// any other ID, Ray's submission_ids among them, gets a derived name.
var (
	plainFolder   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	derivedFolder = regexp.MustCompile(`--[0-9a-f]{16}$`)
)

// folderPrefixLen is how much of a derived folder name is the ID's own, for people
// reading the storage path.
const folderPrefixLen = 40

// FolderName returns the name of a job's run folder and spec file: the ID when it is a
// valid run name, else a run name derived from it, at most 40 of its safe characters
// ('_' for any other byte), "--" and 16 hex digits of its SHA-256. No path is ever built
// from an ID itself, and two IDs never share a folder: plain names never end like derived
// ones (an ID that does is derived too), and derived names differ by their hash.
func FolderName(id string) string {
	if plainFolder.MatchString(id) && !derivedFolder.MatchString(id) {
		return id
	}
	var b strings.Builder
	for i := 0; i < len(id) && b.Len() < folderPrefixLen; i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	prefix := strings.TrimLeft(b.String(), "._-")
	if prefix == "" {
		prefix = "job"
	}
	sum := sha256.Sum256([]byte(id))
	return prefix + "--" + hex.EncodeToString(sum[:8])
}
