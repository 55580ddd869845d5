// Command etcd is etcd's own server entry point, built from the
// go.etcd.io/etcd/server/v3 module that k8s.io/kubernetes already requires,
// so the etcd server and the apiserver's etcd client come from one
// consistent module graph (the same thing etcd's root main.go does).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
