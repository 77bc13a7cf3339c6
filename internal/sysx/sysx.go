// Package sysx holds the few raw system-call helpers the packages that read
// files with care share.
package sysx
