// Package arch checks that docs/DESIGN.md's package table is the tree's:
// every package of the module is in it once, and each imports only the
// herd packages its row says it knows. The table cannot go stale without
// failing here.
package arch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "herd"

// goPackage is what go list says of one package.
type goPackage struct {
	ImportPath string
	GoFiles    []string
	Imports    []string
}

// row is one line of the table: the packages in its first column, the
// herd packages its last column names, and whether that column says
// "everything".
type row struct {
	line       int
	packages   []string
	knows      []string
	everything bool
}

func root(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// listPackages is every package of the module with its non-test imports.
func listPackages(t *testing.T, dir string) map[string]goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]goPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

var (
	code      = regexp.MustCompile("`([^`]+)`")
	tableHead = regexp.MustCompile(`^\| *package *\|.*\| *knows *\|$`)
)

// readTable parses the package table: the first table in DESIGN.md
// whose header starts with "package" and ends with "knows". A cell names
// packages in backquotes, relative to the module ("server/hub", "main"
// for the root); a trailing slash is allowed.
func readTable(t *testing.T, design string) []row {
	t.Helper()
	f, err := os.Open(design)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []row
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in:
			in = tableHead.MatchString(line)
		case strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| ---"):
		case strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			last := cells[len(cells)-1]
			rows = append(rows, row{line: n, packages: names(cells[0]), knows: names(last),
				everything: strings.Contains(last, "everything")})
		default:
			return rows
		}
	}
	return rows
}

// names turns the backquoted names of a cell into import paths.
func names(cell string) []string {
	var out []string
	for _, m := range code.FindAllStringSubmatch(cell, -1) {
		name := strings.TrimSuffix(strings.TrimSpace(m[1]), "/")
		if name == "main" || name == module {
			out = append(out, module)
			continue
		}
		out = append(out, module+"/"+name)
	}
	return out
}

// TestDesignPackageTable: every package with Go files is in the table
// exactly once, the table names no package that does not exist, and no
// package imports a herd package its row does not name.
func TestDesignPackageTable(t *testing.T) {
	dir := root(t)
	pkgs := listPackages(t, dir)
	rows := readTable(t, filepath.Join(dir, "docs", "DESIGN.md"))
	if len(rows) == 0 {
		t.Fatal("docs/DESIGN.md has no package table (| package | … | knows |)")
	}
	seen := map[string]int{}
	for _, r := range rows {
		for _, p := range r.packages {
			if prev, ok := seen[p]; ok {
				t.Errorf("DESIGN.md:%d: %s is already in the row of line %d", r.line, p, prev)
			}
			seen[p] = r.line
			got, ok := pkgs[p]
			if !ok {
				// A row may name a directory of no Go code (static
				// fixtures); any other name is stale.
				if fi, err := os.Stat(filepath.Join(dir, strings.TrimPrefix(p, module+"/"))); err != nil || !fi.IsDir() {
					t.Errorf("DESIGN.md:%d: %s is not a package or directory of the module", r.line, p)
				}
				continue
			}
			if r.everything {
				continue
			}
			for _, imp := range got.Imports {
				if (imp == module || strings.HasPrefix(imp, module+"/")) && !slices.Contains(r.knows, imp) {
					t.Errorf("%s imports %s, which its row (DESIGN.md:%d) does not name", p, imp, r.line)
				}
			}
		}
	}
	for path, p := range pkgs {
		if _, ok := seen[path]; !ok && len(p.GoFiles) > 0 {
			t.Errorf("package %s is not in DESIGN.md's package table", path)
		}
	}
}

// TestDesignIsShort: DESIGN.md is read in ten minutes.
func TestDesignIsShort(t *testing.T) {
	fi, err := os.Stat(filepath.Join(root(t), "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 40<<10 {
		t.Errorf("docs/DESIGN.md is %d bytes, over 40 KB", fi.Size())
	}
}
