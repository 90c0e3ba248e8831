//! Agreement statistics, as plain functions over plain data (no I/O, no rubric types): the
//! confusion counts of a binary judge against labels and what they give (accuracy, TPR/TNR,
//! precision, recall, F1 per class, macro and balanced forms), multi-class accuracy and macro
//! F1, Cohen's κ (unweighted, linear, quadratic), Krippendorff's α (nominal, ordinal,
//! interval, ratio; any number of coders, missing values), errors of numeric values, the
//! Rogan–Gladen correction and prediction-powered inference for a rate, and a seeded
//! percentile bootstrap.
//!
//! A metric whose denominator is empty is `None`, never 0 or NaN: "no positive label" is not
//! "recall 0". Reference values the tests reproduce: `tests/agree.rs` and the unit tests below
//! (scikit-learn's κ cases, the `krippendorff` package's α cases, Krippendorff's own worked
//! examples, the HealthBench meta-evaluation's pairwise counts).

use std::collections::BTreeMap;

/// `a / b`, `None` when `b` is 0.
pub fn ratio(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| a / b)
}

/// The harmonic mean of precision and recall; 0 when both are 0.
pub fn f1(precision: Option<f64>, recall: Option<f64>) -> Option<f64> {
    let (p, r) = (precision?, recall?);
    Some(if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) })
}

/// A binary prediction (the judge) against a binary truth (a label), counted over pairs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Confusion {
    pub tp: f64,
    pub fp: f64,
    pub fn_: f64,
    pub tn: f64,
}

/// What a [`Confusion`] gives. `precision_neg` is the precision of the "unmet" class
/// (`tn / (tn + fn)`), `tnr` its recall.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BinaryMetrics {
    pub n: f64,
    pub accuracy: Option<f64>,
    pub tpr: Option<f64>,
    pub tnr: Option<f64>,
    pub precision_pos: Option<f64>,
    pub precision_neg: Option<f64>,
    pub f1_pos: Option<f64>,
    pub f1_neg: Option<f64>,
    /// The mean of the two classes' F1 (HealthBench's "balanced F1").
    pub macro_f1: Option<f64>,
    /// The mean of TPR and TNR.
    pub balanced_accuracy: Option<f64>,
    pub kappa: Option<f64>,
}

impl Confusion {
    pub fn add(&mut self, predicted: bool, truth: bool) {
        match (predicted, truth) {
            (true, true) => self.tp += 1.0,
            (true, false) => self.fp += 1.0,
            (false, true) => self.fn_ += 1.0,
            (false, false) => self.tn += 1.0,
        }
    }

    pub fn n(&self) -> f64 {
        self.tp + self.fp + self.fn_ + self.tn
    }

    pub fn metrics(&self) -> BinaryMetrics {
        let Confusion { tp, fp, fn_, tn } = *self;
        let n = self.n();
        let tpr = ratio(tp, tp + fn_);
        let tnr = ratio(tn, tn + fp);
        let precision_pos = ratio(tp, tp + fp);
        let precision_neg = ratio(tn, tn + fn_);
        let f1_pos = f1(precision_pos, tpr);
        let f1_neg = f1(precision_neg, tnr);
        let mean2 = |a: Option<f64>, b: Option<f64>| Some((a? + b?) / 2.0);
        let kappa = {
            let table = [[tp, fp], [fn_, tn]];
            cohen_kappa_table(&table, Weights::None)
        };
        BinaryMetrics {
            n,
            accuracy: ratio(tp + tn, n),
            tpr,
            tnr,
            precision_pos,
            precision_neg,
            f1_pos,
            f1_neg,
            macro_f1: mean2(f1_pos, f1_neg),
            balanced_accuracy: mean2(tpr, tnr),
            kappa,
        }
    }
}

/// The disagreement weights of Cohen's κ over ordered categories.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Weights {
    None,
    Linear,
    Quadratic,
}

/// Cohen's κ of a square contingency table (`table[i][j]`: the first rater said category
/// `i`, the second `j`; categories in their order, which the weights use). `None` when the
/// table is empty or the chance disagreement is 0 (both raters always gave one category).
pub fn cohen_kappa_table<const K: usize>(table: &[[f64; K]; K], weights: Weights) -> Option<f64> {
    let rows: Vec<Vec<f64>> = table.iter().map(|r| r.to_vec()).collect();
    cohen_kappa(&rows, weights)
}

