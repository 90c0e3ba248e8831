//! The Bradley–Terry model fitted to fractional pairwise wins, for `stat NAME =
//! bradley_terry(MEASURE) per input FIRST, SECOND` (`agree::stats`).
//!
//! Each comparison of systems `i` and `j` adds a share `s` in [0, 1] of a win to `i` and
//! `1 - s` to `j` (a tie is half a win each). The model says `i` beats `j` with probability
//! `π_i / (π_i + π_j)`; the maximum-likelihood strengths maximise
//! `Σ_ij w_ij · ln(π_i / (π_i + π_j))`, `w_ij` being the wins of `i` over `j`. They are found
//! by Hunter's MM algorithm (D. R. Hunter, "MM algorithms for generalized Bradley–Terry
//! models", Annals of Statistics 32(1), 2004, eq. 3): `π_i ← W_i / Σ_j n_ij / (π_i + π_j)` for
//! every system at once, `W_i` its wins and `n_ij = w_ij + w_ji` its comparisons with `j`,
//! then the strengths are normalised to geometric mean 1 (the log-strengths sum to 0). The
//! iteration stops when no log-strength moves by more than [`TOLERANCE`], or after
//! [`MAX_ITERATIONS`] (then the fit says it did not converge).
//!
//! The maximum-likelihood strengths exist (and are unique) exactly when the graph with an
//! edge `i → j` whenever `w_ij > 0` is strongly connected (Hunter 2004, Assumption 1, after
//! Ford 1957): in every split of the systems into two groups, each group wins something
//! against the other. Otherwise a system that never loses would have an infinite strength;
//! [`fit`] then says why instead of returning a number.
//!
//! Pipeline position: after `runtime`, inside `agree`; plain functions on numbers, unit-tested
//! against the Python package `choix` 0.4.1 (`choix.mm_pairwise`, an independent
//! implementation of the same estimator).

/// The fit stops when no log-strength moves by more than this in one iteration.
pub const TOLERANCE: f64 = 1e-12;

/// The fit stops after this many iterations, converged or not.
pub const MAX_ITERATIONS: usize = 10_000;

/// The Elo-scale rating of a log-strength: `1000 + 400 · log10(π)`. A system of average
/// strength (π = 1) is rated 1000; 400 points are odds of 10 to 1.
pub fn rating(strength: f64) -> f64 {
    1000.0 + 400.0 * strength / std::f64::consts::LN_10
}

/// The wins among `k` systems.
#[derive(Debug, Clone, PartialEq)]
pub struct Wins {
    k: usize,
    /// `w[i * k + j]`: how much `i` won against `j`.
    w: Vec<f64>,
}

impl Wins {
    pub fn new(k: usize) -> Wins {
        Wins { k, w: vec![0.0; k * k] }
    }

    /// The systems.
    pub fn len(&self) -> usize {
        self.k
    }

    pub fn is_empty(&self) -> bool {
        self.k == 0
    }

    /// One comparison of `first` with `second` (two different systems below `len`), `share`
    /// of the win going to `first` and the rest to `second`.
    pub fn add(&mut self, first: usize, second: usize, share: f64) {
        self.w[first * self.k + second] += share;
        self.w[second * self.k + first] += 1.0 - share;
    }

    /// How much `i` won against `j`.
    pub fn of(&self, i: usize, j: usize) -> f64 {
        self.w[i * self.k + j]
    }

    /// `i`'s wins, over every opponent.
    pub fn won(&self, i: usize) -> f64 {
        (0..self.k).map(|j| self.of(i, j)).sum()
    }

    /// `i`'s losses, over every opponent.
    pub fn lost(&self, i: usize) -> f64 {
        (0..self.k).map(|j| self.of(j, i)).sum()
    }

