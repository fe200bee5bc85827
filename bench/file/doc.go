// Package file is the file source's benchmark: the bridge binary serving a
// services file of N services, edited one line at a time, with its CPU
// and memory per edit (Run; results as CSV and Markdown).
package file
