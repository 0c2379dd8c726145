// Package shell writes commands the way a POSIX shell reads them back, for display.
package shell

import "strings"

// safe are the characters a word may hold and still need no quotes.
const safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%"

// Quote returns s as one shell word: as it is when it holds only safe characters, else in
// single quotes.
func Quote(s string) string {
	if s != "" && strings.Trim(s, safe) == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join writes words as a command line a shell would split back into them.
func Join(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = Quote(w)
	}
	return strings.Join(out, " ")
}
