package config

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

const defaultsSource = "built-in defaults"

// source is where a value came from, so that an error can point the
// operator at the file, variable or flag to fix.
type source struct {
	name string // file path, env variable, flag or defaultsSource
	// key is the key path the source itself names (an env variable or a
	// flag), so errors about exactly that key need not repeat it.
	key string
}

// keyError is one problem with one key.
type keyError struct {
	src     source
	key     string // dotted key path; "" when the problem names its keys itself
	problem string
}

func (e *keyError) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.src.name != "" {
		b.WriteString(e.src.name + ": ")
	}
	if e.key != "" && e.key != e.src.key {
		b.WriteString(e.key + ": ")
	}
	b.WriteString(e.problem)
	return b.String()
}

// loader accumulates the problems of one Load, so a single start reports
// all of them.
type loader struct {
	errs []error
	// failed holds key paths whose value could not be decoded; validation
	// stays quiet about them and everything below, having nothing true to say.
	failed map[string]bool
	// origin maps each key path a layer set to that layer; the longest
	// prefix of a path names the layer its value came from.
	origin map[string]source
}

func (l *loader) err() error { return errors.Join(l.errs...) }

func (l *loader) add(src source, key, format string, args ...any) {
	l.errs = append(l.errs, &keyError{src: src, key: key, problem: fmt.Sprintf(format, args...)})
}

func (l *loader) setOrigin(key string, src source) {
	for k := range l.origin {
		if strings.HasPrefix(k, key+".") {
			delete(l.origin, k)
		}
	}
	l.origin[key] = src
}

func (l *loader) originOf(key string) source {
	for k := key; ; {
		if src, ok := l.origin[k]; ok {
			return src
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			return source{}
		}
		k = k[:i]
	}
}

// decodeDocument merges one YAML document into root.
func (l *loader) decodeDocument(root reflect.Value, data []byte, src source) {
	raw, err := parseYAML(data)
	if err != nil {
		l.add(src, "", "%v", err)
		return
	}
	l.decodeInto(root, raw, nil, src, true)
}

// parseYAML reads one YAML document into MapSlice, []any and scalars,
// with anchors, aliases and merge keys resolved.
func parseYAML(data []byte) (raw any, err error) {
	// The YAML library has panicked on malformed input before
	// (goccy/go-yaml#540, #718); a bad file must be reported, not crash
	// the start.
	defer func() {
		if p := recover(); p != nil {
			raw, err = nil, fmt.Errorf("YAML parser failed: %v", p)
		}
	}()
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, errors.New(yaml.FormatError(err, false, false))
	}
	var body ast.Node
	for _, d := range f.Docs {
		if d.Body == nil {
			continue
		}
		if body != nil {
			return nil, errors.New("more than one YAML document")
		}
		body = d.Body
	}
	if body == nil {
		return nil, nil
	}
	if err := yaml.NodeToValue(body, &raw, yaml.UseOrderedMap()); err != nil {
		return nil, errors.New(yaml.FormatError(err, false, false))
	}
	return raw, nil
}

// decodeInto sets v from raw, the value at key path. A mapping merges into a
// struct key by key; every other kind is built anew and replaces v. It
// reports false when some value had the wrong type; a list or map is set
// with what could be decoded, a scalar is left as it was. track records
// the origin of each key set, which only keys outside lists and maps need:
// a list or map has one origin for all it holds.
func (l *loader) decodeInto(v reflect.Value, raw any, path []string, src source, track bool) bool {
	if raw == nil {
		if v.Kind() != reflect.Struct {
			v.SetZero()
		}
		return true
	}
	switch v.Kind() {
	case reflect.Struct:
		return l.decodeStruct(v, raw, path, src, track)
	case reflect.Pointer:
		nv := reflect.New(v.Type().Elem())
		ok := l.decodeInto(nv.Elem(), raw, path, src, false)
		if ok || isContainer(nv.Elem().Kind()) {
			v.Set(nv)
		}
		return ok
	case reflect.Slice:
		return l.decodeSlice(v, raw, path, src)
	case reflect.Map:
		return l.decodeMap(v, raw, path, src)
	}
	want, ok := setScalar(v, raw)
	switch {
	case want == "":
		// Only a field type added to the schema without support here
		// gets here.
		key := strings.Join(path, ".")
		l.failed[key] = true
		l.add(src, key, "cannot be set (unsupported type %s)", v.Type())
		return false
	case !ok:
		return l.typeError(src, path, want, raw)
	}
	return true
}

// decodeStruct merges a mapping into the struct v key by key.
func (l *loader) decodeStruct(v reflect.Value, raw any, path []string, src source, track bool) bool {
	m, ok := raw.(yaml.MapSlice)
	if !ok {
		return l.typeError(src, path, "a mapping", raw)
	}
	key := strings.Join(path, ".")
	ok = true
	for _, item := range m {
		name := fmt.Sprint(item.Key)
		f, found := fieldByName(v.Type(), name)
		if !found {
			l.unknownKey(src, path, name, v.Type())
			continue
		}
		fv := v.FieldByIndex(f.Index)
		if !l.decodeInto(fv, item.Value, append(slices.Clip(path), name), src, track) {
			ok = false
		}
		if track && fv.Kind() != reflect.Struct {
			l.setOrigin(joinKey(key, name), src)
		}
	}
	return ok
}

