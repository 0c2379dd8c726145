package upload

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxNameLen is the longest package name: the longest file name on common filesystems.
const maxNameLen = 255

// ValidName checks a package name, such as "_ray_pkg_0123456789abcdef.zip": letters,
// digits, '_', '-' and '.', ending in ".zip" after at least one other character, with no
// "..", no leading dot, and at most 255 bytes. Such a name is a plain file name, which
// cannot name a folder or a hidden file. The error wraps ErrInvalidName.
func ValidName(name string) error {
	why := ""
	switch {
	case name == "":
		why = "it is empty"
	case len(name) > maxNameLen:
		why = "it is longer than 255 bytes"
	case strings.HasPrefix(name, "."):
		why = "it starts with a dot"
	case !strings.HasSuffix(name, ".zip"):
		why = `it does not end in ".zip"`
	case strings.Contains(name, ".."):
		why = `it contains ".."`
	default:
		why = badNameChar(name)
	}
	if why != "" {
		return refuse(ErrInvalidName, "invalid package name %q: %s; a package name looks like _ray_pkg_<hex>.zip", name, why)
	}
	return nil
}

// badNameChar describes the first character of name that a package name may not hold,
// or returns "".
func badNameChar(name string) string {
	for _, c := range []byte(name) {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.'
		if !ok {
			return "it contains " + quoteByte(c) + "; only letters, digits, '_', '-' and '.' are allowed"
		}
	}
	return ""
}

// quoteByte returns c as a quoted character, or in hex when it is not ASCII.
func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("the byte 0x%02x", c)
}
