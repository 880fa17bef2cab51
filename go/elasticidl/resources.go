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
	"sort"
	"strconv"
	"strings"
)

// decimal is the exact value -1^neg x digits x 10^exp, digits a decimal digit
// string without leading zeros ("" for zero, which has no sign). Kept as text,
// every operation is linear in the digits: a quantity may have a million.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

func (d decimal) sign() int {
	switch {
	case d.digits == "":
		return 0
	case d.neg:
		return -1
	}
	return 1
}

// cmp compares two decimals (-1, 0, +1): by sign, then by the power of the
// leading digit, then digit by digit.
func (d decimal) cmp(o decimal) int {
	ds, os := d.sign(), o.sign()
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
	da, oa := int64(len(d.digits))+d.exp, int64(len(o.digits))+o.exp
	var mag int
	switch {
	case da != oa:
		mag = 1
		if da < oa {
			mag = -1
		}
	default: // the leading digits have the same power: compare the digits in order
		n := min(len(d.digits), len(o.digits))
		mag = strings.Compare(d.digits[:n], o.digits[:n])
		if mag == 0 && strings.Trim(d.digits[n:], "0") != "" {
			mag = 1
		}
		if mag == 0 && strings.Trim(o.digits[n:], "0") != "" {
			mag = -1
		}
	}
	return mag * ds
}

// whole says whether the value is an integer.
func (d decimal) whole() bool {
	if d.exp >= 0 || d.digits == "" {
		return true
	}
	if -d.exp > int64(len(d.digits)) {
		return false
	}
	return strings.Trim(d.digits[int64(len(d.digits))+d.exp:], "0") == ""
}

// roundUpTo rounds away from zero to a multiple of 10^exp, when the value is finer.
func (d decimal) roundUpTo(exp int64) decimal {
	if d.exp >= exp || d.digits == "" {
		return d
	}
	shift := exp - d.exp
	q := ""
	if shift <= int64(len(d.digits)) {
		q = d.digits[:int64(len(d.digits))-shift]
		if strings.Trim(d.digits[int64(len(d.digits))-shift:], "0") == "" {
			return decimal{neg: d.neg && q != "", digits: q, exp: exp}
		}
	}
	return decimal{neg: d.neg, digits: incremented(q), exp: exp}
}

// incremented is the digit string plus one.
func incremented(digits string) string {
	b := []byte(digits)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != '9' {
			b[i]++
			return string(b)
		}
		b[i] = '0'
	}
	return "1" + string(b)
}

// timesSmall is the digit string times m (at most 2^60, so that no step overflows).
func timesSmall(digits string, m uint64) string {
	if digits == "" {
		return ""
	}
	out := make([]byte, 0, len(digits)+20)
	var carry uint64
	for i := len(digits) - 1; i >= 0; i-- {
		x := uint64(digits[i]-'0')*m + carry
		out = append(out, byte('0'+x%10))
		carry = x / 10
	}
	for ; carry > 0; carry /= 10 {
		out = append(out, byte('0'+carry%10))
	}
	for len(out) > 1 && out[len(out)-1] == '0' {
		out = out[:len(out)-1]
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

func suffixValue(table []suffixPower, suffix string) (int, bool) {
	for _, s := range table {
		if s.suffix == suffix {
			return s.power, true
		}
	}
	return 0, false
}

// splitQuantity reads a whole quantity as quantityPattern does (sign, number,
// suffix), in one pass: a regexp with submatches costs a hundred times more on
// a quantity of a million digits.
func splitQuantity(text string) (sign, number, suffix string, ok bool) {
	digitsFrom := func(i int) int {
		for i < len(text) && text[i] >= '0' && text[i] <= '9' {
			i++
		}
		return i
	}
	i := 0
	if i < len(text) && (text[i] == '+' || text[i] == '-') {
		i++
	}
	j := digitsFrom(i)
	whole := j > i
	if j < len(text) && text[j] == '.' {
		k := digitsFrom(j + 1)
		if !whole && k == j+1 {
			return "", "", "", false
		}
		j = k
	} else if !whole {
		return "", "", "", false
	}
	sign, number, suffix = text[:i], text[i:j], text[j:]
	switch {
	case suffix == "":
	case len(suffix) == 2 && suffix[1] == 'i' && strings.IndexByte("KMGTPE", suffix[0]) >= 0:
	case len(suffix) == 1 && strings.IndexByte("numkMGTPE", suffix[0]) >= 0:
	case suffix[0] == 'e' || suffix[0] == 'E':
		k := 1
		if k < len(suffix) && (suffix[k] == '+' || suffix[k] == '-') {
			k++
		}
		if k == len(suffix) || digitsFrom(j+k) != len(text) {
			return "", "", "", false
		}
	default:
		return "", "", "", false
	}
	return sign, number, suffix, true
}

// parseQuantity is the exact value of a Kubernetes quantity, as the API server
// reads it (the reference's parse_quantity); the error says why text is none.
func parseQuantity(text string) (decimal, error) {
	sign, number, suffix, ok := splitQuantity(text)
	if !ok {
		return decimal{}, fmt.Errorf("%s is not a Kubernetes quantity (such as '2', '500m', '4Gi' or '1e3'; no spaces)",
			pyStrRepr(text))
	}
	whole, frac, _ := strings.Cut(number, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	value := decimal{neg: sign == "-" && digits != "", digits: digits, exp: -int64(len(frac))}
	if power, ok := suffixValue(binarySuffixes, suffix); ok {
		value.digits = timesSmall(value.digits, uint64(1)<<power)
		limit := decimal{digits: binaryCap}
		if abs := (decimal{digits: value.digits, exp: value.exp}); abs.cmp(limit) > 0 {
			value = decimal{neg: value.neg, digits: binaryCap}
		}
	} else {
		power, ok := suffixValue(decimalSuffixes, suffix)
		if !ok { // e or E and a signed integer
			exp := strings.TrimLeft(strings.TrimLeft(suffix[1:], "+-"), "0")
			n, err := strconv.ParseInt(exp, 10, 64)
			if exp == "" {
				n, err = 0, nil
			}
			if strings.HasPrefix(suffix[1:], "-") {
				n = -n
			}
			if err != nil || len(exp) > 11 || n < quantityExponentMin || n > quantityExponentMax {
				return decimal{}, fmt.Errorf("%s: the exponent does not fit in 32 bits", pyStrRepr(text))
			}
			power = int(n)
		}
		value.exp += int64(power)
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
			case value.neg:
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
