// Builds etcd for the offline kind node image. etcd's server module points
// its sibling modules at relative paths; each is replaced here by its
// published version (kept equal to ETCD_VERSION in ../versions.env).
module liken.sh/per-node/e2e/nodeimage/etcd

go 1.25.0

require go.etcd.io/etcd/server/v3 v3.6.6

replace (
	go.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 v3.6.6
	go.etcd.io/etcd/client/pkg/v3 => go.etcd.io/etcd/client/pkg/v3 v3.6.6
	go.etcd.io/etcd/client/v3 => go.etcd.io/etcd/client/v3 v3.6.6
	go.etcd.io/etcd/pkg/v3 => go.etcd.io/etcd/pkg/v3 v3.6.6
)
