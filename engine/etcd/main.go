// Command etcd is etcd v3.6.16's server, built from its published module: the module's own main
// package sits in a module with local replaces, which `go install` refuses.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
