//! Stage 3, judges: each setting at most once and within its range, the inputs a judge sees
//! (its evidence and its template's slots may only name those), and the settings a local
//! model judge cannot honour. Judges are declared before every other item of the root file,
//! so criteria anywhere may name them.

use super::scope::Global;
use super::{diagnostics, Checker};
use crate::ir::{self, template_slots, Type};
use crate::source::Span;
use crate::syntax::ast;
use diagnostics::{HiddenInput, InvalidSetting, REASONING_EFFORTS, REPLY_KINDS};

/// Where some settings of the judge being checked were given.
#[derive(Default)]
struct SettingSpans {
    evidence: Option<Span>,
    template: Option<Span>,
    local: Option<Span>,
    min_samples: Option<Span>,
    /// `calibration "FILE"`, and the judge the file was fitted for.
    calibration: Option<(Span, String)>,
    /// `jury ...` and `weights ...`.
    jury: Option<Span>,
    weights: Option<(Span, Vec<f64>)>,
    vote: Option<Span>,
    /// `cascade ...` and `escalate ...` (with its conditions).
    cascade: Option<Span>,
    escalate: Option<(Span, Vec<ast::EscalateWhen>)>,
    /// Settings a jury leaves to its members, with where they were given.
    not_jury: Vec<(Span, &'static str)>,
    /// Settings a local judge cannot honour, with where they were given.
    not_local: Vec<(Span, &'static str)>,
    /// `compares A, B`, `order both`, `inconsistent ...` and `returns ...`.
    compares: Option<Span>,
    order_both: Option<Span>,
    /// `inconsistent ...` with the rule it names.
    inconsistent: Option<(Span, ir::Inconsistent)>,
    returns: Option<Span>,
    /// `rollouts X`, `order ...` and `per_call N` (what a group judge refuses).
    rollouts: Option<Span>,
    order: Option<Span>,
    /// The `sees` entries whose inputs hold images: where, the input's name and its type.
    images: Vec<(Span, String, ir::Type)>,
}

/// A judge with every setting at its default.
fn default_judge(name: &str) -> ir::JudgeDecl {
    ir::JudgeDecl {
        name: name.to_string(),
        model: None,
        temperature: None,
        top_p: None,
        max_tokens: None,
        seed: None,
        samples: 1,
        min_samples: None,
        vote: ir::Vote::Majority,
        sees: vec![],
        returns: "verdict".into(),
        reply_fields: vec![],
        evidence_from: None,
        template: None,
        system: None,
        scoring: ir::Scoring::Label,
        per_call: 1,
        local: None,
        calibration: None,
        order: ir::Order::Fixed,
        jury: None,
        reasoning_effort: None,
        cascade: None,
        compares: None,
        rollouts: None,
    }
}

impl Checker<'_> {
    pub(super) fn judge(&mut self, j: &ast::Judge) {
        let mut d = default_judge(&j.name.text);
        let mut seen: Vec<(std::mem::Discriminant<ast::JudgeSettingKind>, Span)> = Vec::new();
        let mut spans = SettingSpans::default();
        for s in &j.settings {
            let disc = std::mem::discriminant(&s.kind);
            if let Some((_, prev)) = seen.iter().find(|(d, _)| *d == disc) {
                let prev = *prev;
                self.report(diagnostics::judge_duplicate_setting(s.span, prev));
                continue;
            }
            seen.push((disc, s.span));
            if let Some(what) = member_only(&s.kind) {
                spans.not_jury.push((s.span, what));
            }
            self.judge_setting(&mut d, s, &mut spans);
        }
        let list_of_images = ir::Type::List(Box::new(ir::Type::image()));
        for (span, input, ty) in &spans.images {
            match spans.local {
                Some(local) => self.report(diagnostics::judge_local_image(&j.name.text, input, ty, *span, local)),
                None if *ty.strip_optional() != ir::Type::image() && *ty.strip_optional() != list_of_images => {
                    self.report(diagnostics::judge_image_input(&j.name.text, input, ty, *span))
                }
                None => {}
            }
        }
        if let Some(local) = spans.local {
            for (span, what) in &spans.not_local {
                self.report(diagnostics::judge_local_setting(&j.name.text, what, *span, local));
            }
            // A local judge always scores by P(yes) / (P(yes) + P(no)).
            d.scoring = ir::Scoring::Logprob;
        }
        if let (Some(i), Some(span)) = (d.evidence_from, spans.evidence) {
            if !d.sees.contains(&i) {
                let input = self.p.inputs[i as usize].name.clone();
                self.report(diagnostics::judge_hidden_input(
                    &j.name.text,
                    span,
                    HiddenInput::Evidence { input: &input },
                ));
            }
        }
        if let (Some(t), Some(span)) = (&d.template, spans.template) {
            let shown = self.shown_slots.get(&j.name.text).cloned().unwrap_or_default();
            let mut extra: Vec<&str> = ir::validate::extra_slots(&d).to_vec();
            extra.extend(shown.iter().map(String::as_str));
            self.check_template(&j.name.text, t, &d.sees, &extra, span);
        }
        if let (Some(min), Some(span)) = (d.min_samples, spans.min_samples) {
            if min > d.samples {
                self.report(diagnostics::judge_invalid_setting(
                    span,
                    InvalidSetting::MinSamples { min, samples: d.samples },
                ));
            }
        }
        if let (Some(cal), Some((span, fitted_for))) = (&d.calibration, &spans.calibration) {
            let file = cal.file.clone();
            if *fitted_for != j.name.text {
                let why = format!("it was fitted for judge `{fitted_for}`, not `{}`", j.name.text);
                let help = "fit one for this judge: `rubric calibrate ... --for NAME`";
                self.report(diagnostics::judge_bad_calibration(*span, &file, &why, help));
            }
            if cal.maps.iter().any(|m| m.map.reads_p_yes()) && d.scoring != ir::Scoring::Logprob {
                let why = "an isotonic or Platt map reads P(yes), which this judge does not report";
                let help = "add `scoring logprob` to the judge, or fit a `confusion` calibration from its verdicts";
                self.report(diagnostics::judge_bad_calibration(*span, &file, why, help));
            }
            let idx = self.p.judges.len() as u32;
            self.calibrations.push((idx, *span));
        }
        self.compare_checks(j, &mut d, &spans);
        self.rollouts_checks(j, &mut d, &spans);
        for (span, members) in
            [(spans.jury, d.jury.as_ref().map(|x| &x.members)), (spans.cascade, d.cascade.as_ref().map(|x| &x.members))]
        {
            let (Some(span), Some(members)) = (span, members) else { continue };
            if let Some(m) = members.iter().find(|&&m| self.p.judges[m as usize].compares.is_some()) {
                let why = format!("member `{}` compares two candidates", self.p.judges[*m as usize].name);
                let help = "a jury or cascade is made of judges of one response; ask the comparing judge directly";
                self.report(diagnostics::judge_bad_compare(&j.name.text, span, &why, help));
            }
            if let Some(m) = members.iter().find(|&&m| self.p.judges[m as usize].rollouts.is_some()) {
                let why = format!("member `{}` judges a group of rollouts", self.p.judges[*m as usize].name);
                let help = "a jury or cascade is made of judges of one response; ask the group judge directly";
                self.report(diagnostics::judge_bad_rollouts(&j.name.text, span, &why, help));
            }
        }
        self.jury_checks(&j.name.text, &mut d, &spans);
        self.cascade_checks(&j.name.text, &mut d, &spans);
        if d.jury.is_none()
            && d.cascade.is_none()
            && d.sees.is_empty()
            && d.compares.is_none()
            && d.rollouts.is_none()
            && self.shown_slots.get(&j.name.text).is_none_or(|s| s.is_empty())
            && !j.settings.iter().any(|s| matches!(s.kind, ast::JudgeSettingKind::Sees(_)))
        {
            self.report(diagnostics::judge_sees_nothing(&j.name));
        }
        let idx = self.p.judges.len() as u32;
        self.p.judges.push(d);
        self.define(&j.name.text, Global::Judge(idx), j.name.span);
    }

    /// A generator (`generator NAME { ... fills INPUT }`): a judge's model, sampling, `sees`,
    /// `template` and `system` settings, checked as a judge's, and `fills`, a list input it does
    /// not also see; a template is required (it says what to write). Any other judge setting,
    /// a second generator of the name or of the input, is an error.
    pub(super) fn generator(&mut self, j: &ast::Judge) {
        use ast::JudgeSettingKind as K;
        let name = j.name.text.as_str();
        let mut d = default_judge(name);
        let mut seen: Vec<(std::mem::Discriminant<ast::JudgeSettingKind>, Span)> = Vec::new();
        let mut spans = SettingSpans::default();
        let mut fills: Option<&ast::Name> = None;
        let who = format!("generator `{name}`");
        let bad = |why: String, help: &str, at: Span| diagnostics::judge_bad_generator(&who, at, &why, help);
        for s in &j.settings {
            let disc = std::mem::discriminant(&s.kind);
            if let Some((_, prev)) = seen.iter().find(|(d, _)| *d == disc) {
                let prev = *prev;
                self.report(diagnostics::judge_duplicate_setting(s.span, prev));
                continue;
            }
            seen.push((disc, s.span));
            match &s.kind {
                K::Fills(n) => fills = Some(n),
                K::Model(_)
                | K::Temperature(_)
                | K::TopP(_)
                | K::MaxTokens(_)
                | K::Seed(_)
                | K::Sees(_)
                | K::Template(_)
                | K::System(_) => self.judge_setting(&mut d, s, &mut spans),
                _ => {
                    let help = "a generator takes `model`, `temperature`, `top_p`, `max_tokens`, `seed`, `sees`, \
                                `template`, `system` and `fills`";
                    self.report(bad("this is a judge's setting, not a generator's".into(), help, s.span));
                }
            }
        }
        if self.p.generators.iter().any(|g| g.name == name) {
            self.report(bad("another generator has this name".into(), "give each generator its own name", j.name.span));
            return;
        }
        let Some(f) = fills else {
            let help = "name the list input it writes for each row, `fills rubrics`";
            self.report(bad("a generator needs `fills INPUT`".into(), help, j.name.span));
            return;
        };
        let Some(input) = self.input_named(f) else { return };
        let ty = self.p.inputs[input as usize].ty.clone();
        if !matches!(ty.strip_optional(), Type::List(_)) {
            let why = format!("`fills {}` names an input of type {ty}: a generator writes a list of items", f.text);
            let help =
                "declare the input as a list of what each item is, e.g. `List[{criterion: Text, points: Number}]`";
            self.report(bad(why, help, f.span));
            return;
        }
        if d.sees.contains(&input) {
            let why = format!("`{}` is what it writes: it cannot also see it", f.text);
            self.report(bad(why, "remove it from `sees`", f.span));
            return;
        }
        if let Some(other) = self.p.generators.iter().find(|g| g.fills == input) {
            let why = format!("generator `{}` already fills `{}`", other.name, f.text);
            self.report(bad(why, "one generator writes each input", f.span));
            return;
        }
        let (Some(template), Some(span)) = (d.template.clone(), spans.template) else {
            let help = "say what to write, with the inputs it sees as slots: `template \"\"\"... {{prompt}} ...\"\"\"`";
            self.report(bad("a generator needs a `template`".into(), help, j.name.span));
            return;
        };
        self.check_template(name, &template, &d.sees, &[], span);
        self.p.generators.push(ir::GeneratorDecl {
            name: name.to_string(),
            model: d.model,
            temperature: d.temperature,
            top_p: d.top_p,
            max_tokens: d.max_tokens,
            seed: d.seed,
            sees: d.sees,
            fills: input,
            template,
            system: d.system,
        });
    }

    /// A comparing judge: two different inputs, neither also seen by name, answered by a
    /// preference (`returns preference(...)` or no `returns`), by an endpoint (not a local model,
    /// a jury or a cascade) and without an evidence rule; `order both` and `inconsistent` only
    /// for a comparing judge, `inconsistent` only with `order both`. Its template may render the
    /// candidates as `{{first}}` and `{{second}}`.
    fn compare_checks(&mut self, j: &ast::Judge, d: &mut ir::JudgeDecl, spans: &SettingSpans) {
        let name = j.name.text.as_str();
        let Some(at) = spans.compares else {
            if let Some(span) = spans.order_both {
                let help = "`order both` asks a comparing judge (`compares A, B`) in both positions; use `fixed` or \
                            `shuffled` here";
                self.report(diagnostics::judge_bad_compare(name, span, "`order both` needs `compares A, B`", help));
            }
            if let Some((span, _)) = spans.inconsistent {
                let help = "add `compares A, B` and `order both`, or remove `inconsistent`";
                self.report(diagnostics::judge_bad_compare(name, span, "`inconsistent` needs `compares A, B`", help));
            }
            if d.returns == "preference" {
                let at = spans.returns.unwrap_or(j.name.span);
                let help = "add `compares A, B` naming the two candidate inputs";
                self.report(diagnostics::judge_bad_compare(
                    name,
                    at,
                    "only a comparing judge returns a preference",
                    help,
                ));
            }
            return;
        };
        if let Some(c) = &mut d.compares {
            if c.first == c.second {
                let help = "name the two inputs that hold the candidates, `compares answer_a, answer_b`";
                self.report(diagnostics::judge_bad_compare(name, at, "a judge compares two different inputs", help));
            }
            for i in [c.first, c.second] {
                if d.sees.contains(&i) {
                    let input = &self.p.inputs[i as usize].name;
                    let why = format!("input `{input}` is both compared and seen by name");
                    let help = "a candidate is shown only as the first or second answer, so that its name cannot \
                                tell the judge which it is; remove it from `sees`";
                    self.report(diagnostics::judge_bad_compare(name, at, &why, help));
                }
            }
            if let Some((_, rule)) = spans.inconsistent {
                c.inconsistent = rule;
            }
        }
        if let (Some((span, _)), None) = (spans.inconsistent, spans.order_both) {
            let help = "a comparison is inconsistent only when it is asked in both orders: add `order both`";
            self.report(diagnostics::judge_bad_compare(name, span, "`inconsistent` needs `order both`", help));
        }
        match d.returns.as_str() {
            "verdict" if spans.returns.is_none() => d.returns = "preference".into(),
            "preference" => {}
            other => {
                let why = format!("a comparing judge returns a preference, not `{other}`");
                let help = "write `returns preference(rationale: Text)`, or leave `returns` out";
                self.report(diagnostics::judge_bad_compare(name, spans.returns.unwrap_or(at), &why, help));
            }
        }
        let other = [
            (spans.local, "a local judge"),
            (spans.jury, "a jury"),
            (spans.cascade, "a cascade"),
            (spans.evidence, "an evidence rule"),
        ];
        for (span, what) in other {
            if let Some(span) = span {
                let why = format!("a comparing judge cannot have {what}");
                let help = "compare with one judge at an endpoint; a comparison quotes no evidence";
                self.report(diagnostics::judge_bad_compare(name, span, &why, help));
            }
        }
    }

    /// A group judge: its rollouts input is not also seen by name, it returns per-rollout
    /// values (`returns value`, the default) or a ranking (`returns ranking`), it is asked at an
    /// endpoint (not a local model, a jury or a cascade), it compares no pair, quotes no evidence
    /// and shows the rollouts in their group order (`order fixed`). `returns ranking` needs it.
    fn rollouts_checks(&mut self, j: &ast::Judge, d: &mut ir::JudgeDecl, spans: &SettingSpans) {
        let name = j.name.text.as_str();
        let Some(at) = spans.rollouts else {
            if d.returns == "ranking" {
                let at = spans.returns.unwrap_or(j.name.span);
                let help = "add `rollouts X` naming the input every member of a group shows the judge";
                self.report(diagnostics::judge_bad_rollouts(name, at, "only a group judge returns a ranking", help));
            }
            return;
        };
        if let Some(i) = d.rollouts.filter(|i| d.sees.contains(i)) {
            let input = &self.p.inputs[i as usize].name;
            let why = format!("input `{input}` is both a rollout and seen by name");
            let help = "each member's rollout is shown in its own fence as rollout 1, 2, ...; remove it from `sees`, \
                        which names what the members share (the prompt)";
            self.report(diagnostics::judge_bad_rollouts(name, at, &why, help));
        }
        match d.returns.as_str() {
            "verdict" if spans.returns.is_none() => d.returns = "value".into(),
            "value" | "ranking" if d.reply_fields.is_empty() => {}
            "value" | "ranking" => {
                let help = "a group judge's reply is fixed: a rationale and one value (or place) per rollout; \
                            write `returns value` or `returns ranking` without fields";
                let why = "a group judge's reply declares no fields";
                self.report(diagnostics::judge_bad_rollouts(name, spans.returns.unwrap_or(at), why, help));
            }
            other => {
                let why = format!("a group judge returns a value per rollout or a ranking, not `{other}`");
                let help = "write `returns value` (a score in [0, 1] per rollout) or `returns ranking` (the rollouts \
                            best first)";
                self.report(diagnostics::judge_bad_rollouts(name, spans.returns.unwrap_or(at), &why, help));
            }
        }
        let other = [
            (spans.local, "a local judge"),
            (spans.jury, "a jury"),
            (spans.cascade, "a cascade"),
            (spans.compares, "`compares`"),
            (spans.evidence, "an evidence rule"),
            (spans.order.filter(|_| d.order != ir::Order::Fixed), "an order other than `fixed`"),
        ];
        for (span, what) in other {
            if let Some(span) = span {
                let why = format!("a group judge cannot have {what}");
                let help = "a group judge is one judge at an endpoint that sees every rollout of a group, in the \
                            group's order, and quotes no evidence";
                self.report(diagnostics::judge_bad_rollouts(name, span, &why, help));
            }
        }
    }

    /// A jury: two or more distinct members that are not juries and take one sample each, all
    /// returning the same kind of answer, the settings only members can honour left to them,
    /// and `weights` exactly for `vote weighted`. The jury takes its members' reply kind, sees
    /// what they see, takes one sample per member, and scores by log-probability when they all
    /// do.
    /// A cascade: two or more distinct members, declared before it, that are neither juries
    /// nor cascades and answer alike (the same reply kind, samples, vote, minimum samples and
    /// evidence rule, so that whichever member decides, its verdict is read as its own), and at
    /// least one `escalate` condition that its first members can meet. The cascade takes its
    /// members' way of answering and sees what any of them sees.
    fn cascade_checks(&mut self, name: &str, d: &mut ir::JudgeDecl, spans: &SettingSpans) {
        let bad = |c: &mut Self, at: Span, why: &str, help: &str| {
            c.report(diagnostics::judge_bad_cascade(name, at, why, help));
        };
        let Some(at) = spans.cascade else {
            if let Some((e, _)) = &spans.escalate {
                bad(self, *e, "`escalate` is for a cascade", "give the judge `cascade CHEAP, STRONG`");
            }
            return;
        };
        if spans.jury.is_some() {
            bad(self, at, "a judge is a jury or a cascade, not both", "make a cascade whose members are plain judges");
        }
        for (span, what) in &spans.not_jury {
            let why = format!("a cascade asks its members, so {what} belongs to them");
            bad(self, *span, &why, "give the setting to the member judges");
        }
        if let Some(v) = spans.vote {
            bad(self, v, "a cascade's verdicts are voted as its members vote", "give `vote` to the member judges");
        }
        let Some(cascade) = d.cascade.clone() else { return };
        if cascade.members.len() < 2 {
            bad(self, at, "a cascade needs at least two judges", "name the cheap judge first, then the stronger ones");
        }
        let members: Vec<ir::JudgeDecl> = cascade.members.iter().map(|m| self.p.judges[*m as usize].clone()).collect();
        for (i, m) in members.iter().enumerate() {
            if cascade.members[..i].contains(&cascade.members[i]) {
                bad(self, at, &format!("judge `{}` is in the cascade twice", m.name), "name each judge once");
            }
            if m.jury.is_some() || m.cascade.is_some() {
                let why = format!("judge `{}` is a jury or a cascade itself", m.name);
                bad(self, at, &why, "name plain judges");
            }
        }
        if let Some(first) = members.first() {
            let differ = members.iter().find(|m| {
                m.returns != first.returns
                    || m.samples != first.samples
                    || m.vote != first.vote
                    || m.min_samples != first.min_samples
                    || m.evidence_from != first.evidence_from
            });
            if let Some(m) = differ {
                let why = format!(
                    "judge `{}` answers differently from `{}` (reply kind, samples, vote or evidence rule)",
                    m.name, first.name
                );
                bad(self, at, &why, "members of a cascade answer alike; they differ in model and price");
            }
            d.samples = first.samples;
            d.vote = first.vote;
            d.min_samples = first.min_samples;
            d.evidence_from = first.evidence_from;
        }
        take_members_answer(d, &members);
        let Some((e_at, whens)) = &spans.escalate else {
            bad(
                self,
                at,
                "a cascade needs `escalate`",
                "say when to ask the next judge: `escalate between 0.2 and 0.8`, `split` or `unscored`",
            );
            return;
        };
        let gradual =
            members.first().is_some_and(|f| f.scoring == ir::Scoring::Logprob || f.samples > 1 || f.returns == "value");
        let mut escalate = Vec::new();
        for w in whens {
            match w {
                ast::EscalateWhen::Between(lo, hi, span) => {
                    if !(0.0..=1.0).contains(lo) || !(0.0..=1.0).contains(hi) || lo > hi {
                        bad(
                            self,
                            *span,
                            &format!("between {lo} and {hi} is not a band in [0, 1]"),
                            "write `between LO and HI` with 0 <= LO <= HI <= 1",
                        );
                    } else if !gradual {
                        let why = "`between` reads a graded answer, and the first judge answers only met or unmet";
                        bad(
                            self,
                            *span,
                            why,
                            "give the first judge `scoring logprob` or `samples N`, or escalate on `unscored`",
                        );
                    }
                    escalate.push(ir::Escalate::Between { lo: *lo, hi: *hi });
                }
                ast::EscalateWhen::Named(n) => match n.text.as_str() {
                    "split" => {
                        if members.first().is_some_and(|f| f.samples < 2) {
                            bad(
                                self,
                                n.span,
                                "`split` needs samples that can disagree",
                                "give the members `samples 3`",
                            );
                        }
                        escalate.push(ir::Escalate::Split);
                    }
                    "unscored" => escalate.push(ir::Escalate::Unscored),
                    other => {
                        let help = crate::diag::did_you_mean(other, ["split", "unscored", "between"])
                            .unwrap_or_else(|| "escalate on `between LO and HI`, `split` or `unscored`".into());
                        bad(self, n.span, &format!("unknown escalation `{other}`"), &help);
                    }
                },
            }
        }
        let _ = e_at;
        if let Some(c) = d.cascade.as_mut() {
            c.escalate = escalate;
        }
    }

    fn jury_checks(&mut self, name: &str, d: &mut ir::JudgeDecl, spans: &SettingSpans) {
        let is_jury = spans.jury.is_some();
        let invalid = |c: &mut Self, at: Span, why: String, help: &str| {
            c.report(diagnostics::judge_bad_jury(name, is_jury, at, &why, help));
        };
        let Some(at) = spans.jury else {
            if let Some((w, _)) = &spans.weights {
                invalid(
                    self,
                    *w,
                    "`weights` are for a jury".into(),
                    "give the judge `jury A, B, ...` and `vote weighted`",
                );
            }
            if let (ir::Vote::Weighted, Some(v)) = (d.vote, spans.vote) {
                invalid(
                    self,
                    v,
                    "`vote weighted` weighs a jury's members".into(),
                    "use `majority`, `mean` or `unanimous`",
                );
            }
            return;
        };
        for (span, what) in &spans.not_jury {
            let why = format!("a jury asks its members, so {what} belongs to them");
            invalid(self, *span, why, "give the setting to the member judges");
        }
        let Some(jury) = d.jury.clone() else { return };
        if jury.members.len() < 2 {
            invalid(self, at, "a jury needs at least two members".into(), "name two or more judges declared before it");
        }
        let mut kinds: Vec<String> = Vec::new();
        for (i, m) in jury.members.iter().enumerate() {
            let member = self.p.judges[*m as usize].clone();
            if jury.members[..i].contains(m) {
                invalid(self, at, format!("judge `{}` sits on the jury twice", member.name), "name each member once");
            }
            if member.jury.is_some() {
                let why = format!("judge `{}` is a jury itself", member.name);
                invalid(self, at, why, "name its members instead");
            }
            if member.samples != 1 {
                let why = format!("judge `{}` takes {} samples; a member answers once", member.name, member.samples);
                invalid(self, at, why, "give the jury the members you want, each with one sample");
            }
            if !kinds.contains(&member.returns) {
                kinds.push(member.returns.clone());
            }
        }
        if kinds.len() > 1 {
            let why = format!("its members return different kinds of answer ({})", kinds.join(", "));
            invalid(self, at, why, "members of one jury all return `verdict`, or all `level`, `label` or `value`");
        }
        let members: Vec<ir::JudgeDecl> = jury.members.iter().map(|m| self.p.judges[*m as usize].clone()).collect();
        take_members_answer(d, &members);
        d.samples = jury.members.len() as u32;
        match (&spans.weights, d.vote) {
            (Some((w, ws)), ir::Vote::Weighted) => {
                if ws.len() != jury.members.len() {
                    let why = format!("{} weights for {} members", ws.len(), jury.members.len());
                    invalid(self, *w, why, "give one weight per member, in the order of `jury`");
                } else if ws.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
                    invalid(self, *w, "weights must be positive numbers".into(), "weigh each member above 0");
                }
                if let Some(j) = d.jury.as_mut() {
                    j.weights = Some(ws.clone());
                }
            }
            (Some((w, _)), _) => {
                invalid(
                    self,
                    *w,
                    "`weights` are for `vote weighted`".into(),
                    "add `vote weighted` or drop the weights",
                );
            }
            (None, ir::Vote::Weighted) => {
                invalid(
                    self,
                    spans.vote.unwrap_or(at),
                    "`vote weighted` needs `weights`".into(),
                    "give `weights W1, W2, ...` in member order",
                );
            }
            (None, _) => {}
        }
    }

