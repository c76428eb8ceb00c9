package logkeys

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// logReceiver matches the expressions loggers are called through here:
// log, l.log, b.log, fsys.log, cfg.Logger, logger, and package slog.
var logReceiver = regexp.MustCompile(`(?i)(^|\.)(log|logger|slog)$`)

// logMethods are slog's methods that take a message, then attributes;
// With takes attributes only.
var logMethods = map[string]int{"Debug": 1, "Info": 1, "Warn": 1, "Error": 1, "With": 0}

// TestLogKeysAreInTheVocabulary reads every non-test Go file of the
// module and checks the string keys of every log call against Keys.
func TestLogKeysAreInTheVocabulary(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	calls := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			first, ok := logMethods[sel.Sel.Name]
			if !ok || !logReceiver.MatchString(exprString(sel.X)) {
				return true
			}
			calls++
			for i := first; i < len(call.Args); i += 2 {
				lit, ok := call.Args[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					break // a slog.Attr or a computed key: not checked
				}
				key, _ := strconv.Unquote(lit.Value)
				if _, ok := Keys[key]; !ok {
					t.Errorf("%s: log key %q is not in logkeys.Keys (use the vocabulary's key, or add it there)", fset.Position(lit.Pos()), key)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 30 {
		t.Errorf("found only %d log calls: the walk misses the code", calls)
	}
}

func TestVocabularyAvoidsReservedKeys(t *testing.T) {
	for _, k := range Reserved {
		if _, ok := Keys[k]; ok {
			t.Errorf("%q is slog's own key", k)
		}
	}
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return ""
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = filepath.Dir(dir)
	}
}
