package sass

import (
	"regexp"
	"strconv"
	"strings"
)

var (
	entryRE = regexp.MustCompile(`^\.visible\s+\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*\(\s*(\))?`)
	paramRE = regexp.MustCompile(`^\.param\s+\.([a-z0-9]+)\s`)
)

// PTXParams returns the parameter types ("u64", "u32", "f32", …) of every entry of a PTX text.
func PTXParams(ptx string) map[string][]string {
	out := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(ptx, "\n") {
		line = strings.TrimSpace(line)
		if cur == "" {
			if m := entryRE.FindStringSubmatch(line); m != nil {
				out[m[1]] = []string{}
				if m[2] == "" {
					cur = m[1]
				}
			}
			continue
		}
		if strings.HasPrefix(line, ")") {
			cur = ""
			continue
		}
		if m := paramRE.FindStringSubmatch(line); m != nil {
			out[cur] = append(out[cur], m[1])
		}
		if strings.HasSuffix(line, ")") {
			cur = ""
		}
	}
	return out
}

// Resources is what ptxas -v reports for one function.
type Resources struct {
	Registers int // per thread
	Shared    int // static shared memory, bytes
	Stack     int // stack frame, bytes
}

var (
	compilingRE = regexp.MustCompile(`Compiling entry function '([^']+)' for 'sm_\d+'`)
	propsRE     = regexp.MustCompile(`Function properties for (\S+)`)
	stackRE     = regexp.MustCompile(`(\d+) bytes stack frame`)
	usedRE      = regexp.MustCompile(`Used (\d+) registers(?:, (\d+) bytes smem)?`)
)

// ParseResources reads ptxas -v output: each function's registers, shared memory and stack.
func ParseResources(report string) map[string]Resources {
	res := map[string]Resources{}
	cur := ""
	for _, line := range strings.Split(report, "\n") {
		if m := compilingRE.FindStringSubmatch(line); m != nil {
			cur = m[1]
			continue
		}
		if m := propsRE.FindStringSubmatch(line); m != nil {
			cur = m[1]
			continue
		}
		if cur == "" {
			continue
		}
		r := res[cur]
		if m := stackRE.FindStringSubmatch(line); m != nil {
			r.Stack, _ = strconv.Atoi(m[1])
		}
		if m := usedRE.FindStringSubmatch(line); m != nil {
			r.Registers, _ = strconv.Atoi(m[1])
			if m[2] != "" {
				r.Shared, _ = strconv.Atoi(m[2])
			}
		}
		res[cur] = r
	}
	return res
}
