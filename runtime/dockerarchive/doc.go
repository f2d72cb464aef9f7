// Package dockerarchive is the codec of the docker-archive format (what
// `docker save` writes and `docker load` reads), the stream that
// runtime.ImageStore's SaveImage and LoadImage speak on every backend
// that has an image store: Read checks an archive whole (one image, one
// tag, every file its manifest names present) before any of it reaches a
// backend, and AppendLayer writes a copy of one with a layer of files
// added on top (how a warm template is made from its base image).
//
// It is kept out of the port's own package: the port names the verbs, and
// this is one format they carry.
package dockerarchive
