// Package fsread reads files with care: stamps of what a stat says, and one
// bounded read of a regular file that never follows a link it was told not
// to, never blocks on a FIFO or device swapped in, and reads at most the
// size the descriptor reported plus one byte. The Git reader and the
// updater's marker reads share it.
package fsread
