// Package dwork is the wire format of dwork's QueryMsg API
// (shared/specs/dwork.rst; the real implementation is frobnitzem/dwork at
// commit 2ca92dc): bytes to messages and back, and the rules a request must
// follow, with no sockets and no scheduler.
package dwork

//go:generate protoc --go_out=. --go_opt=paths=source_relative dwork.proto
