// Package logstream carries the lines that worker processes print: each line goes whole to
// the rank's log file and, prefixed with the rank and pid, to the console, where identical
// lines printed by many ranks at about the same time are folded into one.
package logstream
