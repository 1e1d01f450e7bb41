package msgs

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

// definitionFiles holds this package's .msg files (msg/) and the ROS 2
// Humble definitions they depend on (deps/<package>/msg/).
//
//go:embed msg/*.msg deps/*/msg/*.msg
var definitionFiles embed.FS

// Types lists the ROS types whose full definition Definition returns: the
// node's messages and the standard messages it publishes.
func Types() []string {
	return []string{TypeTensor, TypeVideoKVCache, TypeTextContext, TypeActionRow, TypeActionChunk, TypeStampedAction, TypeSharedTensor, TypeKVHandoff, TypeDiagnosticArray}
}

// fieldTypeRE finds the type of every field and constant of a .msg text. It
// is the expression rosbag2's MCAP storage plugin (Humble) uses to find the
// dependencies of a definition, so the text built here is the one rosbag2
// stores. Comment lines never match: '#' is not in the type's characters.
var fieldTypeRE = regexp.MustCompile(`(?:^|\n)\s*([a-zA-Z0-9_/]+)(?:\[[^\]]*\])?\s+`)

// isPrimitive reports whether t is a .msg built-in type, which has no
// definition (the list rosbag2 uses).
func isPrimitive(t string) bool {
	switch t {
	case "bool", "byte", "char", "float32", "float64", "int8", "uint8",
		"int16", "uint16", "int32", "uint32", "int64", "uint64", "string":
		return true
	}
	return false
}

// Definition returns the full ros2msg definition of a message type as
// rosbag2 (Humble) stores it as the schema of an MCAP channel: the type's
// .msg text, then for each dependency, depth first in sorted order and each
// once, a newline, a line of 80 '=', a line "MSG: <package>/<Type>" and that
// dependency's .msg text. rosType is "package/msg/Type" or "package/Type",
// one of this package's messages or a standard message they use.
func Definition(rosType string) (string, error) {
	root, err := normalizeType(rosType)
	if err != nil {
		return "", err
	}
	seen := map[string]bool{}
	var b strings.Builder
	if err := appendDefinition(&b, root, seen, 0); err != nil {
		return "", fmt.Errorf("msgs: definition of %s: %w", rosType, err)
	}
	return b.String(), nil
}

// maxDefinitionDepth bounds the dependency recursion as rosbag2 does.
const maxDefinitionDepth = 50

// appendDefinition writes the text of name ("pkg/Type") followed by its not
// yet seen dependencies.
func appendDefinition(b *strings.Builder, name string, seen map[string]bool, depth int) error {
	if depth >= maxDefinitionDepth {
		return fmt.Errorf("dependencies nest deeper than %d levels at %s", maxDefinitionDepth, name)
	}
	text, err := loadDefinition(name)
	if err != nil {
		return err
	}
	b.WriteString(text)
	pkg, _, _ := strings.Cut(name, "/")
	for _, dep := range dependencies(text, pkg) {
		if seen[dep] {
			continue
		}
		seen[dep] = true
		b.WriteString("\n" + strings.Repeat("=", 80) + "\nMSG: " + dep + "\n")
		if err := appendDefinition(b, dep, seen, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// dependencies returns the sorted, distinct non-primitive field types of a
// .msg text, each as "pkg/Type" (types without a package belong to pkg).
func dependencies(text, pkg string) []string {
	var deps []string
	for _, m := range fieldTypeRE.FindAllStringSubmatch(text, -1) {
		t := m[1]
		if isPrimitive(t) {
			continue
		}
		if !strings.Contains(t, "/") {
			t = pkg + "/" + t
		}
		deps = append(deps, t)
	}
	slices.Sort(deps)
	return slices.Compact(deps)
}

// normalizeType turns "pkg/msg/Type" or "pkg/Type" into "pkg/Type".
func normalizeType(rosType string) (string, error) {
	parts := strings.Split(rosType, "/")
	switch {
	case len(parts) == 3 && parts[1] == "msg" && parts[0] != "" && parts[2] != "":
		return parts[0] + "/" + parts[2], nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return rosType, nil
	}
	return "", fmt.Errorf("msgs: message type %q is not of the form package/msg/Type", rosType)
}

// loadDefinition returns the .msg text of "pkg/Type".
func loadDefinition(name string) (string, error) {
	pkg, typ, _ := strings.Cut(name, "/")
	path := "deps/" + pkg + "/msg/" + typ + ".msg"
	if pkg == Package {
		path = "msg/" + typ + ".msg"
	}
	text, err := definitionFiles.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no definition of %s in this package (it knows %s and their dependencies)", name, strings.Join(Types(), ", "))
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return string(text), nil
}
