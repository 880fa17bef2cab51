package elasticidl

// What a user may write and what a typo gets, as the reference has it: an enum value by its
// short name (elastic_idl._task.enums), and a "did you mean" (elastic_idl._errors.close_match,
// Python's difflib.get_close_matches(word, known, n=1, cutoff=suggestionCutoff), ported here
// so that both languages suggest the same name; contract/spelling.json holds the vectors).

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// spellingKey is how a task file's spelling of an enum value is compared (the reference's
// spelling_key): upper case, without '_' and '-'; ok is false for text that is not ASCII.
func spellingKey(text string) (key string, ok bool) {
	for i := 0; i < len(text); i++ {
		if text[i] >= 0x80 {
			return "", false
		}
	}
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToUpper(text)), true
}

// enumSpellings is, per enum full name, the spelling key of each short name -> the value's
// name, in the table's order (built once from enumShortNames).
var enumSpellings = func() map[string][]strPair {
	out := map[string][]strPair{}
	for _, e := range enumShortNames {
		key, _ := spellingKey(e.short)
		out[e.enum] = append(out[e.enum], strPair{key, e.name})
	}
	return out
}()

// enumValueName is the name of the value of ed that text writes: its name, or its short name
// in any case ("spawn", "OnFailure", "core-complex"); ok is false for anything else.
func enumValueName(ed protoreflect.EnumDescriptor, text string) (name string, ok bool) {
	if ed.Values().ByName(protoreflect.Name(text)) != nil {
		return text, true
	}
	key, ascii := spellingKey(text)
	if !ascii || key == "" {
		return "", false
	}
	for _, p := range enumSpellings[string(ed.FullName())] {
		if p.key == key {
			return p.value, true
		}
	}
	return "", false
}

// enumSuggestion is the value's name text looks like a typo of (of its short name, else of
// its name), or "".
func enumSuggestion(ed protoreflect.EnumDescriptor, text string) string {
	pairs := enumSpellings[string(ed.FullName())]
	if key, ok := spellingKey(text); ok && key != "" {
		keys := make([]string, len(pairs))
		for i, p := range pairs {
			keys[i] = p.key
		}
		if match := closeMatch(key, keys); match != "" {
			return lookup(pairs, match)
		}
	}
	names := make([]string, ed.Values().Len())
	for i := range names {
		names[i] = string(ed.Values().Get(i).Name())
	}
	return closeMatch(text, names)
}

// enumExpected is what an enum field takes, and the value text looks like a typo of.
func enumExpected(ed protoreflect.EnumDescriptor, text string) string {
	var shorts []string
	differ := false
	for i := 0; i < ed.Values().Len(); i++ {
		name := string(ed.Values().Get(i).Name())
		for _, e := range enumShortNames {
			if e.enum == string(ed.FullName()) && e.name == name {
				shorts = append(shorts, e.short)
				differ = differ || e.short != strings.ToLower(name)
			}
		}
	}
	out := "expected one of " + enumNames(ed)
	if differ {
		out += ", or " + strings.Join(shorts, ", ") + " (any case)"
	} else {
		out += " (any case)"
	}
	if match := enumSuggestion(ed, text); match != "" {
		out += fmt.Sprintf("; did you mean %s?", pyStrRepr(match))
	}
	return out
}

// didYouMean is "; did you mean 'x'?" when word looks like a typo of one of known, else "".
func didYouMean(word string, known []string) string {
	if match := closeMatch(word, known); match != "" {
		return fmt.Sprintf("; did you mean %s?", pyStrRepr(match))
	}
	return ""
}

// closeMatch is the one of known that word looks like a typo of, or "": of those whose
// similarity ratio (twice the matching characters over both lengths) is at least
// suggestionCutoff, the most alike; of equals, the greatest string. As difflib, it checks
// two cheap upper bounds of the ratio first (from the lengths, then from the characters
// in common), so a long word or an unlike name costs little.
func closeMatch(word string, known []string) string {
	lb := utf8.RuneCountInString(word)
	var m *seqMatcher // built when a candidate passes the cheap bounds
	best, bestRatio := "", -1.0
	for _, x := range known {
		la := utf8.RuneCountInString(x)
		if ratioOf(min(la, lb), la+lb) < suggestionCutoff || ratioOf(common(x, word), la+lb) < suggestionCutoff {
			continue
		}
		if m == nil {
			m = newSeqMatcher([]rune(word))
		}
		r := ratioOf(m.matches([]rune(x)), la+lb)
		if r >= suggestionCutoff && (r > bestRatio || (r == bestRatio && x > best)) {
			best, bestRatio = x, r
		}
	}
	return best
}

// common is how many characters a and b have in common, counted with multiplicity
// (difflib's quick_ratio before its division).
func common(a, b string) int {
	var counts [128]int
	var other map[rune]int // characters beyond ASCII, when there are any
	for _, r := range b {
		if r < 128 {
			counts[r]++
		} else {
			if other == nil {
				other = map[rune]int{}
			}
			other[r]++
		}
	}
	n := 0
	for _, r := range a {
		switch {
		case r < 128 && counts[r] > 0:
			counts[r]--
			n++
		case r >= 128 && other[r] > 0:
			other[r]--
			n++
		}
	}
	return n
}

// ratioOf is difflib's _calculate_ratio.
func ratioOf(matches, length int) float64 {
	if length == 0 {
		return 1.0
	}
	return 2.0 * float64(matches) / float64(length)
}

// seqMatcher is difflib's SequenceMatcher with b fixed (the word), no junk function, autojunk on.
type seqMatcher struct {
	b       []rune
	popular map[rune]bool // autojunk's: left out of the index, so a match never starts on them
	// difflib's j2len for the row of a before (prev) and this one (cur): the length of the
	// match ending at b[j], each entry stamped with the row that wrote it (another row's
	// entry reads as none); rows are numbered across calls, so no call reads another's.
	prev, cur []j2len
	row       int
}

type j2len struct{ row, k int }

func newSeqMatcher(b []rune) *seqMatcher {
	m := &seqMatcher{b: b, prev: make([]j2len, len(b)), cur: make([]j2len, len(b))}
	if n := len(b); n >= 200 { // autojunk: an element in more than 1% of a long b is "popular"
		counts := map[rune]int{}
		for _, c := range b {
			counts[c]++
		}
		m.popular = map[rune]bool{}
		for c, count := range counts {
			if count > n/100+1 {
				m.popular[c] = true
			}
		}
	}
	return m
}

// longestMatch is difflib's find_longest_match in a[alo:ahi] and b[blo:bhi]: the longest
// block, the earliest in a, then in b. For each a[i], difflib visits the positions j of that
// element in b in ascending order (its b2j index, which has no popular element): so does
// this loop.
func (m *seqMatcher) longestMatch(a []rune, alo, ahi, blo, bhi int) (int, int, int) {
	besti, bestj, bestsize := alo, blo, 0
	m.row++ // a row nothing was written in: the first row reads no match before it
	for i := alo; i < ahi; i++ {
		m.row++
		if m.popular[a[i]] {
			m.prev, m.cur = m.cur, m.prev
			continue
		}
		for j := blo; j < bhi; j++ {
			if m.b[j] != a[i] {
				continue
			}
			k := 1
			if j > 0 && m.prev[j-1].row == m.row-1 {
				k = m.prev[j-1].k + 1
			}
			m.cur[j] = j2len{m.row, k}
			if k > bestsize {
				besti, bestj, bestsize = i-k+1, j-k+1, k
			}
		}
		m.prev, m.cur = m.cur, m.prev
	}
	// No junk function: difflib's extensions over non-junk elements still run, and take in the
	// popular elements left out of the index.
	for besti > alo && bestj > blo && a[besti-1] == m.b[bestj-1] {
		besti, bestj, bestsize = besti-1, bestj-1, bestsize+1
	}
	for besti+bestsize < ahi && bestj+bestsize < bhi && a[besti+bestsize] == m.b[bestj+bestsize] {
		bestsize++
	}
	return besti, bestj, bestsize
}

// matches is the number of characters of difflib's get_matching_blocks of a and b.
func (m *seqMatcher) matches(a []rune) int {
	total := 0
	queue := [][4]int{{0, len(a), 0, len(m.b)}}
	for len(queue) > 0 {
		q := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		alo, ahi, blo, bhi := q[0], q[1], q[2], q[3]
		i, j, k := m.longestMatch(a, alo, ahi, blo, bhi)
		if k == 0 {
			continue
		}
		total += k
		if alo < i && blo < j {
			queue = append(queue, [4]int{alo, i, blo, j})
		}
		if i+k < ahi && j+k < bhi {
			queue = append(queue, [4]int{i + k, ahi, j + k, bhi})
		}
	}
	return total
}
