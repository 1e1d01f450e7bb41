package rosparam

import (
	"strings"
	"testing"
)

// TestValidateTopicName: the names rcl_validate_topic_name accepts and
// refuses (its test cases in rcl/test/rcl/test_validate_topic_name.cpp,
// transcribed by rule), and rmw's length bound.
func TestValidateTopicName(t *testing.T) {
	for _, ok := range []string{"topic", "/topic", "~/topic", "~", "ns/topic", "/ns/_t1", "{node}/chatter", "/{ns}/x_{a1}", "_9",
		strings.Repeat("a", MaxTopicNameLength)} {
		if err := ValidateTopicName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for name, want := range map[string]string{
		"":                          "topic name is empty",
		"topic/":                    `it ends with '/' at byte 5`,
		"/":                         `it ends with '/' at byte 0`,
		"to pic":                    `it holds " " at byte 2`,
		"a\x00b":                    `it holds "\x00" at byte 1`,
		"t\xc3\xa9":                 `it holds "\xc3" at byte 1`,
		"1topic":                    `a name token starts with a digit at byte 0`,
		"/ns/2x":                    `a name token starts with a digit at byte 4`,
		"a//b":                      `it repeats '/' at byte 2`,
		"{node":                     `a '{' is never closed at byte 0`,
		"node}":                     `a '}' closes no '{' at byte 4`,
		"{no de}":                   `the substitution holds " " at byte 3`,
		"{1node}":                   `the substitution starts with a digit at byte 1`,
		"a~":                        `'~' is not its first character at byte 1`,
		"~a":                        `'~' is not followed by '/' at byte 1`,
		strings.Repeat("a", 248):    "is 248 bytes long, more than the 247 rmw allows",
		strings.Repeat("a", 50<<20): "is 52428800 bytes long, more than the 247 rmw allows",
	} {
		err := ValidateTopicName(name)
		if err == nil || !strings.Contains(err.Error(), want) || len(err.Error()) > 300 {
			t.Errorf("%.40q: got %.300v, want an error containing %q", name, err, want)
		}
	}
}

// TestResolveTopicName: relative, absolute, private and substituted names
// resolved as rcl_expand_topic_name does.
func TestResolveTopicName(t *testing.T) {
	for _, c := range []struct{ name, fqn, want string }{
		{"action", "/fastwam_executor", "/action"},
		{"/action", "/fastwam_executor", "/action"},
		{"action", "/arm/fastwam_executor", "/arm/action"},
		{"ns/x", "/arm/left/n", "/arm/left/ns/x"},
		{"~", "/arm/n", "/arm/n"},
		{"~/hold", "/arm/n", "/arm/n/hold"},
		{"~/hold", "/n", "/n/hold"},
		{"{node}/x", "/arm/n", "/arm/n/x"},
		{"/{ns}/x", "/arm/n", "/arm/x"},
		{"{namespace}/x", "/n", "/x"},
		{"action", "", "action"},
	} {
		if got := ResolveTopicName(c.name, c.fqn); got != c.want {
			t.Errorf("%q in %q: %q, want %q", c.name, c.fqn, got, c.want)
		}
	}
}

// TestCheckTopicCollisions: two topics that resolve alike are refused,
// naming both parameters, or the parameter and the fixed topic.
func TestCheckTopicCollisions(t *testing.T) {
	rosout := TopicUse{Name: "/rosout", Fixed: "the log every ROS node publishes"}
	for _, c := range []struct {
		fqn  string
		uses []TopicUse
		want string
	}{
		{"/x", []TopicUse{{Param: "a", Name: "action"}, {Param: "b", Name: "/action"}},
			`parameters "a" and "b" name the same topic "/action" in node /x (given as "action" and "/action")`},
		{"/arm/x", []TopicUse{{Param: "a", Name: "action"}, {Param: "b", Name: "/arm/action"}},
			`parameters "a" and "b" name the same topic "/arm/action" in node /arm/x`},
		{"/x", []TopicUse{rosout, {Param: "a", Name: "rosout"}},
			`parameter "a" names the topic "/rosout" in node /x, the log every ROS node publishes`},
		{"/x", []TopicUse{{Param: "a", Name: "/rosout"}, rosout}, `parameter "a" names the topic "/rosout"`},
		{"", []TopicUse{{Param: "a", Name: "t"}, {Param: "b", Name: "t"}}, `parameters "a" and "b" name the same topic "t" (given as "t" and "t")`},
		{"/arm/x", []TopicUse{{Param: "a", Name: "action"}, {Param: "b", Name: "/action"}, rosout}, ""},
		{"", []TopicUse{{Param: "a", Name: "action"}, {Param: "b", Name: "/action"}}, ""},
	} {
		err := CheckTopicCollisions(c.fqn, c.uses)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: got %v, want %q", c.fqn, c.uses, err, c.want)
		}
	}
}
