// Command etcd is upstream's etcd server, built from the go.etcd.io/etcd/server/v3 module for
// the envtest control plane (see the Makefile's envtest-assets target). `go install` of that
// module fails on its replace directives; requiring it from this module works.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