/// [`cohen_kappa_table`] for a table of any size.
pub fn cohen_kappa(table: &[Vec<f64>], weights: Weights) -> Option<f64> {
    let k = table.len();
    let n: f64 = table.iter().flatten().sum();
    if n == 0.0 || k == 0 {
        return None;
    }
    let row: Vec<f64> = table.iter().map(|r| r.iter().sum()).collect();
    let col: Vec<f64> = (0..k).map(|j| table.iter().map(|r| r[j]).sum()).collect();
    let w = |i: usize, j: usize| -> f64 {
        let d = i.abs_diff(j) as f64;
        match weights {
            Weights::None => f64::from(u8::from(i != j)),
            Weights::Linear => d,
            Weights::Quadratic => d * d,
        }
    };
    let (mut observed, mut expected) = (0.0, 0.0);
    for i in 0..k {
        for j in 0..k {
            observed += w(i, j) * table[i][j];
            expected += w(i, j) * row[i] * col[j] / n;
        }
    }
    (expected != 0.0).then(|| 1.0 - observed / expected)
}

/// Accuracy and macro F1 of predicted against true categories (pairs), over every category
/// either side uses; F1 of a category is `None` (left out of the mean) only when neither side
/// ever uses it.
pub fn multiclass(pairs: &[(usize, usize)], categories: usize) -> (Option<f64>, Option<f64>) {
    let n = pairs.len() as f64;
    let agree = pairs.iter().filter(|(a, b)| a == b).count() as f64;
    let mut f1s = Vec::new();
    for c in 0..categories {
        let tp = pairs.iter().filter(|(a, b)| *a == c && *b == c).count() as f64;
        let predicted = pairs.iter().filter(|(a, _)| *a == c).count() as f64;
        let actual = pairs.iter().filter(|(_, b)| *b == c).count() as f64;
        if predicted == 0.0 && actual == 0.0 {
            continue;
        }
        // A category one side never uses has precision or recall 0, so F1 0.
        f1s.push(f1(Some(ratio(tp, predicted).unwrap_or(0.0)), Some(ratio(tp, actual).unwrap_or(0.0))).unwrap_or(0.0));
    }
    let macro_f1 = (!f1s.is_empty()).then(|| f1s.iter().sum::<f64>() / f1s.len() as f64);
    (ratio(agree, n), macro_f1)
}

/// The contingency table of category pairs.
pub fn table(pairs: &[(usize, usize)], categories: usize) -> Vec<Vec<f64>> {
    let mut t = vec![vec![0.0; categories]; categories];
    for &(a, b) in pairs {
        t[a][b] += 1.0;
    }
    t
}

/// The level of measurement of Krippendorff's α: which difference function it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Nominal,
    Ordinal,
    Interval,
    Ratio,
}

/// Krippendorff's α over `units`: each unit the values its coders gave (any number, missing
/// ones simply absent). Units with fewer than two values are not pairable and are left out.
/// `None` when fewer than two values are pairable or the expected disagreement is 0 (every
/// pairable value is the same). Values are compared exactly (`f64` bit patterns): nominal
/// categories are their codes.
pub fn krippendorff_alpha(units: &[Vec<f64>], level: Level) -> Option<f64> {
    // The values, in order, and the coincidence matrix over them.
    let mut values: Vec<f64> = units.iter().filter(|u| u.len() >= 2).flatten().copied().collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    let index: BTreeMap<u64, usize> = values.iter().enumerate().map(|(i, v)| (v.to_bits(), i)).collect();
    let k = values.len();
    let mut o = vec![vec![0.0; k]; k];
    for u in units.iter().filter(|u| u.len() >= 2) {
        let m = u.len() as f64;
        for (a, x) in u.iter().enumerate() {
            for (b, y) in u.iter().enumerate() {
                if a != b {
                    o[index[&x.to_bits()]][index[&y.to_bits()]] += 1.0 / (m - 1.0);
                }
            }
        }
    }
    let n_c: Vec<f64> = o.iter().map(|r| r.iter().sum()).collect();
    let n: f64 = n_c.iter().sum();
    if n < 2.0 {
        return None;
    }
    let delta = |c: usize, k: usize| -> f64 {
        let (vc, vk) = (values[c], values[k]);
        match level {
            Level::Nominal => f64::from(u8::from(c != k)),
            Level::Interval => (vc - vk).powi(2),
            Level::Ratio => {
                if vc + vk == 0.0 {
                    0.0
                } else {
                    ((vc - vk) / (vc + vk)).powi(2)
                }
            }
            Level::Ordinal => {
                let (lo, hi) = (c.min(k), c.max(k));
                let between: f64 = n_c[lo..=hi].iter().sum();
                (between - (n_c[c] + n_c[k]) / 2.0).powi(2)
            }
        }
    };
    let (mut d_o, mut d_e) = (0.0, 0.0);
    for c in 0..k {
        for kk in 0..k {
            let d = delta(c, kk);
            d_o += o[c][kk] * d;
            d_e += n_c[c] * n_c[kk] * d;
        }
    }
    let d_o = d_o / n;
    let d_e = d_e / (n * (n - 1.0));
    (d_e != 0.0).then(|| 1.0 - d_o / d_e)
}