    /// One setting of judge `d`, not given before.
    fn judge_setting(&mut self, d: &mut ir::JudgeDecl, s: &ast::JudgeSetting, spans: &mut SettingSpans) {
        use ast::JudgeSettingKind as K;
        match &s.kind {
            K::Model(m) => d.model = Some(m.value.clone()),
            K::Temperature(t) => {
                if !(0.0..=2.0).contains(t) {
                    self.report(diagnostics::judge_invalid_setting(s.span, InvalidSetting::Temperature(*t)));
                }
                d.temperature = Some(*t)
            }
            K::TopP(t) => {
                if !(0.0..=1.0).contains(t) {
                    self.report(diagnostics::judge_invalid_setting(s.span, InvalidSetting::TopP(*t)));
                }
                d.top_p = Some(*t)
            }
            K::MaxTokens(n) => d.max_tokens = Some(self.positive_int(*n, s.span, "max_tokens")),
            K::Seed(n) => d.seed = Some(self.positive_int(*n, s.span, "seed") as u64),
            K::Samples(n) => {
                d.samples = self.positive_int(*n, s.span, "samples").max(1);
                // Each sample is a request per criterion; a bundle reader refuses more.
                if d.samples > ir::validate::MAX_SAMPLES {
                    self.report(diagnostics::judge_invalid_setting(s.span, InvalidSetting::Samples(d.samples)));
                }
                if d.samples > 1 {
                    spans.not_local.push((s.span, "`samples` above 1 (a local judge's answer is deterministic)"));
                }
            }
            K::MinSamples(n) => {
                spans.min_samples = Some(s.span);
                d.min_samples = Some(self.positive_int(*n, s.span, "min_samples").max(1));
            }
            K::PerCall(n) => {
                d.per_call = self.positive_int(*n, s.span, "per_call").max(1);
                if d.per_call > 1 {
                    spans
                        .not_local
                        .push((s.span, "`per_call` above 1 (a local judge asks about one criterion at a time)"));
                }
            }
            K::Local(dir) => {
                spans.local = Some(s.span);
                if dir.value.trim().is_empty() {
                    self.report(diagnostics::judge_invalid_setting(s.span, InvalidSetting::EmptyLocal));
                }
                d.local = Some(dir.value.clone());
            }
            K::Calibration(file) => {
                let path = match &self.root_dir {
                    Some(dir) => dir.join(&file.value),
                    None => std::path::PathBuf::from(&file.value),
                };
                let read = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))
                    .and_then(|text| ir::calibration::parse(&text));
                match read {
                    Ok(f) => {
                        spans.calibration = Some((s.span, f.judge.clone()));
                        d.calibration = Some(ir::calibration::Calibration { file: file.value.clone(), maps: f.maps });
                    }
                    Err(why) => {
                        let help =
                            "a calibration file is written by `rubric calibrate`; its path is relative to the rubric";
                        self.report(diagnostics::judge_bad_calibration(s.span, &file.value, &why, help));
                    }
                }
            }
            K::ReasoningEffort(e) => {
                if REASONING_EFFORTS.contains(&e.text.as_str()) {
                    d.reasoning_effort = Some(e.text.clone());
                } else {
                    self.report(diagnostics::judge_invalid_setting(e.span, InvalidSetting::ReasoningEffort(&e.text)));
                }
            }
            K::Order(o) => {
                spans.order = Some(s.span);
                d.order = match o.text.as_str() {
                    "fixed" => ir::Order::Fixed,
                    "shuffled" => ir::Order::Shuffled,
                    "both" => {
                        spans.order_both = Some(o.span);
                        ir::Order::Both
                    }
                    other => {
                        self.report(diagnostics::judge_invalid_setting(o.span, InvalidSetting::Order(other)));
                        ir::Order::Fixed
                    }
                };
            }
            K::Vote(v) => {
                spans.vote = Some(s.span);
                d.vote = self.vote(v);
            }
            K::Jury(names) => {
                spans.jury = Some(s.span);
                let members: Vec<u32> = names.iter().filter_map(|n| self.lookup_judge(n)).collect();
                d.jury = Some(ir::Jury { members, weights: None });
            }
            K::Weights(ws) => spans.weights = Some((s.span, ws.clone())),
            K::Cascade(names) => {
                spans.cascade = Some(s.span);
                let members: Vec<u32> = names.iter().filter_map(|n| self.lookup_judge(n)).collect();
                d.cascade = Some(ir::Cascade { members, escalate: vec![] });
            }
            K::Escalate(whens) => spans.escalate = Some((s.span, whens.clone())),
            K::Scoring(v) => {
                if v.text == "label" {
                    spans.not_local.push((s.span, "`scoring label` (a local judge scores by P(yes))"));
                }
                d.scoring = self.scoring(v);
            }
            K::Fills(_) => {
                let why = "`fills` is a generator's setting: a judge decides criteria";
                let help = "declare `generator NAME { ... fills INPUT }` to write an input before scoring";
                self.report(diagnostics::judge_bad_generator(&format!("judge `{}`", d.name), s.span, why, help));
            }
            K::Sees(names) => {
                for n in names {
                    if let Some(i) = self.input_named(n) {
                        if !d.sees.contains(&i) {
                            d.sees.push(i)
                        }
                        let ty = &self.p.inputs[i as usize].ty;
                        if ty.holds_image() {
                            spans.images.push((n.span, n.text.clone(), ty.clone()));
                        }
                    }
                }
            }
            K::Returns { kind, fields } => {
                spans.returns = Some(kind.span);
                self.returns(d, kind, fields)
            }
            K::Compares(a, b) => {
                spans.compares = Some(s.span);
                if let (Some(first), Some(second)) = (self.input_named(a), self.input_named(b)) {
                    d.compares = Some(ir::Compare { first, second, inconsistent: ir::Inconsistent::Tie });
                }
            }
            K::Rollouts(n) => {
                spans.rollouts = Some(s.span);
                d.rollouts = self.input_named(n);
            }
            K::Inconsistent(n) => {
                let rule = match n.text.as_str() {
                    "tie" => ir::Inconsistent::Tie,
                    "unscored" => ir::Inconsistent::Unscored,
                    other => {
                        self.report(diagnostics::judge_invalid_setting(n.span, InvalidSetting::Inconsistent(other)));
                        ir::Inconsistent::Tie
                    }
                };
                spans.inconsistent = Some((s.span, rule));
            }
            K::EvidenceQuote(n) => {
                spans.not_local.push((s.span, "an evidence rule (a local judge quotes nothing)"));
                spans.evidence = Some(n.span);
                if let Some(i) = self.input_named(n) {
                    d.evidence_from = Some(i);
                }
            }
            K::Template(t) => {
                spans.template = Some(t.span);
                d.template = Some(t.value.clone())
            }
            K::System(t) => d.system = Some(t.value.clone()),
        }
    }

    fn vote(&mut self, v: &ast::Name) -> ir::Vote {
        match v.text.as_str() {
            "majority" => ir::Vote::Majority,
            "mean" => ir::Vote::Mean,
            "unanimous" => ir::Vote::Unanimous,
            "weighted" => ir::Vote::Weighted,
            other => {
                self.report(diagnostics::judge_invalid_setting(v.span, InvalidSetting::Vote(other)));
                ir::Vote::Majority
            }
        }
    }

    fn scoring(&mut self, v: &ast::Name) -> ir::Scoring {
        match v.text.as_str() {
            "label" => ir::Scoring::Label,
            "logprob" => ir::Scoring::Logprob,
            other => {
                self.report(diagnostics::judge_invalid_setting(v.span, InvalidSetting::Scoring(other)));
                ir::Scoring::Label
            }
        }
    }

    /// `returns KIND(field: Type, ...)`; a `Quote` field is text.
    fn returns(&mut self, d: &mut ir::JudgeDecl, kind: &ast::Name, fields: &[ast::FieldType]) {
        if !REPLY_KINDS.contains(&kind.text.as_str()) {
            self.report(diagnostics::judge_invalid_setting(kind.span, InvalidSetting::ReplyKind(&kind.text)));
        }
        d.returns = kind.text.clone();
        for f in fields {
            let ty = match &f.ty.kind {
                ast::TypeExprKind::Named(n) if n.text == "Quote" => Type::Text,
                _ => self.ty(&f.ty),
            };
            d.reply_fields.push((f.name.text.clone(), ty));
        }
    }

    /// Every slot of judge `judge`'s template is an input it sees, or one of the built-in slots.
    fn check_template(&mut self, judge: &str, template: &str, sees: &[u32], extra: &[&str], span: Span) {
        for slot in template_slots(template) {
            if ir::validate::TEMPLATE_KEYWORDS.contains(&slot.as_str()) || extra.contains(&slot.as_str()) {
                continue;
            }
            match self.p.input_index(&slot) {
                Some(i) if sees.contains(&(i as u32)) => {}
                Some(_) => {
                    self.report(diagnostics::judge_hidden_input(judge, span, HiddenInput::Template { input: &slot }))
                }
                None => self.report(diagnostics::judge_unknown_slot(judge, &slot, span)),
            }
        }
    }

    /// A count setting (`samples`, `seed`...): a whole number, or 1 after an error.
    fn positive_int(&mut self, n: f64, span: Span, what: &str) -> u32 {
        if n.fract() != 0.0 || n < 0.0 || n > u32::MAX as f64 {
            self.report(diagnostics::judge_invalid_setting(span, InvalidSetting::NotWhole { setting: what, n }));
            return 1;
        }
        n as u32
    }
}

