package elasticidl

// Kubernetes container resources: the quantity grammar and the API server's
// rules, as the reference's elastic_idl/_task/resources.py (its docstring states them).
// The rule resources.quantity (a task's replica resources) and the resources
// render option both call quantityProblems.
//
// The grammar, the suffixes, the exponent range, the finest value and the
// binary cap come from tables_gen.go. Values are exact decimals (an integer
// coefficient and a power of 10), never floats: "1e2147483647" is a valid
// quantity, and 0.1n rounds away from zero to 1n as the API server keeps it.

import (
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strings"
)

// quantityRe matches a whole quantity (the reference uses fullmatch).
var quantityRe = regexp.MustCompile(`^(?:` + quantityPattern + `)$`)

var (
	bigTen       = big.NewInt(10)
	binaryCapInt = func() *big.Int { n, _ := new(big.Int).SetString(binaryCap, 10); return n }()
)

// decimal is the exact value coef x 10^exp.
type decimal struct {
	coef *big.Int
	exp  int64
}

func pow10(n int64) *big.Int { return new(big.Int).Exp(bigTen, big.NewInt(n), nil) }

// digits is the number of decimal digits of |coef| (1 for 0).
func (d decimal) digits() int64 {
	return int64(len(new(big.Int).Abs(d.coef).String()))
}

// cmp compares two decimals (-1, 0, +1) without writing out 10^exp for far apart
// exponents: magnitudes are compared by their leading digit's power first.
func (d decimal) cmp(o decimal) int {
	ds, os := d.coef.Sign(), o.coef.Sign()
	if ds != os || ds == 0 {
		switch {
		case ds < os:
			return -1
		case ds > os:
			return 1
		}
		return 0
	}
	// Same sign, both non-zero: compare magnitudes, then apply the sign.
	da, oa := d.digits()+d.exp, o.digits()+o.exp
	var mag int
	switch {
	case da != oa:
		mag = 1
		if da < oa {
			mag = -1
		}
	default:
		a, b := new(big.Int).Abs(d.coef), new(big.Int).Abs(o.coef)
		if d.exp > o.exp {
			a.Mul(a, pow10(d.exp-o.exp))
		} else if o.exp > d.exp {
			b.Mul(b, pow10(o.exp-d.exp))
		}
		mag = a.Cmp(b)
	}
	return mag * ds
}

// whole says whether the value is an integer.
func (d decimal) whole() bool {
	if d.exp >= 0 || d.coef.Sign() == 0 {
		return true
	}
	if -d.exp > d.digits() {
		return false
	}
	return new(big.Int).Rem(d.coef, pow10(-d.exp)).Sign() == 0
}

// roundUpTo rounds away from zero to a multiple of 10^exp, when the value is finer.
func (d decimal) roundUpTo(exp int64) decimal {
	if d.exp >= exp {
		return d
	}
	mag := new(big.Int).Abs(d.coef)
	shift := exp - d.exp
	var q *big.Int
	if shift > d.digits() {
		q = big.NewInt(0)
		if mag.Sign() != 0 {
			q.SetInt64(1)
		}
	} else {
		var r big.Int
		q, _ = new(big.Int).QuoRem(mag, pow10(shift), &r)
		if r.Sign() != 0 {
			q.Add(q, big.NewInt(1))
		}
	}
	if d.coef.Sign() < 0 {
		q.Neg(q)
	}
	return decimal{coef: q, exp: exp}
}

func suffixValue(table []suffixPower, suffix string) (int, bool) {
	for _, s := range table {
		if s.suffix == suffix {
			return s.power, true
		}
	}
	return 0, false
}