    /// The systems `from` reaches along edges `i → j` where `beats(i, j)`.
    fn reach(&self, from: usize, beats: impl Fn(usize, usize) -> bool) -> Vec<bool> {
        let mut seen = vec![false; self.k];
        let mut stack = vec![from];
        seen[from] = true;
        while let Some(i) = stack.pop() {
            for (j, reached) in seen.iter_mut().enumerate() {
                if !*reached && beats(i, j) {
                    *reached = true;
                    stack.push(j);
                }
            }
        }
        seen
    }

    /// `Ok` when the maximum-likelihood strengths exist; otherwise why not.
    pub fn check(&self) -> Result<(), NoFit> {
        let k = self.k;
        if k < 2 {
            return Err(NoFit::TooFew);
        }
        if let Some(i) = (0..k).find(|&i| self.won(i) <= 0.0) {
            return Err(NoFit::NeverWins(i));
        }
        if let Some(i) = (0..k).find(|&i| self.lost(i) <= 0.0) {
            return Err(NoFit::NeverLoses(i));
        }
        let split = |seen: &[bool]| -> (Vec<usize>, Vec<usize>) { (0..k).partition(|&i| seen[i]) };
        let met = self.reach(0, |i, j| self.of(i, j) + self.of(j, i) > 0.0);
        if met.iter().any(|x| !x) {
            let (a, b) = split(&met);
            return Err(NoFit::NeverCompared(a, b));
        }
        // Those system 0 beats, directly or along a chain: none of them ever beats a system
        // outside the group.
        let beaten = self.reach(0, |i, j| self.of(i, j) > 0.0);
        if beaten.iter().any(|x| !x) {
            let (a, b) = split(&beaten);
            return Err(NoFit::NeverBeat(a, b));
        }
        // Those that beat system 0 along a chain: no system outside the group ever beats one
        // inside it.
        let beating = self.reach(0, |i, j| self.of(j, i) > 0.0);
        if beating.iter().any(|x| !x) {
            let (a, b) = split(&beating);
            return Err(NoFit::NeverBeat(b, a));
        }
        Ok(())
    }
}

/// Why the maximum-likelihood strengths do not exist.
#[derive(Debug, Clone, PartialEq)]
pub enum NoFit {
    /// Fewer than two systems.
    TooFew,
    NeverWins(usize),
    NeverLoses(usize),
    /// No system of the first group is ever compared with one of the second.
    NeverCompared(Vec<usize>, Vec<usize>),
    /// No system of the first group ever wins anything against one of the second.
    NeverBeat(Vec<usize>, Vec<usize>),
}

impl NoFit {
    /// The reason in words, with the systems' names.
    pub fn reason(&self, names: &[String]) -> String {
        let list = |ix: &[usize]| ix.iter().map(|&i| format!("`{}`", names[i])).collect::<Vec<_>>().join(", ");
        let why = match self {
            NoFit::TooFew => return "no row compares two systems".into(),
            NoFit::NeverWins(i) => format!("`{}` never wins", names[*i]),
            NoFit::NeverLoses(i) => format!("`{}` never loses", names[*i]),
            NoFit::NeverCompared(a, b) => format!("{} never meet {}", list(a), list(b)),
            NoFit::NeverBeat(a, b) => format!("{} never win against {}", list(a), list(b)),
        };
        format!("{why}, so the Bradley–Terry ratings do not exist")
    }
}

/// The maximum-likelihood strengths.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// `ln π` per system, summing to 0 (the strengths' geometric mean is 1).
    pub strengths: Vec<f64>,
    pub iterations: usize,
    /// Whether the last iteration moved every log-strength by less than [`TOLERANCE`].
    pub converged: bool,
}

