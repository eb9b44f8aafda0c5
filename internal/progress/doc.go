// Package progress shows the progress of a long command (bench, soak, attack) on stderr: on a
// terminal one line rewritten in place at most ten times a second; elsewhere (a file, a pipe, CI)
// whole lines, one every few seconds, so that a captured log stays readable.
package progress
