// Package linktest holds the tests of runtime detection in a program that
// links one adapter only (runtime/docker), as a consumer that imports what
// it uses does: the runtimes it does not link are found and reported with
// the import to add, never silently passed over. It has no code of its own.
package linktest
