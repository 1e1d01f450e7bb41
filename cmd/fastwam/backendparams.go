package main

import (
	"flag"
	"strconv"
	"strings"

	"github.com/fastwam/actionexpert/node/params"
)

// The node parameters that configure a backend (backend, cpu.*, htp.*) are
// the node binary's way of saying what the flags of replay and bag make say.
// Those commands open the backend themselves, so a -p of these parameters
// is carried over to the flags, and refused when the command cannot use it
// (another backend's parameter) or when it contradicts an explicit flag.

// embeddedWeights stands for the embedded tiny weights in cpu.weights.
const embeddedWeights = "embedded tiny/weights.safetensors"

// binding ties a backend parameter to the flag that sets the same thing.
type binding struct {
	param, flag string
	flagValue   func() string                 // the flag's value as -p would write it
	paramValue  func(p *params.Params) string // the parameter's value, same form
	adopt       func(p *params.Params)        // set the flag from the parameter
}

// backendOf is the backend a parameter configures ("cpu", "htp"), or "".
func backendOf(param string) string {
	for _, b := range []string{params.BackendCPU, params.BackendHTP} {
		if strings.HasPrefix(param, b+".") {
			return b
		}
	}
	return ""
}

// cpuBindings ties cpu.weights and cpu.threads to -weights and -threads.
func cpuBindings(f *cpuFlags) []binding {
	return []binding{
		{"cpu.weights", "weights", func() string { return orEmbedded(f.weights) },
			func(p *params.Params) string { return p.CPU.Weights },
			func(p *params.Params) {
				f.weights = p.CPU.Weights
				if f.weights == embeddedWeights {
					f.weights = ""
				}
			}},
		{"cpu.threads", "threads", func() string { return strconv.Itoa(f.threads) },
			func(p *params.Params) string { return strconv.Itoa(p.CPU.Threads) },
			func(p *params.Params) { f.threads = p.CPU.Threads }},
	}
}

// htpBindings ties the htp.* parameters to the HTP backend's flags.
func htpBindings(f *htpFlags) []binding {
	str := func(param, flag string, fv *string, pv func(p *params.Params) *string) binding {
		return binding{param, flag, func() string { return *fv },
			func(p *params.Params) string { return *pv(p) },
			func(p *params.Params) { *fv = *pv(p) }}
	}
	return []binding{
		str("htp.context_binary", "context", &f.context, func(p *params.Params) *string { return &p.HTP.ContextBinary }),
		str("htp.graph_name", "graph", &f.graph, func(p *params.Params) *string { return &p.HTP.GraphName }),
		str("htp.backend_library", "backend-lib", &f.backendLib, func(p *params.Params) *string { return &p.HTP.BackendLibrary }),
		str("htp.system_library", "system-lib", &f.systemLib, func(p *params.Params) *string { return &p.HTP.SystemLibrary }),
		str("htp.rpcmem_library", "rpcmem-lib", &f.rpcmemLib, func(p *params.Params) *string { return &p.HTP.RPCMemLibrary }),
		str("htp.performance_mode", "perf", &f.perf, func(p *params.Params) *string { return &p.HTP.PerformanceMode }),
		{"htp.context_paths", "context-paths", func() string { return f.paths },
			func(p *params.Params) string { return strings.Join(p.HTP.ContextPaths, ",") },
			func(p *params.Params) { f.paths = strings.Join(p.HTP.ContextPaths, ",") }},
		str("htp.world_model", "world-model", &f.worldModel, func(p *params.Params) *string { return &p.HTP.WorldModel }),
		{"htp.shared_buffers", "shared-buffers", func() string { return strconv.FormatBool(f.shared) },
			func(p *params.Params) string { return strconv.FormatBool(p.HTP.SharedBuffers) },
			func(p *params.Params) { f.shared = p.HTP.SharedBuffers }},
	}
}

func orEmbedded(weights string) string {
	if weights == "" {
		return embeddedWeights
	}
	return weights
}

// seedParams writes the flags' values into p's backend parameters, so the
// node reports what the command runs and -p starts from the flags.
func seedParams(p *params.Params, c *cpuFlags, h *htpFlags) {
	p.CPU.Weights, p.CPU.Threads = orEmbedded(c.weights), c.threads
	if h != nil {
		p.HTP.ContextBinary, p.HTP.GraphName = h.context, h.graph
		p.HTP.BackendLibrary, p.HTP.SystemLibrary, p.HTP.RPCMemLibrary = h.backendLib, h.systemLib, h.rpcmemLib
		p.HTP.PerformanceMode, p.HTP.SharedBuffers = h.perf, h.shared
		p.HTP.WorldModel = h.worldModel
		if ps, err := params.ParsePaths(h.paths); err == nil {
			p.HTP.ContextPaths = ps // a malformed list is refused when the backend opens
		}
	}
}

// adoptParams carries the backend parameters that -p gave (names, in
// order) over to the flags through bs. A parameter of a backend other than
// p.Backend is refused (cmd cannot use it), and so is one that contradicts
// a flag given explicitly (set).
func adoptParams(cmd string, p *params.Params, names []string, set map[string]bool, bs []binding) error {
	for _, name := range names {
		if b := backendOf(name); b != "" && b != p.Backend {
			return usageError("-p %s: a parameter of the %s backend, but %s runs the %s backend; it would have no effect", name, b, cmd, p.Backend)
		}
		for _, b := range bs {
			if b.param == name && set[b.flag] && b.flagValue() != b.paramValue(p) {
				return usageError("-p %s:=%s contradicts -%s %s; give one of them", name, b.paramValue(p), b.flag, b.flagValue())
			}
		}
	}
	for _, b := range bs {
		if backendOf(b.param) == p.Backend {
			b.adopt(p)
		}
	}
	return nil
}

// checkInputSizes refuses cpu.video_tokens and cpu.context_tokens that
// differ from the sizes of the inputs the command feeds (from what, for
// example "the bag's messages"): the CPU backend is sized from those
// inputs, and other sizes would make the node reject every one of them.
func checkInputSizes(p *params.Params, videoTokens, contextTokens int, what string) error {
	for _, c := range []struct {
		name      string
		set, have int
	}{
		{"cpu.video_tokens", p.CPU.VideoTokens, videoTokens},
		{"cpu.context_tokens", p.CPU.ContextTokens, contextTokens},
	} {
		if c.set != 0 && c.have != 0 && c.set != c.have {
			return usageError("-p %s:=%d: %s have %d; the CPU backend is sized from them, and %d would reject every input",
				c.name, c.set, what, c.have, c.set)
		}
	}
	return nil
}

// names returns the parameter names of the -p rules, in order.
func (f *nodeFlags) names() []string {
	var out []string
	for _, rule := range f.params {
		if name, _, ok := strings.Cut(rule, ":="); ok {
			out = append(out, name)
		}
	}
	return out
}

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *cmdFlags) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
