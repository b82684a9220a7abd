// Package kubernetes holds no code: its go.mod pins the Kubernetes release
// whose binaries build.sh builds for the offline kind node image.
package kubernetes