/// Fit the strengths by MM, from `start` (log-strengths, one per system) or from equal
/// strengths; `Err` when they do not exist ([`Wins::check`]).
pub fn fit(w: &Wins, start: Option<&[f64]>) -> Result<Fit, NoFit> {
    w.check()?;
    let k = w.len();
    let won: Vec<f64> = (0..k).map(|i| w.won(i)).collect();
    let mut s: Vec<f64> = match start {
        Some(s) if s.len() == k && s.iter().all(|x| x.is_finite()) => s.to_vec(),
        _ => vec![0.0; k],
    };
    let mut next = vec![0.0; k];
    for iteration in 1..=MAX_ITERATIONS {
        // The update is the same for any common scale of π: scale by the largest, so that
        // no exponential overflows.
        let top = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let pi: Vec<f64> = s.iter().map(|x| (x - top).exp()).collect();
        for i in 0..k {
            let mut denominator = 0.0;
            for j in (0..k).filter(|&j| j != i) {
                let n = w.of(i, j) + w.of(j, i);
                if n > 0.0 {
                    denominator += n / (pi[i] + pi[j]);
                }
            }
            next[i] = won[i].ln() - denominator.ln();
        }
        let mean = next.iter().sum::<f64>() / k as f64;
        let mut moved: f64 = 0.0;
        for (x, n) in s.iter_mut().zip(&next) {
            let n = n - mean;
            moved = moved.max((n - *x).abs());
            *x = n;
        }
        if moved < TOLERANCE {
            return Ok(Fit { strengths: s, iterations: iteration, converged: true });
        }
    }
    Ok(Fit { strengths: s, iterations: MAX_ITERATIONS, converged: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wins of `k` systems from comparisons (first, second, first's share).
    fn wins(k: usize, comparisons: &[(usize, usize, f64)]) -> Wins {
        let mut w = Wins::new(k);
        for &(a, b, s) in comparisons {
            w.add(a, b, s);
        }
        w
    }

    fn assert_close(got: &[f64], want: &[f64], tol: f64) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= tol, "{got:?} is not {want:?}");
        }
    }

    /// choix 0.4.1: `choix.mm_pairwise(3, data, alpha=0, tol=1e-12)` on the (winner, loser)
    /// pairs `[(0,1),(0,1),(1,0),(0,2),(2,0),(2,0),(1,2),(2,1),(2,1),(0,2),(0,1)]` gives the
    /// log-strengths [0.3560188505404343, -0.606211968129347, 0.2501931175889127], Elo
    /// 1061.8468 / 894.6902 / 1043.4630.
    #[test]
    fn whole_wins_match_choix() {
        let data = [(0, 1), (0, 1), (1, 0), (0, 2), (2, 0), (2, 0), (1, 2), (2, 1), (2, 1), (0, 2), (0, 1)];
        let comparisons: Vec<(usize, usize, f64)> = data.iter().map(|&(w, l)| (w, l, 1.0)).collect();
        let f = fit(&wins(3, &comparisons), None).expect("a fit");
        assert!(f.converged, "{f:?}");
        assert_close(&f.strengths, &[0.3560188505404343, -0.606211968129347, 0.2501931175889127], 1e-6);
        let ratings: Vec<f64> = f.strengths.iter().map(|&s| rating(s)).collect();
        assert_close(&ratings, &[1061.8468088972998, 894.6901949510859, 1043.4629961516146], 1e-6);
        assert!(f.strengths.iter().sum::<f64>().abs() < 1e-12, "geometric mean 1");
    }

    /// Four systems, ties as half wins. choix reads whole wins only: each comparison was given
    /// to it twice (a win as two wins, a tie as one win each way), which doubles every `w_ij`
    /// and leaves the maximum-likelihood strengths as they are. choix 0.4.1,
    /// `choix.mm_pairwise(4, doubled, alpha=0, tol=1e-12)`: log-strengths
    /// [0.3082770524611257, 0.6252154023027156, -0.5968384159686227, -0.3366540387952186].
    #[test]
    fn ties_as_half_wins_match_choix() {
        let comparisons = [
            (0, 1, 1.0),
            (0, 1, 0.5),
            (1, 0, 1.0),
            (0, 2, 1.0),
            (2, 0, 0.5),
            (1, 2, 1.0),
            (2, 1, 0.0),
            (2, 3, 1.0),
            (3, 2, 1.0),
            (3, 2, 0.5),
            (0, 3, 0.0),
            (3, 1, 0.5),
            (1, 3, 1.0),
            (0, 3, 1.0),
            (2, 3, 0.5),
            (1, 2, 0.5),
        ];
        let f = fit(&wins(4, &comparisons), None).expect("a fit");
        assert!(f.converged, "{f:?}");
        let want = [0.3082770524611257, 0.6252154023027156, -0.5968384159686227, -0.3366540387952186];
        assert_close(&f.strengths, &want, 1e-6);
        let ratings: Vec<f64> = f.strengths.iter().map(|&s| rating(s)).collect();
        assert_close(&ratings, &[1053.5532091125, 1108.6110396884, 896.3185477428, 941.5172034563], 1e-6);
        // A warm start reaches the same fit.
        let warm = fit(&wins(4, &comparisons), Some(&[1.0, -1.0, 0.5, -0.5])).expect("a fit");
        assert_close(&warm.strengths, &want, 1e-9);
    }

    #[test]
    fn a_tie_alone_rates_both_1000() {
        let f = fit(&wins(2, &[(0, 1, 0.5)]), None).expect("a fit");
        assert_close(&f.strengths, &[0.0, 0.0], 1e-15);
        assert_eq!(rating(f.strengths[0]), 1000.0);
        // One win each way, likewise; three to one: π_0 / π_1 = 3, so ln π_0 = ln 3 / 2.
        let f = fit(&wins(2, &[(0, 1, 1.0), (0, 1, 1.0), (1, 0, 1.0), (0, 1, 0.0)]), None).expect("a fit");
        assert_close(&f.strengths, &[0.0, 0.0], 1e-12);
        let f = fit(&wins(2, &[(0, 1, 1.0), (0, 1, 1.0), (1, 0, 0.0), (0, 1, 0.0)]), None).expect("a fit");
        assert_close(&f.strengths, &[3f64.ln() / 2.0, -(3f64.ln()) / 2.0], 1e-12);
    }

    /// Where a system never loses (or never wins, or a group never beats another) the
    /// likelihood grows without bound as its strength does: no ratings, and the reason.
    #[test]
    fn no_fit_without_a_strongly_connected_comparison_graph() {
        let names: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let no = |k: usize, c: &[(usize, usize, f64)]| fit(&wins(k, c), None).expect_err("no fit");
        // c never wins.
        let e = no(3, &[(0, 1, 1.0), (1, 0, 1.0), (0, 2, 1.0), (2, 1, 0.0)]);
        assert_eq!(e, NoFit::NeverWins(2));
        assert_eq!(e.reason(&names), "`c` never wins, so the Bradley–Terry ratings do not exist");
        // a never loses (a tie is half a loss: none here).
        assert_eq!(no(3, &[(0, 1, 1.0), (1, 2, 0.5), (2, 0, 0.0)]), NoFit::NeverLoses(0));
        // {a, b} and {c, d} each play among themselves only.
        let e = no(4, &[(0, 1, 0.5), (2, 3, 0.5)]);
        assert_eq!(e, NoFit::NeverCompared(vec![0, 1], vec![2, 3]));
        assert_eq!(e.reason(&names), "`a`, `b` never meet `c`, `d`, so the Bradley–Terry ratings do not exist");
        // Everyone wins and loses, but c and d never win against a or b.
        let e = no(4, &[(0, 1, 0.5), (2, 3, 0.5), (0, 2, 1.0), (3, 1, 0.0)]);
        assert_eq!(e, NoFit::NeverBeat(vec![2, 3], vec![0, 1]));
        assert_eq!(e.reason(&names), "`c`, `d` never win against `a`, `b`, so the Bradley–Terry ratings do not exist");
        assert_eq!(no(1, &[]), NoFit::TooFew);
    }
}
