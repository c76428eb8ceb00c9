module github.com/ckptfs/ckptfs

go 1.26.0

require (
	github.com/fsnotify/fsnotify v1.10.1
	github.com/go-zookeeper/zk v1.0.4
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/sys v0.50.0
)

require github.com/inconshreveable/mousetrap v1.1.0 // indirect
