package flinkemu

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"
)

// Node is one znode in a Dump.
type Node struct {
	Data      []byte
	Ephemeral bool
	Children  []string // sorted
}

// Tree is a recursive dump of a ZooKeeper subtree, by path.
type Tree map[string]Node

// Dump reads root and everything below it. A missing root gives an empty
// tree. Nodes that vanish while it reads are left out.
func Dump(conn *zk.Conn, root string) (Tree, error) {
	t := Tree{}
	var walk func(path string) error
	walk = func(path string) error {
		data, stat, err := conn.Get(path)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("dump %s: %w", path, err)
		}
		kids, _, err := conn.Children(path)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("dump %s: %w", path, err)
		}
		slices.Sort(kids)
		t[path] = Node{Data: data, Ephemeral: stat.EphemeralOwner != 0, Children: kids}
		for _, k := range kids {
			child := path + "/" + k
			if path == "/" {
				child = "/" + k
			}
			if err := walk(child); err != nil {
				return err
			}
		}
		return nil
	}
	return t, walk(root)
}

// Diff lists the differences from t to u (empty when identical).
func (t Tree) Diff(u Tree) []string {
	var out []string
	for _, p := range t.Paths() {
		a := t[p]
		b, ok := u[p]
		switch {
		case !ok:
			out = append(out, "- "+p)
		case !bytes.Equal(a.Data, b.Data):
			out = append(out, fmt.Sprintf("~ %s: data %q -> %q", p, a.Data, b.Data))
		case a.Ephemeral != b.Ephemeral:
			out = append(out, fmt.Sprintf("~ %s: ephemeral %v -> %v", p, a.Ephemeral, b.Ephemeral))
		case !slices.Equal(a.Children, b.Children):
			out = append(out, fmt.Sprintf("~ %s: children %v -> %v", p, a.Children, b.Children))
		}
	}
	for _, p := range u.Paths() {
		if _, ok := t[p]; !ok {
			out = append(out, "+ "+p)
		}
	}
	return out
}

// WithoutEphemeral returns the tree as it is once every session that owns
// an ephemeral node is gone: without those nodes (and below them).
func (t Tree) WithoutEphemeral() Tree {
	out := Tree{}
	for p, n := range t {
		if n.Ephemeral {
			continue
		}
		var kids []string
		for _, k := range n.Children {
			child := p + "/" + k
			if p == "/" {
				child = "/" + k
			}
			if !t[child].Ephemeral {
				kids = append(kids, k)
			}
		}
		n.Children = kids
		out[p] = n
	}
	return out
}

// Paths returns the paths, sorted.
func (t Tree) Paths() []string {
	out := make([]string, 0, len(t))
	for p := range t {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// String renders the tree, one node a line.
func (t Tree) String() string {
	var b strings.Builder
	for _, p := range t.Paths() {
		n := t[p]
		eph := ""
		if n.Ephemeral {
			eph = " (ephemeral)"
		}
		fmt.Fprintf(&b, "%s%s [%d bytes]\n", p, eph, len(n.Data))
	}
	return b.String()
}
