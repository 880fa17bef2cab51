package elasticidl

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// The types of the generated tables (tables_gen.go) and their lookups.

// strPair is a key and its value.
type strPair struct{ key, value string }

// enumText is an enum number and its text.
type enumText struct {
	number int32
	text   string
}

// enumShortName is an enum value's name and the short name a task file may write for it.
type enumShortName struct{ enum, name, short string }

// suffixPower is a quantity suffix and the power (of 2 or 10) it stands for.
type suffixPower struct {
	suffix string
	power  int
}

func lookup(pairs []strPair, key string) string {
	for _, p := range pairs {
		if p.key == key {
			return p.value
		}
	}
	return ""
}

func enumTextOf(table []enumText, n int32) (string, bool) {
	for _, e := range table {
		if e.number == n {
			return e.text, true
		}
	}
	return "", false
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// pyFloatRepr is Python's repr() of a float: the shortest digits that read back,
// in positional form for exponents -4..15, else as 1.5e-07 or 1e+16.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expText, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expText)
	sign := ""
	if strings.HasPrefix(mant, "-") {
		sign, mant = "-", mant[1:]
	}
	digits := strings.Replace(mant, ".", "", 1)
	if exp < -4 || exp >= 16 {
		out := digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		e := strconv.Itoa(exp)
		if len(e) < 2 {
			e = "0" + e
		}
		return sign + out + "e" + es + e
	}
	if exp < 0 {
		return sign + "0." + strings.Repeat("0", -exp-1) + digits
	}
	if len(digits) <= exp+1 {
		return sign + digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	}
	return sign + digits[:exp+1] + "." + digits[exp+1:]
}
