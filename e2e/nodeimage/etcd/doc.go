// Package etcd holds no code: its go.mod pins the etcd release build.sh
// builds for the offline kind node image.
package etcd
