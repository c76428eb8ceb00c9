package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/ckptfs/ckptfs/zkbridge"
)

// clean removes the drill under -staging: its znodes, its directories,
// drill.json, and -staging itself if the drill created it and nothing
// else is left in it.
func clean(ctx context.Context, o options, w io.Writer, log *slog.Logger) error {
	st, err := readState(o.staging)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no drill under %s (no %s): nothing to clean", o.staging, stateFile)
	}
	if err != nil {
		return err
	}
	addr := st.ZK
	if o.zk != "" {
		addr = o.zk
	}
	if err := removeLaid(ctx, o.staging, st, addr, log, w); err != nil {
		return err
	}
	if st.StagingCreated {
		if err := os.Remove(o.staging); err == nil {
			fmt.Fprintf(w, "removed %s\n", o.staging)
		}
	}
	return nil
}

// removeLaid removes what st lists, through the ZooKeeper at addr, and
// says what it removed on w.
func removeLaid(ctx context.Context, staging string, st state, addr string, log *slog.Logger, w io.Writer) error {
	if err := st.check(); err != nil {
		return err
	}
	servers, err := zkbridge.ParseServers(addr)
	if err != nil {
		return fmt.Errorf("ZooKeeper %q: %w", addr, err)
	}
	conn, err := connect(ctx, servers, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, z := range st.Znodes {
		ok, _, err := conn.Exists(z)
		if err != nil {
			return fmt.Errorf("ZooKeeper %s: %w", z, err)
		}
		if !ok {
			continue
		}
		if err := deleteTree(conn, z); err != nil {
			return err
		}
		fmt.Fprintf(w, "deleted %s from ZooKeeper\n", z)
	}
	var roots []string
	if st.PathRootCreated {
		roots = append(roots, st.PathRoot)
	}
	if st.CkptfsRootCreated {
		roots = append(roots, zkbridge.DefaultConfig().CkptfsRoot)
	}
	for _, r := range roots {
		switch err := conn.Delete(r, -1); {
		case err == nil:
			fmt.Fprintf(w, "deleted %s from ZooKeeper\n", r)
		case errors.Is(err, zk.ErrNotEmpty):
			fmt.Fprintf(w, "kept %s in ZooKeeper: something else is below it\n", r)
		case !errors.Is(err, zk.ErrNoNode):
			return fmt.Errorf("ZooKeeper %s: %w", r, err)
		}
	}
	for _, d := range st.Dirs {
		dir := filepath.Join(staging, d)
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		fmt.Fprintf(w, "removed %s\n", dir)
	}
	if err := os.Remove(filepath.Join(staging, stateFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// check refuses a drill.json that names anything the drill does not lay:
// znodes outside its path root and ckptfs's cluster znode, directories
// that are not plain names.
func (st state) check() error {
	ckptfs := zkbridge.DefaultConfig().CkptfsRoot + "/" + st.ClusterID
	for _, z := range st.Znodes {
		if z != strings.TrimRight(st.PathRoot, "/")+"/"+st.ClusterID && z != ckptfs {
			return fmt.Errorf("%s names znode %s, which no drill lays: remove it by hand", stateFile, z)
		}
	}
	if !clusterIDPattern.MatchString(st.ClusterID) || !strings.HasPrefix(st.PathRoot, "/") || st.PathRoot == "/" {
		return fmt.Errorf("%s: cluster id %q or path root %q is not a drill's", stateFile, st.ClusterID, st.PathRoot)
	}
	for _, d := range st.Dirs {
		if d != activeSite && d != standbySite {
			return fmt.Errorf("%s names directory %q, which no drill lays: remove it by hand", stateFile, d)
		}
	}
	return nil
}

// connect opens a ZooKeeper session.
func connect(ctx context.Context, servers []string, log *slog.Logger) (*zk.Conn, error) {
	has := make(chan struct{}, 1)
	conn, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogger(zkLogger{log}), zk.WithEventCallback(func(ev zk.Event) {
		if ev.State == zk.StateHasSession {
			select {
			case has <- struct{}{}:
			default:
			}
		}
	}))
	if err != nil {
		return nil, fmt.Errorf("ZooKeeper %s: %w", strings.Join(servers, ","), err)
	}
	select {
	case <-has:
		return conn, nil
	case <-ctx.Done():
		conn.Close()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		conn.Close()
		return nil, fmt.Errorf("ZooKeeper %s: no session within 30s", strings.Join(servers, ","))
	}
}

// deleteTree deletes path and everything below it, children first.
func deleteTree(conn *zk.Conn, path string) error {
	kids, _, err := conn.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ZooKeeper %s: %w", path, err)
	}
	for _, k := range kids {
		if err := deleteTree(conn, path+"/"+k); err != nil {
			return err
		}
	}
	if err := conn.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("ZooKeeper %s: %w", path, err)
	}
	return nil
}

// zkLogger hands the ZooKeeper client's messages to the logger, at
// debug: they are about reconnects the drill does not act on.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }
