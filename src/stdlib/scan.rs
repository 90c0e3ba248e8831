//! One pass over each text for every constant pattern a program applies to it, and a per-row
//! memo of the intrinsic calls a program repeats.
//!
//! A [`ScanPlan`] is built once per program (`interp::prepared`) from its intrinsic calls: every constant
//! needle of `contains`, `contains_ci` and `count_occurrences` goes into a family
//! (case-sensitive needles in one, lowercased needles of `contains_ci` in another), searched
//! needle by needle with SIMD substring searchers when it holds at most 16 needles and by one
//! Aho-Corasick automaton beyond; the constant patterns of `matches` into one family, whose
//! patterns led by literals are asked one by one and the others as one `RegexSet`; and every
//! constant regex is compiled once. At run time, the first planned check on a text
//! counts the whole family in it once ([`TextScans`], per row, per distinct text) and every
//! check of that family reads its answer from that pass. A needle or pattern the plan does not hold (built at
//! run time, or a regex that does not compile) takes the intrinsic's own path, so the plan
//! decides only what is computed together, never an answer: each answer is the one the
//! intrinsic's definition gives for the needle asked.
//!
//! The memo: intrinsics that a program calls more than once on structurally equal arguments
//! (`word_count(response)` in twenty criteria, `lower(response)` in ten) are memoised per row,
//! keyed by the intrinsic and its argument values (texts by content up to 64 bytes, by
//! identity beyond; lists, records and JSON by identity), so each is computed once a row.
//!
//! Pipeline position: consulted by `stdlib::EvalCtx` for the text intrinsics and by
//! `interp::ops` around every intrinsic call, only under an unlimited budget (the interpreter
//! and the JIT on trusted rubrics): a row with limits (the Wasm sandbox) charges and computes
//! every call as written.

use super::Intrinsic;
use crate::value::Value;
use aho_corasick::{AhoCorasick, MatchKind};
use regex_automata::hybrid::dfa::{Cache as DfaCache, DFA};
use regex_automata::util::pool::Pool;
use regex_automata::{Anchored, Input};
use rustc_hash::{FxHashMap, FxHashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The most bytes a set of the program's regexes may compile to (each alone is bounded by
/// `REGEX_SIZE_LIMIT`); a larger set is left out and its patterns run one by one.
const SET_SIZE_LIMIT: usize = 16 << 20;

/// Texts up to this many bytes are memo keys by content; longer ones by identity.
const SHORT_TEXT: usize = 64;

/// A family of constant needles, counted together in each text.
struct Needles {
    /// The needle as the rubric wrote it, to its pattern number.
    index: FxHashMap<Box<str>, u32>,
    /// By pattern number: whether some check counts the pattern's occurrences. The others are
    /// only asked whether they occur, and a searcher stops at their first occurrence (their
    /// count is then 0 or 1).
    counted: Box<[bool]>,
    search: Search,
}

/// How a family finds its needles.
enum Search {
    /// Each needle by its own SIMD substring searcher, one after the other: for the handful
    /// of needles a rubric usually applies to a text, this beats one automaton pass, which
    /// stops at every occurrence of every needle (docs/performance.md, the eleventh step).
    Each(Box<[memchr::memmem::Finder<'static>]>),
    /// Every needle in one Aho-Corasick automaton, run once over the text.
    Automaton(AhoCorasick),
}

/// Families of at most this many distinct needles search each needle alone.
const EACH_MAX: usize = 16;

impl Needles {
    /// `None` when there are fewer than two needles (one scan per needle is then one scan).
    /// Each needle comes with whether a check counts it (`count_occurrences`) or only asks
    /// whether it occurs.
    fn new(needles: Vec<(Box<str>, String, bool)>) -> Option<Needles> {
        if needles.len() < 2 {
            return None;
        }
        let mut index = FxHashMap::default();
        let mut patterns: Vec<String> = Vec::new();
        let mut counted: Vec<bool> = Vec::new();
        for (asked, searched, counts) in needles {
            if searched.is_empty() {
                continue;
            }
            if let Some(&k) = index.get(&asked) {
                counted[k as usize] |= counts;
                continue;
            }
            let k = match patterns.iter().position(|p| *p == searched) {
                Some(k) => k,
                None => {
                    patterns.push(searched);
                    counted.push(false);
                    patterns.len() - 1
                }
            };
            counted[k] |= counts;
            index.insert(asked, k as u32);
        }
        let counted = counted.into_boxed_slice();
        let search = if patterns.len() <= EACH_MAX {
            Search::Each(patterns.iter().map(|p| memchr::memmem::Finder::new(p.as_bytes()).into_owned()).collect())
        } else {
            Search::Automaton(AhoCorasick::builder().match_kind(MatchKind::Standard).build(&patterns).ok()?)
        };
        Some(Needles { index, counted, search })
    }

    /// The pattern number of `needle` when some check counts it.
    fn counted_place(&self, needle: &str) -> Option<u32> {
        let k = *self.index.get(needle)?;
        self.counted.get(k as usize).copied().unwrap_or(false).then_some(k)
    }

    /// Pattern `k`'s count in `text`, from the family's pass over it (`counts`, kept in `pass`:
    /// run on the first call for the text).
    fn count_at(&self, pass: &mut Option<Box<[u32]>>, text: &str, k: u32) -> Option<u32> {
        pass.get_or_insert_with(|| self.counts(text)).get(k as usize).copied()
    }

    /// How many distinct needles the family searches.
    fn len(&self) -> usize {
        match &self.search {
            Search::Each(finders) => finders.len(),
            Search::Automaton(automaton) => automaton.patterns_len(),
        }
    }

    /// Every needle's count of non-overlapping occurrences in `text`, scanning left to right
    /// (what `str::matches(..).count()` gives for each alone): the overlapping matches of one
    /// needle come in order of their start, and a match counts when it starts at or after the
    /// end of the last one counted. A needle no check counts may stop at 1.
    fn counts(&self, text: &str) -> Box<[u32]> {
        let automaton = match &self.search {
            // `find_iter` reports non-overlapping occurrences, left to right.
            Search::Each(finders) => {
                return finders
                    .iter()
                    .zip(&self.counted)
                    .map(|(f, &counted)| match counted {
                        true => f.find_iter(text.as_bytes()).count() as u32,
                        false => u32::from(f.find(text.as_bytes()).is_some()),
                    })
                    .collect();
            }
            Search::Automaton(automaton) => automaton,
        };
        let n = automaton.patterns_len();
        let mut counts = vec![0u32; n];
        let mut next = vec![0usize; n];
        for m in automaton.find_overlapping_iter(text) {
            let p = m.pattern().as_usize();
            if m.start() >= next[p] {
                counts[p] += 1;
                next[p] = m.end();
            }
        }
        counts.into_boxed_slice()
    }
}

/// The constant regexes of `matches`, answered together on each text.
struct Patterns {
    /// The pattern to its place in the family's verdicts.
    index: FxHashMap<Box<str>, u32>,
    /// Patterns every match of which starts with one of a few literals (`leading_literals`), by
    /// place: each is asked alone (through `leads` when there are two or more), never in the
    /// set. In one set they would make its automaton stop at each of their matches, and a text
    /// outside ASCII makes a set of patterns with Unicode word boundaries fall back from its
    /// lazy DFA to a far slower engine (docs/performance.md, the twelfth step).
    alone: Vec<(u32, Arc<regex::Regex>)>,
    /// The literals that lead the patterns asked alone, each found once in the text, and the
    /// patterns' anchored DFAs: a pattern is decided from its first literal's first occurrence
    /// on, and is unmet without being asked when none of its literals occurs.
    leads: Option<Leads>,
    /// The other patterns, in one set, with their places.
    set: Option<(Vec<u32>, regex::RegexSet)>,
}

/// The leading literals of a family's patterns asked alone (`Patterns::leads`), and for each
/// pattern a lazy DFA that decides whether it matches right at one position.
struct Leads {
    /// Every distinct literal, ASCII-lowercased, searched in the text ASCII-lowercased (the
    /// same bytes at the same offsets but for ASCII letters): it finds every occurrence of the
    /// literals as extracted (and perhaps more, which only start a search earlier than it had
    /// to).
    finders: Vec<memchr::memmem::Finder<'static>>,
    /// By position in `alone`: the finders of the pattern's literals.
    of: Vec<Vec<u32>>,
    /// By position in `alone`: the pattern's forward DFA, searched anchored (`None` when it
    /// does not build: the pattern is then asked from its first literal on).
    dfas: Arc<Vec<Option<DFA>>>,
    /// Each thread's search caches of `dfas`.
    caches: Pool<Vec<Option<DfaCache>>, CachesFn>,
}

type CachesFn =
    Box<dyn Fn() -> Vec<Option<DfaCache>> + Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>;

/// A pattern's forward lazy DFA, without captures: what it takes to decide whether it matches
/// at a position. Unicode word boundaries are decided as ASCII ones, and a non-ASCII byte
/// stops the search (`try_search_fwd` errs, and the pattern is asked whole instead).
fn anchored_dfa(pattern: &str) -> Option<DFA> {
    DFA::builder()
        .syntax(regex_automata::util::syntax::Config::new())
        .thompson(
            regex_automata::nfa::thompson::Config::new()
                .which_captures(regex_automata::nfa::thompson::WhichCaptures::None)
                .nfa_size_limit(Some(super::REGEX_SIZE_LIMIT)),
        )
        .configure(DFA::config().unicode_word_boundary(true).cache_capacity(super::REGEX_SIZE_LIMIT))
        .build(pattern)
        .ok()
}

impl Leads {
    /// `alone`'s patterns (`patterns`, in order) with the literals that lead each; `None` for
    /// fewer than two (one pattern's own prefilter does what these would).
    fn new(patterns: &[(Arc<str>, Vec<Vec<u8>>)]) -> Option<Leads> {
        if patterns.len() < 2 {
            return None;
        }
        let mut distinct: Vec<Vec<u8>> = Vec::new();
        let mut of: Vec<Vec<u32>> = Vec::new();
        for (_, lits) in patterns {
            let mut mine = Vec::new();
            for lit in lits {
                let lit = lit.to_ascii_lowercase();
                let k = match distinct.iter().position(|d| *d == lit) {
                    Some(k) => k,
                    None => {
                        distinct.push(lit);
                        distinct.len() - 1
                    }
                } as u32;
                if !mine.contains(&k) {
                    mine.push(k);
                }
            }
            of.push(mine);
        }
        let finders = distinct.iter().map(|d| memchr::memmem::Finder::new(d).into_owned()).collect();
        let dfas: Arc<Vec<Option<DFA>>> = Arc::new(patterns.iter().map(|(p, _)| anchored_dfa(p)).collect());
        let for_caches = dfas.clone();
        let caches: CachesFn = Box::new(move || for_caches.iter().map(|d| d.as_ref().map(DfaCache::new)).collect());
        Some(Leads { finders, of, dfas, caches: Pool::new(caches) })
    }

    /// By position in `alone`: each pattern's verdict on `text`, asking `alone`'s regexes only
    /// where the literals and the DFAs do not decide.
    fn verdicts(&self, text: &str, alone: &[(u32, Arc<regex::Regex>)], hits: &mut [bool]) {
        let lowered = text.as_bytes().to_ascii_lowercase();
        // Each literal's first occurrence, found once for every pattern it leads.
        let mut firsts: Vec<Option<Option<usize>>> = vec![None; self.finders.len()];
        let mut caches = self.caches.get();
        for (a, (k, re)) in alone.iter().enumerate() {
            let first = self.of[a]
                .iter()
                .filter_map(|&f| *firsts[f as usize].get_or_insert_with(|| self.finders[f as usize].find(&lowered)))
                .min();
            // Every match starts at an occurrence of one of the pattern's literals: none
            // occurs before `at`, so searched from `at` (`is_match_at` sees the text before it,
            // for `\b` and the like) the pattern matches exactly when it matches anywhere.
            let Some(at) = first else { continue };
            let anchored = match (self.dfas.get(a).and_then(Option::as_ref), caches.get_mut(a).and_then(Option::as_mut))
            {
                (Some(dfa), Some(cache)) => {
                    let input = Input::new(text).range(at..).anchored(Anchored::Yes).earliest(true);
                    dfa.try_search_fwd(cache, &input).ok().flatten().is_some()
                }
                _ => false,
            };
            hits[*k as usize] = anchored || re.is_match_at(text, at);
        }
    }
}

impl Patterns {
    /// Every pattern's verdict on `text`, by place.
    fn verdicts(&self, text: &str) -> Box<[bool]> {
        let mut hits = vec![false; self.index.len()];
        match &self.leads {
            Some(leads) => leads.verdicts(text, &self.alone, &mut hits),
            None => {
                for (k, re) in &self.alone {
                    hits[*k as usize] = re.is_match(text);
                }
            }
        }
        if let Some((places, set)) = &self.set {
            for i in set.matches(text).iter() {
                hits[places[i] as usize] = true;
            }
        }
        hits.into_boxed_slice()
    }
}

/// The literals every match of `pattern` starts with one of, when they are a finite set of
/// literals of two bytes or more (as `regex-syntax` extracts them, under the same default flags
/// `regex` parses with): then a single regex's prefilter finds the candidates, and so does one
/// search for each of those literals (`Leads`).
fn leading_literals(pattern: &str) -> Option<Vec<Vec<u8>>> {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    let prefixes = Extractor::new().kind(ExtractKind::Prefix).extract(&hir);
    if prefixes.min_literal_len().is_none_or(|n| n < 2) {
        return None;
    }
    Some(prefixes.literals()?.iter().map(|l| l.as_bytes().to_vec()).collect())
}

/// What a program's constant patterns share: built once per program.
#[derive(Default)]
pub struct ScanPlan {
    /// Needles of `contains` and `count_occurrences`.
    exact: Option<Needles>,
    /// Needles of `contains_ci`, lowercased.
    folded: Option<Needles>,
    /// Patterns of `matches`.
    patterns: Option<Patterns>,
    /// Every constant regex of the program that compiles, compiled once.
    regexes: FxHashMap<Box<str>, Arc<regex::Regex>>,
    /// The intrinsics (by address) worth memoising: called twice or more on equal arguments.
    memo: FxHashSet<usize>,
}

/// The scans of one text in one row, each run on first use.
#[derive(Default)]
pub struct TextScans {
    /// Keeps the text alive while its address is a key.
    _text: Option<Arc<str>>,
    lower: Option<Arc<str>>,
    exact: Option<Box<[u32]>>,
    folded: Option<Box<[u32]>>,
    patterns: Option<Box<[bool]>>,
    /// How often each character occurs in the lowercased text.
    letters: Option<Box<Letters>>,
}

/// Character counts: ASCII in a table, the rest in a map.
struct Letters {
    ascii: [u32; 128],
    other: FxHashMap<char, u32>,
}

/// One intrinsic call of a program, as the plan reads it (`interp::prepared` lists them).
pub struct PlannedCall {
    pub name: String,
    pub overload: u32,
    /// Its second argument, when that is a constant text (a needle or a pattern).
    pub needle: Option<Arc<str>>,
    /// Its arguments' form (any text that is equal exactly when the argument expressions are),
    /// or empty for arguments too large to compare: calls of one intrinsic on one form are what
    /// the memo serves.
    pub form: String,
}

/// A check whose answer one of a plan's passes gives (what the intrinsic returns for a needle
/// or pattern the plan holds, read from the pass instead of calling it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answer {
    /// `contains(text, needle)`: whether the exact pass counted the needle.
    Contains,
    /// `count_occurrences(text, needle)`: the exact pass's count.
    Count,
    /// `contains_ci(text, needle)`: whether the case-folded pass counted it.
    ContainsCi,
    /// `matches(text, pattern)`: the regex set's verdict.
    Matches,
}

impl Answer {
    /// The check an intrinsic call is, by its name and overload.
    pub fn of(name: &str, overload: u32) -> Option<Answer> {
        match (name, overload) {
            ("contains", 0) => Some(Answer::Contains),
            ("count_occurrences", 0) => Some(Answer::Count),
            ("contains_ci", 0) => Some(Answer::ContainsCi),
            ("matches", 0) => Some(Answer::Matches),
            _ => None,
        }
    }

    /// Checks answered by the same pass over a text.
    pub fn pass(self) -> u8 {
        match self {
            Answer::Contains | Answer::Count => 0,
            Answer::ContainsCi => 1,
            Answer::Matches => 2,
        }
    }
}

/// How much of a program a plan shares (for `rubric bench`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// Distinct constant needles in the needle families (case-sensitive, then lowercased).
    pub exact: usize,
    pub folded: usize,
    /// Constant patterns of `matches` in the family.
    pub patterns: usize,
    /// Of those, the ones asked alone (led by literals); the rest are in one set.
    pub patterns_alone: usize,
    /// Intrinsics memoised.
    pub memoised: usize,
}

impl ScanPlan {
    pub fn new(calls: &[PlannedCall]) -> ScanPlan {
        let mut exact = Vec::new();
        let mut folded = Vec::new();
        let mut patterns: Vec<Arc<str>> = Vec::new();
        // Patterns of the other regex intrinsics: compiled once, not in the set.
        let mut others: Vec<Arc<str>> = Vec::new();
        let mut forms: FxHashMap<(&str, u32), FxHashMap<&str, usize>> = FxHashMap::default();
        for c in calls {
            // The checks a pass answers (`Answer::of`, the table the JIT's row slots read too),
            // then the other regex intrinsics.
            match (Answer::of(&c.name, c.overload), &c.needle) {
                (Some(answer @ (Answer::Contains | Answer::Count)), Some(n)) => {
                    exact.push((Box::from(&**n), n.to_string(), answer == Answer::Count))
                }
                (Some(Answer::ContainsCi), Some(n)) => folded.push((Box::from(&**n), n.to_lowercase(), false)),
                (Some(Answer::Matches), Some(n)) if !patterns.contains(n) => patterns.push(n.clone()),
                (None, Some(n))
                    if matches!((c.name.as_str(), c.overload), ("find_all" | "count_matches", 0))
                        && !others.contains(n) =>
                {
                    others.push(n.clone())
                }
                _ => {}
            }
            // `exec` runs programs: each call is a run of its own. A call without a form is
            // never memoised.
            if c.name != "exec" && !c.form.is_empty() {
                *forms.entry((c.name.as_str(), c.overload)).or_default().entry(c.form.as_str()).or_default() += 1;
            }
        }
        let mut regexes = FxHashMap::default();
        // The patterns of `matches` that compile, each with its regex.
        let mut compiled: Vec<(Arc<str>, Arc<regex::Regex>)> = Vec::new();
        for pat in &patterns {
            if let Ok(re) = super::compile_regex(pat) {
                let re = Arc::new(re);
                regexes.insert(Box::from(&**pat), re.clone());
                compiled.push((pat.clone(), re));
            }
        }
        for pat in &others {
            if let Ok(re) = super::compile_regex(pat) {
                regexes.entry(Box::from(&**pat)).or_insert_with(|| Arc::new(re));
            }
        }
        let patterns = (compiled.len() >= 2)
            .then(|| {
                let index = compiled.iter().enumerate().map(|(i, (p, _))| (Box::from(&**p), i as u32)).collect();
                let regex = |k: u32| (k, compiled[k as usize].1.clone());
                let mut literals: Vec<(Arc<str>, Vec<Vec<u8>>)> = Vec::new();
                let mut rest: Vec<u32> = Vec::new();
                let mut alone: Vec<(u32, Arc<regex::Regex>)> = Vec::new();
                for k in 0..compiled.len() as u32 {
                    match leading_literals(&compiled[k as usize].0) {
                        Some(lits) => {
                            alone.push(regex(k));
                            literals.push((compiled[k as usize].0.clone(), lits));
                        }
                        None => rest.push(k),
                    }
                }
                let set = if rest.len() >= 2 {
                    let set = regex::RegexSetBuilder::new(rest.iter().map(|&k| &*compiled[k as usize].0))
                        .size_limit(SET_SIZE_LIMIT)
                        .dfa_size_limit(SET_SIZE_LIMIT)
                        .build()
                        .ok()?;
                    Some((rest, set))
                } else {
                    alone.extend(rest.into_iter().map(regex));
                    None
                };
                // A pattern left out of the set (fewer than two others) is asked alone too, but has
                // no literals: then every pattern is asked whole, and no DFA is built for none.
                let leads = if literals.len() == alone.len() { Leads::new(&literals) } else { None };
                Some(Patterns { index, alone, leads, set })
            })
            .flatten();
        let memo = forms
            .into_iter()
            .filter(|(_, by_form)| by_form.values().any(|n| *n >= 2))
            .filter_map(|((name, overload), _)| {
                super::lookup(name).nth(overload as usize).map(|(_, i)| i as *const Intrinsic as usize)
            })
            .collect();
        ScanPlan { exact: Needles::new(exact), folded: Needles::new(folded), patterns, regexes, memo }
    }

    pub fn shares(&self) -> Shares {
        let needles = |n: &Option<Needles>| n.as_ref().map_or(0, Needles::len);
        Shares {
            exact: needles(&self.exact),
            folded: needles(&self.folded),
            patterns: self.patterns.as_ref().map_or(0, |p| p.index.len()),
            patterns_alone: self.patterns.as_ref().map_or(0, |p| p.alone.len()),
            memoised: self.memo.len(),
        }
    }

    /// The place of `needle` in the pass that answers `answer`, when the plan holds it.
    pub fn place(&self, answer: Answer, needle: &str) -> Option<u32> {
        match answer {
            Answer::Contains => self.exact.as_ref()?.index.get(needle).copied(),
            Answer::Count => self.exact.as_ref()?.counted_place(needle),
            Answer::ContainsCi => self.folded.as_ref()?.index.get(needle).copied(),
            Answer::Matches => self.patterns.as_ref()?.index.get(needle).copied(),
        }
    }

    /// The answer at `place` of a pass this row already ran over the text of `scans`, as the
    /// intrinsic returns it; `None` while that pass has not run.
    pub fn read(scans: &TextScans, answer: Answer, place: u32) -> Option<Value> {
        let k = place as usize;
        Some(match answer {
            Answer::Contains => Value::Bool(*scans.exact.as_ref()?.get(k)? > 0),
            Answer::Count => Value::Number(f64::from(*scans.exact.as_ref()?.get(k)?)),
            Answer::ContainsCi => Value::Bool(*scans.folded.as_ref()?.get(k)? > 0),
            Answer::Matches => Value::Bool(*scans.patterns.as_ref()?.get(k)?),
        })
    }

    /// A constant regex of the program, compiled.
    pub fn regex(&self, pattern: &str) -> Option<&Arc<regex::Regex>> {
        self.regexes.get(pattern)
    }

    pub fn memoises(&self, f: &'static Intrinsic) -> bool {
        self.memo.contains(&(f as *const Intrinsic as usize))
    }

    /// How often `needle` occurs in `text` (non-overlapping), when the plan counts it.
    pub fn count(&self, scans: &mut TextScans, text: &str, needle: &str) -> Option<u32> {
        let family = self.exact.as_ref()?;
        family.count_at(&mut scans.exact, text, family.counted_place(needle)?)
    }

    /// Whether `needle` occurs in `text`, when the plan holds it.
    pub fn contains(&self, scans: &mut TextScans, text: &str, needle: &str) -> Option<bool> {
        let family = self.exact.as_ref()?;
        Some(family.count_at(&mut scans.exact, text, *family.index.get(needle)?)? > 0)
    }

    /// Whether the lowercased `needle` occurs in `lowered`, when the plan holds it.
    pub fn contains_folded(&self, scans: &mut TextScans, lowered: &str, needle: &str) -> Option<bool> {
        let family = self.folded.as_ref()?;
        Some(family.count_at(&mut scans.folded, lowered, *family.index.get(needle)?)? > 0)
    }

    pub fn holds_folded(&self, needle: &str) -> bool {
        self.folded.as_ref().is_some_and(|f| f.index.contains_key(needle))
    }

    /// Whether `pattern` matches anywhere in `text`, when the plan holds it.
    pub fn matches(&self, scans: &mut TextScans, text: &str, pattern: &str) -> Option<bool> {
        let family = self.patterns.as_ref()?;
        let k = *family.index.get(pattern)?;
        let hits = scans.patterns.get_or_insert_with(|| family.verdicts(text));
        hits.get(k as usize).copied()
    }
}

impl TextScans {
    pub fn new(text: &Arc<str>) -> TextScans {
        TextScans { _text: Some(text.clone()), ..TextScans::default() }
    }

    /// The text lowercased (Unicode case mapping), once.
    pub fn lower(&mut self, text: &str) -> Arc<str> {
        self.lower.get_or_insert_with(|| Arc::from(text.to_lowercase())).clone()
    }

    /// How often the character `c` occurs in the lowercased text.
    pub fn lowercase_letter(&mut self, text: &str, c: char) -> u32 {
        let lower = self.lower(text);
        let letters = self.letters.get_or_insert_with(|| {
            let mut l = Box::new(Letters { ascii: [0; 128], other: FxHashMap::default() });
            if lower.is_ascii() {
                // Each byte a character.
                for &b in lower.as_bytes() {
                    l.ascii[usize::from(b & 0x7F)] += 1;
                }
                return l;
            }
            for ch in lower.chars() {
                match l.ascii.get_mut(ch as usize) {
                    Some(n) => *n += 1,
                    None => *l.other.entry(ch).or_insert(0) += 1,
                }
            }
            l
        });
        match letters.ascii.get(c as usize) {
            Some(n) => *n,
            None => letters.other.get(&c).copied().unwrap_or(0),
        }
    }
}

/// The results of the intrinsic calls a plan memoises, for one row: keyed by the intrinsic and
/// its argument values, compared as [`ScanPlan`] says (texts by content up to [`SHORT_TEXT`]
/// bytes, by identity beyond; lists, records and JSON by identity). Entries keep their
/// arguments alive, so an address in a key is not reused while it is one.
#[derive(Default)]
pub struct Memo {
    by_hash: FxHashMap<u64, smallvec::SmallVec<[Entry; 1]>>,
}

/// A memoised call: the intrinsic's address, its arguments, its result.
type Entry = (usize, Box<[Value]>, Value);

impl Memo {
    /// Forget every entry, keeping the table's room for the next row.
    pub fn clear(&mut self) {
        self.by_hash.clear();
    }

    /// The key hash of `f` on `args`; `None` for calls the memo does not key on (a number
    /// that is not equal to itself).
    pub fn key(f: &'static Intrinsic, args: &[Value]) -> Option<u64> {
        let mut h = rustc_hash::FxHasher::default();
        (f as *const Intrinsic as usize).hash(&mut h);
        for a in args {
            std::mem::discriminant(a).hash(&mut h);
            match a {
                Value::Null => {}
                Value::Bool(b) => b.hash(&mut h),
                Value::Number(n) if n.is_nan() => return None,
                Value::Number(n) => n.to_bits().hash(&mut h),
                Value::Text(t) if t.len() <= SHORT_TEXT => t.hash(&mut h),
                Value::Text(t) => (Arc::as_ptr(t) as *const u8 as usize, t.len()).hash(&mut h),
                Value::List(l) => (Arc::as_ptr(l) as usize).hash(&mut h),
                Value::Record(r) => (Arc::as_ptr(r) as usize).hash(&mut h),
                Value::Json(j) => (Arc::as_ptr(j) as usize).hash(&mut h),
                Value::Unscored(u) => u.hash(&mut h),
            }
        }
        Some(h.finish())
    }

    /// The result memoised for `f` on `args` (hashed to `hash`).
    pub fn get(&self, hash: u64, f: &'static Intrinsic, args: &[Value]) -> Option<Value> {
        let f = f as *const Intrinsic as usize;
        self.by_hash.get(&hash)?.iter().find_map(|(g, a, v)| {
            (*g == f && a.len() == args.len() && a.iter().zip(args).all(|(x, y)| arg_eq(x, y))).then(|| v.clone())
        })
    }

    pub fn insert(&mut self, hash: u64, f: &'static Intrinsic, args: &[Value], v: Value) {
        let f = f as *const Intrinsic as usize;
        self.by_hash.entry(hash).or_default().push((f, args.into(), v));
    }
}

fn arg_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => x.to_bits() == y.to_bits(),
        (Value::Text(x), Value::Text(y)) => {
            x.len() == y.len() && (std::ptr::eq(x.as_ptr(), y.as_ptr()) || (x.len() <= SHORT_TEXT && x == y))
        }
        (Value::List(x), Value::List(y)) => Arc::ptr_eq(x, y),
        (Value::Record(x), Value::Record(y)) => Arc::ptr_eq(x, y),
        (Value::Json(x), Value::Json(y)) => Arc::ptr_eq(x, y),
        (Value::Unscored(x), Value::Unscored(y)) => x == y,
        _ => false,
    }
}