/// What a panel of judges (a jury or a cascade) takes from its members: the first member's reply
/// kind and fields, log-probability scoring when every member scores so, and every input any
/// member sees.
fn take_members_answer(d: &mut ir::JudgeDecl, members: &[ir::JudgeDecl]) {
    if let Some(first) = members.first() {
        d.returns = first.returns.clone();
        d.reply_fields = first.reply_fields.clone();
    }
    d.scoring = if members.iter().all(|m| m.scoring == ir::Scoring::Logprob) {
        ir::Scoring::Logprob
    } else {
        ir::Scoring::Label
    };
    for m in members {
        for i in &m.sees {
            if !d.sees.contains(i) {
                d.sees.push(*i);
            }
        }
    }
}

/// The settings a jury leaves to its members (they decide what is asked and how the reply
/// is read), named for the diagnostic.
fn member_only(kind: &ast::JudgeSettingKind) -> Option<&'static str> {
    use ast::JudgeSettingKind as K;
    Some(match kind {
        K::Model(_) => "`model`",
        K::Temperature(_) => "`temperature`",
        K::TopP(_) => "`top_p`",
        K::MaxTokens(_) => "`max_tokens`",
        K::Seed(_) => "`seed`",
        K::Samples(_) => "`samples`",
        K::PerCall(_) => "`per_call`",
        K::Local(_) => "`local`",
        K::Scoring(_) => "`scoring`",
        K::Sees(_) => "`sees`",
        K::Returns { .. } => "`returns`",
        K::EvidenceQuote(_) => "an evidence rule",
        K::Template(_) => "`template`",
        K::System(_) => "`system`",
        K::Order(_) => "`order`",
        K::ReasoningEffort(_) => "`reasoning_effort`",
        _ => return None,
    })
}
