package config

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

const envPrefix = "HERD_"

// parseEnviron maps KEY=VALUE pairs; the first of a repeated key wins, as
// with os.Getenv.
func parseEnviron(environ []string) map[string]string {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if _, seen := env[k]; ok && !seen {
			env[k] = v
		}
	}
	return env
}

// envKey is a key path that an environment variable can name.
type envKey struct {
	path []string
	kind reflect.Kind // of the value, pointers looked through
}

// envName turns a key path into the variable that overrides it. Names are
// generated from the schema rather than split, because keys themselves
// contain underscores.
func envName(path []string) string {
	name := strings.NewReplacer(".", "_", "-", "_").Replace(strings.Join(path, "_"))
	return envPrefix + strings.ToUpper(name)
}

// indexEnv maps the variable name of every key path under v to its paths;
// more than one path means the name is ambiguous (agents a-b and a_b).
func indexEnv(v reflect.Value, path []string, idx map[string][]envKey) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			break
		}
		v = v.Elem()
	}
	if len(path) > 0 {
		kind := v.Kind()
		if kind == reflect.Pointer {
			kind = v.Type().Elem().Kind()
		}
		name := envName(path)
		idx[name] = append(idx[name], envKey{path: path, kind: kind})
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if name := yamlName(v.Type().Field(i)); name != "" {
				indexEnv(v.Field(i), append(slices.Clip(path), name), idx)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			indexEnv(v.Index(i), append(slices.Clip(path), strconv.Itoa(i)), idx)
		}
	case reflect.Map:
		for _, k := range sortedKeys(v) {
			indexEnv(v.MapIndex(k), append(slices.Clip(path), k.String()), idx)
		}
	}
}

// unmatchedVar is a HERD_ variable that names no key, with the error it is
// worth unless the caller knows it for something else. near marks a
// variable that is close to a real key (a typo, or an entry missing from a
// list or map): that is an error. One that resembles no key is only
// warned about, because HERD_ is a common prefix for unrelated settings
// in a shared environment.
type unmatchedVar struct {
	name string
	err  error
	near bool
}

// applyEnv applies the HERD_ variables of env to root. A shallower key is
// applied first, so HERD_MODELS sets the list before HERD_MODELS_1_API_KEY
// reaches into it; the index is rebuilt after each one because a whole
// list or map may add keys that later variables name.
func (l *loader) applyEnv(root reflect.Value, env map[string]string) []unmatchedVar {
	var pending []string
	for name := range env {
		if strings.HasPrefix(name, envPrefix) {
			pending = append(pending, name)
		}
	}
	slices.Sort(pending)
	for {
		idx := map[string][]envKey{}
		indexEnv(root, nil, idx)
		best := -1
		for i, name := range pending {
			if keys, ok := idx[name]; ok && (best < 0 || len(keys[0].path) < len(idx[pending[best]][0].path)) {
				best = i
			}
		}
		if best < 0 {
			unmatched := make([]unmatchedVar, len(pending))
			for i, name := range pending {
				err, near := unknownEnv(name, idx)
				unmatched[i] = unmatchedVar{name: name, err: err, near: near}
			}
			return unmatched
		}
		name := pending[best]
		pending = slices.Delete(pending, best, best+1)
		if keys := idx[name]; len(keys) > 1 {
			var paths []string
			for _, k := range keys {
				paths = append(paths, strings.Join(k.path, "."))
			}
			l.add(source{name: name}, "", "names more than one key (%s); set their parent whole instead", strings.Join(paths, ", "))
		} else {
			l.applyEnvVar(root, name, env[name], keys[0].path)
		}
	}
}

func (l *loader) applyEnvVar(root reflect.Value, name, value string, path []string) {
	key := strings.Join(path, ".")
	src := source{name: name, key: key}
	update(root, path, func(v reflect.Value) {
		// A string is taken verbatim: read as YAML, a prompt with a colon
		// or a key starting with a quote would change or fail.
		if v.Kind() == reflect.String {
			v.SetString(value)
			l.setOrigin(key, src)
			return
		}
		raw, err := parseYAML([]byte(value))
		if err != nil {
			l.failed[key] = true
			l.add(src, key, "invalid YAML: %v", err)
			return
		}
		l.decodeInto(v, raw, path, src, true)
		if v.Kind() != reflect.Struct {
			l.setOrigin(key, src)
		}
	})
}

// update calls fn with the value at path under v, writing map entries
// back since they are not addressable. path must exist.
func update(v reflect.Value, path []string, fn func(reflect.Value)) {
	if len(path) == 0 {
		fn(v)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		update(v.Elem(), path, fn)
	case reflect.Struct:
		f, _ := fieldByName(v.Type(), path[0])
		update(v.FieldByIndex(f.Index), path[1:], fn)
	case reflect.Slice:
		i, _ := strconv.Atoi(path[0])
		update(v.Index(i), path[1:], fn)
	case reflect.Map:
		k := reflect.ValueOf(path[0]).Convert(v.Type().Key())
		e := reflect.New(v.Type().Elem()).Elem()
		e.Set(v.MapIndex(k))
		update(e, path[1:], fn)
		v.SetMapIndex(k, e)
	}
}

// unknownEnv explains a variable that names no key and reports whether it
// is near one: an entry missing from a list or map, or within two edits
// of a real variable.
func unknownEnv(name string, idx map[string][]envKey) (error, bool) {
	problem := "matches no config key"
	near := true
	parent := ""
	for n := range idx {
		if strings.HasPrefix(name, n+"_") && len(n) > len(parent) {
			parent = n
		}
	}
	if k := idx[parent]; parent != "" && (k[0].kind == reflect.Slice || k[0].kind == reflect.Map) {
		problem += fmt.Sprintf(": %s has no such entry (set it whole with %s)", strings.Join(k[0].path, "."), parent)
	} else if key := closest(name, slices.Sorted(maps.Keys(idx))); key != "" {
		problem += fmt.Sprintf(" (did you mean %s?)", key)
	} else {
		near = false
	}
	return &keyError{src: source{name: name}, problem: problem}, near
}

var apiKeyRef = regexp.MustCompile(`^\$(?:([A-Za-z_][A-Za-z0-9_]*)|\{([A-Za-z_][A-Za-z0-9_]*)\})$`)

// expandAPIKeys replaces every api_key of the form $NAME or ${NAME} with
// that variable's value and returns the names referenced.
func (l *loader) expandAPIKeys(c *Config, env map[string]string) map[string]bool {
	refs := map[string]bool{}
	for i := range c.Models {
		m := &c.Models[i]
		sub := apiKeyRef.FindStringSubmatch(m.APIKey)
		if sub == nil {
			continue
		}
		name := sub[1] + sub[2]
		refs[name] = true
		if v := env[name]; v != "" {
			m.APIKey = v
		} else {
			l.invalid(fmt.Sprintf("models.%d.api_key", i), "environment variable %s is not set", name)
		}
	}
	return refs
}

// Variables lists the HERD_ variables of the configuration defaults
// describes (the embedded config.example.yaml), for herd --help: every key
// of a section, and a list or map as the one variable that sets it whole.
func Variables(defaults []byte) ([]string, error) {
	c, err := load(defaults, "", nil, nil, Overrides{})
	if err != nil {
		return nil, err
	}
	var names []string
	var walk func(t reflect.Type, path []string)
	walk = func(t reflect.Type, path []string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := yamlName(f)
			if name == "" {
				continue
			}
			p := append(slices.Clip(path), name)
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				walk(ft, p)
				continue
			}
			names = append(names, envName(p))
		}
	}
	walk(reflect.TypeOf(*c), nil)
	return names, nil
}
