package params_test

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/node/params"
)

// paramTableFile is the page whose parameter table this test keeps in
// step with the node's parameter definitions.
const paramTableFile = "../../docs/node.md"

// rosType is the ROS parameter type of a default value as Params.Value
// returns it.
func rosType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "double"
	case bool:
		return "bool"
	case []float64:
		return "double array"
	}
	return "unknown"
}

// docDefault is a default value as the table writes it.
func docDefault(v any) string {
	switch v := v.(type) {
	case string:
		return "`" + strconv.Quote(v) + "`"
	case int64:
		return "`" + strconv.FormatInt(v, 10) + "`"
	case float64:
		return "`" + strconv.FormatFloat(v, 'g', -1, 64) + "`"
	case bool:
		return "`" + strconv.FormatBool(v) + "`"
	case []float64:
		parts := make([]string, len(v))
		for i, f := range v {
			parts[i] = strconv.FormatFloat(f, 'g', -1, 64)
		}
		return "`[" + strings.Join(parts, ", ") + "]`"
	}
	return "?"
}

// TestParamTableInStep checks that docs/node.md's parameter table lists
// exactly the node's parameters, each once, with its type and default, and
// a range, a "live" answer and a description. A new parameter fails it
// until its row is written; the message gives the row's first columns.
func TestParamTableInStep(t *testing.T) {
	data, err := os.ReadFile(paramTableFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	const begin, end = "<!-- params-table -->", "<!-- /params-table -->"
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("%s: no table between %s and %s", paramTableFile, begin, end)
	}
	defaults := params.Default()
	rows := map[string][]string{}
	for line := range strings.SplitSeq(text[i+len(begin):j], "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "| `") {
			continue // header, separator, blank
		}
		// Cells are separated by " | "; an escaped \| inside a cell is not a separator.
		cells := strings.Split(strings.ReplaceAll(strings.Trim(line, "|"), `\|`, "\x00"), " | ")
		for k := range cells {
			cells[k] = strings.TrimSpace(strings.ReplaceAll(cells[k], "\x00", `\|`))
		}
		if len(cells) != 6 {
			t.Errorf("row %q: %d cells, want 6 (name, type, default, range, live, description)", line, len(cells))
			continue
		}
		name := strings.Trim(cells[0], "`")
		if _, dup := rows[name]; dup {
			t.Errorf("parameter %q has two rows", name)
		}
		rows[name] = cells
	}
	for _, name := range params.Names() {
		v, _ := defaults.Value(name)
		cells, ok := rows[name]
		if !ok {
			t.Errorf("parameter %q is missing from %s; add the row | `%s` | %s | %s | <range> | <live: yes/no> | <description> |",
				name, paramTableFile, name, rosType(v), docDefault(v))
			continue
		}
		delete(rows, name)
		if cells[1] != rosType(v) || cells[2] != docDefault(v) {
			t.Errorf("parameter %q: the table says type %s, default %s; the node declares %s, %s", name, cells[1], cells[2], rosType(v), docDefault(v))
		}
		if !slices.Contains([]string{"yes", "no"}, strings.Fields(cells[4] + " x")[0]) {
			t.Errorf("parameter %q: live %q, want it to start with yes or no", name, cells[4])
		}
		if cells[3] == "" || cells[5] == "" {
			t.Errorf("parameter %q: empty range or description", name)
		}
	}
	for name := range rows {
		t.Errorf("%s lists %q, which the node does not declare", paramTableFile, name)
	}
}