/// Mean absolute error, root mean squared error and Pearson's r of predicted against true
/// numbers.
pub fn numeric_errors(pairs: &[(f64, f64)]) -> (Option<f64>, Option<f64>, Option<f64>) {
    let n = pairs.len() as f64;
    if pairs.is_empty() {
        return (None, None, None);
    }
    let mae = pairs.iter().map(|(a, b)| (a - b).abs()).sum::<f64>() / n;
    let rmse = (pairs.iter().map(|(a, b)| (a - b).powi(2)).sum::<f64>() / n).sqrt();
    let (ma, mb) = (pairs.iter().map(|p| p.0).sum::<f64>() / n, pairs.iter().map(|p| p.1).sum::<f64>() / n);
    let cov: f64 = pairs.iter().map(|(a, b)| (a - ma) * (b - mb)).sum();
    let va: f64 = pairs.iter().map(|(a, _)| (a - ma).powi(2)).sum();
    let vb: f64 = pairs.iter().map(|(_, b)| (b - mb).powi(2)).sum();
    let r = (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt());
    (Some(mae), Some(rmse), r)
}

/// The Rogan–Gladen estimate of a true rate from an observed rate and the judge's
/// sensitivity (TPR) and specificity (TNR), clipped to [0, 1]; `None` when the judge is no
/// better than chance (`sensitivity + specificity <= 1`).
pub fn rogan_gladen(observed: f64, sensitivity: f64, specificity: f64) -> Option<f64> {
    let youden = sensitivity + specificity - 1.0;
    (youden > 0.0).then(|| ((observed + specificity - 1.0) / youden).clamp(0.0, 1.0))
}

/// A prediction-powered estimate of a mean (Angelopoulos et al., 2023): the judge's mean over
/// every item (`all`), corrected by the judge's mean error on the labelled items
/// (`labelled`: judge value, label value), with its normal-approximation standard error.
pub fn ppi_mean(all: &[f64], labelled: &[(f64, f64)]) -> Option<(f64, f64)> {
    if all.is_empty() || labelled.len() < 2 {
        return None;
    }
    let (big_n, n) = (all.len() as f64, labelled.len() as f64);
    let mean_all = all.iter().sum::<f64>() / big_n;
    let rect: Vec<f64> = labelled.iter().map(|(f, y)| f - y).collect();
    let mean_rect = rect.iter().sum::<f64>() / n;
    let var = |xs: &[f64], m: f64| xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() as f64 - 1.0).max(1.0);
    let se = (var(all, mean_all) / big_n + var(&rect, mean_rect) / n).sqrt();
    Some((mean_all - mean_rect, se))
}

/// A seeded pseudo-random stream (splitmix64): the same seed gives the same bootstrap on
/// every machine.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform index below `n` (`n > 0`), by rejection so that no index is favoured.
    pub fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return (x % n) as usize;
            }
        }
    }
}

/// Percentile bootstrap intervals: `stats` (several statistics at once) over `resamples`
/// resamples of `clusters` (drawn with replacement, seeded), and for each statistic the
/// `(1 - confidence) / 2` and `(1 + confidence) / 2` quantiles of the values it gives (nearest
/// rank on the sorted values). Resamples on which a statistic is undefined are left out of
/// its interval; `None` when fewer than half define it.
pub fn bootstrap<T>(
    clusters: &[T],
    resamples: usize,
    seed: u64,
    confidence: f64,
    stats: impl Fn(&[&T]) -> Vec<Option<f64>>,
) -> Vec<Option<(f64, f64)>> {
    let tail = (1.0 - confidence) / 2.0;
    bootstrap_draws(clusters, resamples, &mut Rng::new(seed), stats)
        .into_iter()
        .map(|mut vs| {
            if vs.len() * 2 < resamples {
                return None;
            }
            vs.sort_by(f64::total_cmp);
            let rank = |q: f64| vs[((q * vs.len() as f64).ceil() as usize).clamp(1, vs.len()) - 1];
            Some((rank(tail), rank(1.0 - tail)))
        })
        .collect()
}

