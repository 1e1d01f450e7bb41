package rosparam

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// MaxTopicNameLength is rmw's RMW_TOPIC_MAX_NAME_LENGTH: 255 bytes, less 8
// reserved for the middleware's prefixes. A name is checked against it as
// given; resolved in a namespace it only grows.
const MaxTopicNameLength = 255 - 8

// ValidateTopicName checks a topic name as a parameter gives it, by the
// rules of rcl_validate_topic_name (relative or absolute, "~" for the
// node's private namespace, {substitutions}) and of
// rmw_validate_full_topic_name for what the name contributes to the
// resolved one (no repeated '/', at most MaxTopicNameLength bytes). The
// error names the first problem and where it is.
func ValidateTopicName(name string) error {
	bad := func(at int, why string) error {
		return fmt.Errorf("topic name %s is not a valid ROS topic name: %s at byte %d "+
			"(names hold letters, digits, '_' and '/', a leading \"~/\" and {substitutions})", short(name), why, at)
	}
	switch {
	case name == "":
		return fmt.Errorf("topic name is empty")
	case len(name) > MaxTopicNameLength:
		return fmt.Errorf("topic name %s is %d bytes long, more than the %d rmw allows", short(name), len(name), MaxTopicNameLength)
	case name[len(name)-1] == '/':
		return bad(len(name)-1, "it ends with '/'")
	}
	word := func(c byte) bool {
		return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
	}
	digit := func(c byte) bool { return '0' <= c && c <= '9' }
	open := -1 // the '{' of the substitution being read
	for i := 0; i < len(name); i++ {
		c := name[i]
		if open >= 0 {
			switch {
			case c == '}':
				open = -1
			case !word(c):
				return bad(i, "the substitution holds "+quoteByte(c))
			case i == open+1 && digit(c):
				return bad(i, "the substitution starts with a digit")
			}
			continue
		}
		switch {
		case word(c):
		case c == '/':
			if i > 0 && name[i-1] == '/' {
				return bad(i, "it repeats '/'")
			}
		case c == '{':
			open = i
		case c == '}':
			return bad(i, "a '}' closes no '{'")
		case c == '~':
			if i != 0 {
				return bad(i, "'~' is not its first character")
			}
			if len(name) > 1 && name[1] != '/' {
				return bad(1, "'~' is not followed by '/'")
			}
		default:
			return bad(i, "it holds "+quoteByte(c))
		}
	}
	if open >= 0 {
		return bad(open, "a '{' is never closed")
	}
	for i := 0; i < len(name); i++ {
		if (i == 0 || name[i-1] == '/') && digit(name[i]) {
			return bad(i, "a name token starts with a digit")
		}
	}
	return nil
}

// short quotes s for a message, shortened when long.
func short(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "..."
	}
	return strconv.Quote(s)
}

// quoteByte quotes one byte of a name as Go would a one-byte string.
func quoteByte(c byte) string { return strconv.Quote(string([]byte{c})) }

// ResolveTopicName expands a valid topic name (ValidateTopicName) for the
// node whose fully qualified name is fqn ("/arm/node"), as
// rcl_expand_topic_name does: "~" is the node's fully qualified name,
// {node} its name, {ns} and {namespace} its namespace, and a relative name
// is put in the namespace. Remapping is not seen here. With fqn empty the
// name is returned as given: names are then compared as written.
func ResolveTopicName(name, fqn string) string {
	if fqn == "" {
		return name
	}
	ns, node := path.Split(path.Clean("/" + fqn))
	ns = path.Clean(ns)
	if name == "~" || strings.HasPrefix(name, "~/") {
		name = path.Join(ns, node) + name[1:]
	}
	name = strings.NewReplacer("{node}", node, "{ns}", ns, "{namespace}", ns).Replace(name)
	if !strings.HasPrefix(name, "/") {
		name = path.Join(ns, name)
	}
	return path.Clean(name)
}

// TopicUse is one topic a node creates: named by a parameter, or one the
// node always has (Param empty, Fixed saying what it is).
type TopicUse struct {
	Param string // the parameter that names the topic; "" for a fixed topic
	Name  string // the topic name as given
	Fixed string // for a fixed topic, what it is (for example "the log every ROS node publishes")
}

// CheckTopicCollisions refuses two of a node's topics that resolve
// (ResolveTopicName, for the node fqn) to the same name: a publisher and a
// subscription of one node on one topic, or two publishers of different
// types, are a misconfiguration. The error names both parameters (or the
// parameter and the fixed topic) and the topic. The names must be valid.
func CheckTopicCollisions(fqn string, uses []TopicUse) error {
	seen := make(map[string]TopicUse, len(uses))
	for _, u := range uses {
		r := ResolveTopicName(u.Name, fqn)
		first, dup := seen[r]
		if !dup {
			seen[r] = u
			continue
		}
		if first.Param == "" {
			first, u = u, first
		}
		at := ""
		if fqn != "" {
			at = " in node " + fqn
		}
		if u.Param == "" {
			return fmt.Errorf("parameter %q names the topic %s%s, %s: want a topic of its own",
				first.Param, short(r), at, u.Fixed)
		}
		return fmt.Errorf("parameters %q and %q name the same topic %s%s (given as %s and %s): want a topic of its own for each",
			first.Param, u.Param, short(r), at, short(first.Name), short(u.Name))
	}
	return nil
}