// decodeSlice replaces the slice v with the list raw.
func (l *loader) decodeSlice(v reflect.Value, raw any, path []string, src source) bool {
	list, ok := raw.([]any)
	if !ok {
		return l.typeError(src, path, "a list", raw)
	}
	nv := reflect.MakeSlice(v.Type(), len(list), len(list))
	ok = true
	for i, e := range list {
		if !l.decodeInto(nv.Index(i), e, append(slices.Clip(path), strconv.Itoa(i)), src, false) {
			ok = false
		}
	}
	v.Set(nv)
	return ok
}

// decodeMap replaces the map v with the mapping raw.
func (l *loader) decodeMap(v reflect.Value, raw any, path []string, src source) bool {
	m, ok := raw.(yaml.MapSlice)
	if !ok {
		return l.typeError(src, path, "a mapping", raw)
	}
	nv := reflect.MakeMapWithSize(v.Type(), len(m))
	ok = true
	for _, item := range m {
		name := fmt.Sprint(item.Key)
		e := reflect.New(v.Type().Elem()).Elem()
		if !l.decodeInto(e, item.Value, append(slices.Clip(path), name), src, false) {
			ok = false
		}
		nv.SetMapIndex(reflect.ValueOf(name).Convert(v.Type().Key()), e)
	}
	v.Set(nv)
	return ok
}

// setScalar sets v from raw when raw is a value of v's kind, and names
// what it expected: "" for a kind it cannot set.
func setScalar(v reflect.Value, raw any) (want string, ok bool) {
	switch v.Kind() {
	case reflect.String:
		// A type that parses text takes any scalar as its text, so that
		// `stream: false` needs no quotes.
		if u, isText := textUnmarshaler(v); isText {
			switch raw.(type) {
			case string, bool, int, int64, uint64, float64:
				return "a string", u.UnmarshalText([]byte(fmt.Sprint(raw))) == nil
			}
		}
		s, ok := raw.(string)
		if ok {
			v.SetString(s)
		}
		return "a string", ok
	case reflect.Bool:
		b, ok := raw.(bool)
		if ok {
			v.SetBool(b)
		}
		return "true or false", ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := toInt(raw)
		if ok = ok && !v.OverflowInt(n); ok {
			v.SetInt(n)
		}
		return "an integer", ok
	case reflect.Float32, reflect.Float64:
		f, ok := toFloat(raw)
		if ok {
			v.SetFloat(f)
		}
		return "a number", ok
	}
	return "", false
}

func textUnmarshaler(v reflect.Value) (encoding.TextUnmarshaler, bool) {
	if !v.CanAddr() {
		return nil, false
	}
	u, ok := v.Addr().Interface().(encoding.TextUnmarshaler)
	return u, ok
}

func isContainer(k reflect.Kind) bool {
	return k == reflect.Struct || k == reflect.Slice || k == reflect.Map
}

func (l *loader) typeError(src source, path []string, want string, raw any) bool {
	key := strings.Join(path, ".")
	l.failed[key] = true
	l.add(src, key, "expected %s, got %s", want, describe(raw, isSecret(path)))
	return false
}

func (l *loader) unknownKey(src source, path []string, name string, t reflect.Type) {
	var known []string
	for i := range t.NumField() {
		if n := yamlName(t.Field(i)); n != "" {
			known = append(known, n)
		}
	}
	parent := strings.Join(path, ".")
	problem := fmt.Sprintf("unknown key %q", joinKey(parent, name))
	if near := closest(name, known); near != "" {
		problem += fmt.Sprintf(" (did you mean %q?)", joinKey(parent, near))
	}
	l.add(src, "", "%s", problem)
}

// isSecret tells whether the value at path must never be shown.
func isSecret(path []string) bool {
	if len(path) >= 4 && path[0] == "mcp" && (path[3] == "env" || path[3] == "headers" || path[3] == "url") {
		return true // an MCP server's env or header value, or its URL, may hold a token
	}
	return len(path) > 0 && path[len(path)-1] == "api_key"
}

// toInt accepts YAML integers and floats with an integral value (1e3).
func toInt(raw any) (int64, bool) {
	switch n := raw.(type) {
	case int64:
		return n, true
	case uint64:
		if n > math.MaxInt64 {
			return 0, false
		}
		return int64(n), true
	case int:
		return int64(n), true
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return 0, false
		}
		return int64(n), true
	}
	return 0, false
}

// toFloat accepts YAML numbers.
func toFloat(raw any) (float64, bool) {
	switch n := raw.(type) {
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case int:
		return float64(n), true
	}
	return 0, false
}

// describe names a decoded YAML value for an error message: the value
// itself, or only its kind when it is secret.
func describe(raw any, secret bool) string {
	switch raw.(type) {
	case nil:
		return "null"
	case yaml.MapSlice:
		return "a mapping"
	case []any:
		return "a list"
	}
	if secret {
		switch raw.(type) {
		case string:
			return "a string"
		case bool:
			return "a boolean"
		default:
			return "a number"
		}
	}
	switch v := raw.(type) {
	case string:
		const limit = 60
		if utf8.RuneCountInString(v) > limit {
			v = string([]rune(v)[:limit]) + "…"
		}
		return strconv.Quote(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case int64, uint64, int, bool:
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("a value of type %T", raw)
}

// yamlName is the key of a struct field, "" for a field with no yaml tag.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

func fieldByName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); yamlName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func joinKey(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func sortedKeys(m reflect.Value) []reflect.Value {
	keys := m.MapKeys()
	slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

// closest returns the candidate within two edits of s, for "did you mean".
func closest(s string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes:
// keys are ASCII.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