/// The values of `stats` on `resamples` resamples of `clusters` (drawn with replacement from
/// `rng`): for each statistic, the values of the resamples that define it, in draw order.
pub fn bootstrap_draws<T>(
    clusters: &[T],
    resamples: usize,
    rng: &mut Rng,
    stats: impl Fn(&[&T]) -> Vec<Option<f64>>,
) -> Vec<Vec<f64>> {
    if clusters.is_empty() || resamples == 0 {
        return vec![];
    }
    let mut values: Vec<Vec<f64>> = Vec::new();
    let mut sample: Vec<&T> = Vec::with_capacity(clusters.len());
    for _ in 0..resamples {
        sample.clear();
        for _ in 0..clusters.len() {
            sample.push(&clusters[rng.below(clusters.len())]);
        }
        let got = stats(&sample);
        if values.len() < got.len() {
            values.resize(got.len(), Vec::new());
        }
        for (i, v) in got.into_iter().enumerate() {
            values[i].extend(v);
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64, places: i32) {
        let a = a.expect("a value");
        let tol = 0.5 * 10f64.powi(-places);
        assert!((a - b).abs() <= tol, "{a} is not {b} to {places} places");
    }

    /// Category pairs from runs of (first, second, count).
    fn runs(spec: &[(usize, usize, usize)]) -> Vec<(usize, usize)> {
        spec.iter().flat_map(|&(a, b, n)| std::iter::repeat_n((a, b), n)).collect()
    }

    #[test]
    fn kappa_reproduces_scikit_learns_cases() {
        // scikit-learn's test_cohen_kappa: Artstein and Poesio (2008), Table 1.
        let t = table(&runs(&[(0, 0, 20), (0, 1, 20), (1, 0, 10), (1, 1, 50)]), 2);
        close(cohen_kappa(&t, Weights::None), 0.348, 3);
        // Table 4 (three categories): y1 = 46×0, 44×1, 10×2; y2 = 52×0, 32×1, 16×2, aligned.
        let t = table(&runs(&[(0, 0, 46), (1, 0, 6), (1, 1, 32), (1, 2, 6), (2, 2, 10)]), 3);
        close(cohen_kappa(&t, Weights::None), 0.8013, 4);
        // The weighting case: y2 = 50×0, 40×1, 10×2.
        let t = table(&runs(&[(0, 0, 46), (1, 0, 4), (1, 1, 40), (2, 2, 10)]), 3);
        close(cohen_kappa(&t, Weights::None), 0.9315, 4);
        close(cohen_kappa(&t, Weights::Linear), 0.9412, 4);
        close(cohen_kappa(&t, Weights::Quadratic), 0.9541, 4);
    }

    #[test]
    fn alpha_reproduces_the_krippendorff_packages_cases() {
        const NA: f64 = f64::NAN;
        let units = |coders: &[&[f64]]| -> Vec<Vec<f64>> {
            (0..coders[0].len()).map(|u| coders.iter().map(|c| c[u]).filter(|v| !v.is_nan()).collect()).collect()
        };
        // Krippendorff's three coders over 15 units (the package's and Wikipedia's example).
        let a = units(&[
            &[NA, NA, NA, NA, NA, 3., 4., 1., 2., 1., 1., 3., 3., NA, 3.],
            &[1., NA, 2., 1., 3., 3., 4., 3., NA, NA, NA, NA, NA, NA, NA],
            &[NA, NA, 2., 1., 3., 4., 4., NA, 2., 1., 1., 3., 3., NA, 4.],
        ]);
        close(krippendorff_alpha(&a, Level::Nominal), 0.691358, 6);
        close(krippendorff_alpha(&a, Level::Interval), 0.810845, 6);
        // Krippendorff (2011), four observers over 12 units: ordinal 0.815, ratio 0.797 (the
        // package's tests) and, in the paper, nominal 0.743 and interval 0.849.
        let b = units(&[
            &[1., 2., 3., 3., 2., 1., 4., 1., 2., NA, NA, NA],
            &[1., 2., 3., 3., 2., 2., 4., 1., 2., 5., NA, 3.],
            &[NA, 3., 3., 3., 2., 3., 4., 2., 2., 5., 1., NA],
            &[1., 2., 3., 3., 2., 4., 4., 1., 2., 5., 1., NA],
        ]);
        close(krippendorff_alpha(&b, Level::Ordinal), 0.815, 3);
        close(krippendorff_alpha(&b, Level::Ratio), 0.797, 3);
        close(krippendorff_alpha(&b, Level::Nominal), 0.743, 3);
        close(krippendorff_alpha(&b, Level::Interval), 0.849, 3);
        // The package's string-label case, as codes: pos 0, neg 1, neu 2.
        let c = units(&[&[0., 1., 2., NA], &[0., 1., 2., 0.], &[0., 1., 0., 0.]]);
        close(krippendorff_alpha(&c, Level::Nominal), 0.722222, 6);
        // By hand: 2 coders, units (1, 1), (1, 2), (2, 2): o11 = 2, o12 = o21 = 1, o22 = 2,
        // n1 = n2 = 3, n = 6; D_o = 2/6, D_e = (3·3 + 3·3) / (6·5) = 0.6; α = 1 - (1/3)/0.6 = 4/9.
        let h = units(&[&[1., 1., 2.], &[1., 2., 2.]]);
        close(krippendorff_alpha(&h, Level::Nominal), 4.0 / 9.0, 12);
        // Perfect agreement; nothing pairable; one value only.
        let d = units(&[&[1., 2., 3., 4.], &[1., 2., 3., 4.], &[1., 2., 3., 4.]]);
        assert_eq!(krippendorff_alpha(&d, Level::Nominal), Some(1.0));
        assert_eq!(krippendorff_alpha(&d, Level::Interval), Some(1.0));
        assert_eq!(krippendorff_alpha(&units(&[&[1., NA], &[NA, 2.]]), Level::Nominal), None);
        assert_eq!(krippendorff_alpha(&units(&[&[1., 1.], &[1., 1.]]), Level::Nominal), None);
    }

    #[test]
    fn binary_metrics_reproduce_the_healthbench_meta_evaluation_counts() {
        // simple-evals' healthbench_meta_eval_test: the model's True, False, True against
        // the other raters' [True, True, False], [True, False], [False], as pairs.
        let mut c = Confusion::default();
        for (model, others) in [(true, vec![true, true, false]), (false, vec![true, false]), (true, vec![false])] {
            for o in others {
                c.add(model, o);
            }
        }
        let m = c.metrics();
        assert_eq!(m.precision_pos, Some(2.0 / 4.0));
        assert_eq!(m.precision_neg, Some(1.0 / 2.0));
        assert_eq!(m.tpr, Some(2.0 / 3.0));
        assert_eq!(m.tnr, Some(1.0 / 3.0));
        assert_eq!((c.tp + c.fp, c.tn + c.fn_, c.tp + c.fn_, c.tn + c.fp), (4.0, 2.0, 3.0, 3.0));
        let (p, r) = (2.0 / 4.0, 2.0 / 3.0);
        assert_eq!(m.f1_pos, Some(2.0 * p * r / (p + r)));
        let (p, r) = (1.0 / 2.0, 1.0 / 3.0);
        assert_eq!(m.f1_neg, Some(2.0 * p * r / (p + r)));
        assert_eq!(m.macro_f1, Some((m.f1_pos.unwrap() + m.f1_neg.unwrap()) / 2.0));
        // Cluster b (the third example only): no negative prediction, no positive label.
        let mut b = Confusion::default();
        b.add(true, false);
        let m = b.metrics();
        assert_eq!((m.precision_pos, m.tnr), (Some(0.0), Some(0.0)));
        assert_eq!((m.precision_neg, m.tpr, m.f1_pos, m.f1_neg, m.macro_f1), (None, None, None, None, None));
    }

    #[test]
    fn corrections_and_the_bootstrap() {
        // A judge with sensitivity 0.9 and specificity 0.8 that sees 0.5 met: the true rate
        // (0.5 + 0.8 - 1) / 0.7.
        close(rogan_gladen(0.5, 0.9, 0.8), 0.3 / 0.7, 12);
        assert_eq!(rogan_gladen(0.5, 0.5, 0.5), None);
        assert_eq!(rogan_gladen(0.01, 0.9, 0.8), Some(0.0));
        // PPI: the judge says 0.6 over all items and over-reports by 0.5 on the labelled two.
        let (est, se) = ppi_mean(&[1., 1., 1., 0., 0.], &[(1., 0.), (1., 1.)]).unwrap();
        close(Some(est), 0.6 - 0.5, 12);
        assert!(se > 0.0);
        // The same seed, the same interval; a different seed, generally another.
        let xs: Vec<f64> = (0..50).map(|i| f64::from(i % 7)).collect();
        let mean = |s: &[&f64]| vec![Some(s.iter().copied().sum::<f64>() / s.len() as f64), None];
        let a = bootstrap(&xs, 500, 7, 0.95, mean);
        assert_eq!(a, bootstrap(&xs, 500, 7, 0.95, mean));
        let (lo, hi) = a[0].unwrap();
        assert!(lo < 2.94 && 2.94 < hi, "{a:?} should hold the mean 2.94");
        assert_eq!(a[1], None, "a statistic never defined has no interval");
        assert_ne!(a, bootstrap(&xs, 500, 8, 0.95, mean));
    }
}
