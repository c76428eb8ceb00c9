package fusefs

import (
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
)

// TestNoLoopbackMethodPromoted: every method of go-fuse's loopback node
// (beyond fs.Inode's) is overridden by node. A promoted one would reach
// the backing by path and follow symbolic links.
func TestNoLoopbackMethodPromoted(t *testing.T) {
	loopback, inode, ours := reflect.TypeOf(&fs.LoopbackNode{}), reflect.TypeOf(&fs.Inode{}), reflect.TypeOf(&node{})
	for i := range loopback.NumMethod() {
		name := loopback.Method(i).Name
		if _, ok := inode.MethodByName(name); ok {
			continue
		}
		m, _ := ours.MethodByName(name)
		f := runtime.FuncForPC(m.Func.Pointer())
		// A promoted method is a compiler-generated wrapper.
		if file, _ := f.FileLine(f.Entry()); filepath.Base(filepath.Dir(file)) != "fusefs" {
			t.Errorf("node.%s is go-fuse's loopback method (%s), which works by path", name, file)
		}
	}
}