// parseQuantity is the exact value of a Kubernetes quantity, as the API server
// reads it (the reference's parse_quantity); the error says why text is none.
func parseQuantity(text string) (decimal, error) {
	m := quantityRe.FindStringSubmatch(text)
	if m == nil {
		return decimal{}, fmt.Errorf("%s is not a Kubernetes quantity (such as '2', '500m', '4Gi' or '1e3'; no spaces)",
			pyStrRepr(text))
	}
	sign, number, suffix := m[quantityRe.SubexpIndex("sign")], m[quantityRe.SubexpIndex("number")],
		m[quantityRe.SubexpIndex("suffix")]
	whole, frac, _ := strings.Cut(number, ".")
	coef, _ := new(big.Int).SetString("0"+whole+frac, 10)
	if sign == "-" {
		coef.Neg(coef)
	}
	value := decimal{coef: coef, exp: -int64(len(frac))}
	if power, ok := suffixValue(binarySuffixes, suffix); ok {
		value.coef.Lsh(value.coef, uint(power))
		limit := decimal{coef: binaryCapInt, exp: 0}
		if abs := (decimal{coef: new(big.Int).Abs(value.coef), exp: value.exp}); abs.cmp(limit) > 0 {
			value = decimal{coef: new(big.Int).Set(binaryCapInt), exp: 0}
			if coef.Sign() < 0 {
				value.coef.Neg(value.coef)
			}
		}
	} else {
		power, ok := suffixValue(decimalSuffixes, suffix)
		exp := big.NewInt(int64(power))
		if !ok { // e or E and a signed integer
			exp, _ = new(big.Int).SetString(strings.TrimPrefix(suffix[1:], "+"), 10)
		}
		if exp.Cmp(big.NewInt(quantityExponentMin)) < 0 || exp.Cmp(big.NewInt(quantityExponentMax)) > 0 {
			return decimal{}, fmt.Errorf("%s: the exponent does not fit in 32 bits", pyStrRepr(text))
		}
		value.exp += exp.Int64()
	}
	return value.roundUpTo(nanoExponent), nil
}

// isExtended says whether a resource is an extended one: a domain-prefixed name
// outside kubernetes.io (nvidia.com/gpu), counted in whole units and never
// overcommitted (the reference's is_extended).
func isExtended(name string) bool {
	return strings.Contains(name, "/") && !strings.Contains(name, "kubernetes.io/") &&
		!strings.HasPrefix(name, "requests.")
}

// overcommitAllowed says whether a request may be below its limit: native
// resources except hugepages.
func overcommitAllowed(name string) bool {
	return !isExtended(name) && !strings.HasPrefix(name, hugepagesPrefix)
}

// namedQuantity is a Kubernetes resource name and its quantity text.
type namedQuantity struct{ name, text string }

// quantityProblem is one broken rule: the list ("requests" or "limits"), the
// entry of it, and why.
type quantityProblem struct {
	kind    string
	entry   int
	message string
}

// quantityProblems is every rule one container's resources break, requests
// first, each list in entry order (the reference's quantity_problems). An entry
// with an empty text is skipped (the caller reports it); one with an empty name
// gets the checks of its text only. Within a list a name given twice counts
// once, with its last valid value.
func quantityProblems(requests, limits []namedQuantity) []quantityProblem {
	type valued struct {
		entry int
		value decimal
	}
	var out []quantityProblem
	values := map[string]map[string]valued{keyRequests: {}, keyLimits: {}}
	var requestOrder []string // names of valid requests, in first-seen order (a Python dict's)
	for _, list := range []struct {
		kind    string
		entries []namedQuantity
	}{{keyRequests, requests}, {keyLimits, limits}} {
		for i, q := range list.entries {
			if q.text == "" {
				continue
			}
			value, err := parseQuantity(q.text)
			switch {
			case err != nil:
				out = append(out, quantityProblem{list.kind, i, err.Error()})
			case value.coef.Sign() < 0:
				out = append(out, quantityProblem{list.kind, i,
					fmt.Sprintf("%s is negative; a %s is >= 0", pyStrRepr(q.text), strings.TrimSuffix(list.kind, "s"))})
			case q.name != "" && isExtended(q.name) && !value.whole():
				out = append(out, quantityProblem{list.kind, i,
					fmt.Sprintf("%s is not a whole number (%s counts whole devices)", pyStrRepr(q.text), q.name)})
			case q.name != "":
				if _, seen := values[list.kind][q.name]; !seen && list.kind == keyRequests {
					requestOrder = append(requestOrder, q.name)
				}
				values[list.kind][q.name] = valued{i, value}
			}
		}
	}
	for _, name := range requestOrder {
		request := values[keyRequests][name]
		limit, ok := values[keyLimits][name]
		if !ok {
			continue
		}
		requestText, limitText := pyStrRepr(requests[request.entry].text), pyStrRepr(limits[limit.entry].text)
		switch c := request.value.cmp(limit.value); {
		case !overcommitAllowed(name) && c != 0:
			out = append(out, quantityProblem{keyRequests, request.entry, fmt.Sprintf(
				"%s differs from the %s limit %s: %s cannot be overcommitted, so request and limit are equal",
				requestText, name, limitText, name)})
		case c > 0:
			out = append(out, quantityProblem{keyRequests, request.entry,
				fmt.Sprintf("%s is above the %s limit %s", requestText, name, limitText)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := out[i].kind == keyRequests, out[j].kind == keyRequests
		if ri != rj {
			return ri
		}
		return out[i].entry < out[j].entry
	})
	return out
}
