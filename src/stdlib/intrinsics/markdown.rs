//! Markdown-structure intrinsics: headings, list items and code fences read from the shared
//! text index, plus the IFEval-style section and highlight counts.
//!
//! Pipeline position: part of `stdlib::intrinsics::ALL`, called by every engine.

use super::{count_arg, invalid, number, opt_num_arg, opt_text_arg, text_arg, texts};
use crate::stdlib::text_index::ListKind;
use crate::stdlib::{EvalCtx, Intrinsic, Trap};
use crate::value::Value;

pub(super) const HEADINGS: Intrinsic = Intrinsic {
    name: "headings",
    sig: "(text: Text) -> List[Text]",
    doc: "The texts of the ATX headings (`#` to `######` followed by a space) of `text`, in order, \
          without the `#` markers; lines inside fenced code blocks are not headings. Setext \
          headings (underlined with `===`) are not recognised.",
    examples: &[r##"headings("# Intro\ntext\n## Details ##\n```\n# comment\n```") == ["Intro", "Details"]"##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        let idx = ctx.text_index(t)?;
        texts(ctx, idx.headings().iter().map(|h| h.text.get(t)))
    },
};

fn heading_count(args: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let t = text_arg(args, 0)?;
    let level = match opt_num_arg(args, 1)? {
        None => None,
        Some(_) => {
            let l = count_arg(args, 1, "the heading level")?;
            if !(1..=6).contains(&l) {
                return Err(invalid(format!("the heading level must be 1 to 6, got {l}")));
            }
            Some(l as u8)
        }
    };
    let idx = ctx.text_index(t)?;
    Ok(number(idx.headings().iter().filter(|h| level.is_none_or(|l| h.level == l)).count()))
}

pub(super) const HEADING_COUNT: Intrinsic = Intrinsic {
    name: "heading_count",
    sig: "(text: Text, level: Number? = null) -> Number",
    doc: "The number of ATX headings in `text` (see `headings`), or only those of `level` (1 for \
          `#`, up to 6) when it is given. A level outside 1 to 6 is an invalid argument.",
    examples: &[r##"heading_count("# A\n## B\n## C") == 3"##, r##"heading_count("# A\n## B\n## C", level: 2) == 2"##],
    imp: heading_count,
};

fn list_count(args: &[Value], ctx: &mut EvalCtx, kind: ListKind) -> Result<Value, Trap> {
    let t = text_arg(args, 0)?;
    let idx = ctx.text_index(t)?;
    Ok(number(idx.list_items().iter().filter(|i| i.kind == kind).count()))
}

pub(super) const BULLET_COUNT: Intrinsic = Intrinsic {
    name: "bullet_count",
    sig: "(text: Text) -> Number",
    doc: "The number of bullet list items in `text`: lines whose first non-blank character is \
          `*`, `-` or `+` followed by a space or a tab, outside fenced code blocks; nested items \
          count, thematic breaks (`---`, `* * *`) and bold text (`**x**`) do not.",
    examples: &[r##"bullet_count("* a\n- b\n  + c\n---\n**bold**\n1. d") == 3"##],
    imp: |a, c| list_count(a, c, ListKind::Bullet),
};

pub(super) const NUMBERED_COUNT: Intrinsic = Intrinsic {
    name: "numbered_count",
    sig: "(text: Text) -> Number",
    doc: "The number of numbered list items in `text`: lines whose first non-blank characters are \
          1 to 9 digits followed by `.` or `)` and a space or a tab, outside fenced code blocks.",
    examples: &[r##"numbered_count("1. a\n2) b\n3.5 is not\n- c") == 2"##],
    imp: |a, c| list_count(a, c, ListKind::Numbered),
};

pub(super) const LIST_ITEMS: Intrinsic = Intrinsic {
    name: "list_items",
    sig: "(text: Text) -> List[Text]",
    doc: "The texts of all list items of `text` (bullet and numbered, see `bullet_count` and \
          `numbered_count`), in order, without their markers.",
    examples: &[r##"list_items("Steps:\n1. mix\n2. bake\n- enjoy") == ["mix", "bake", "enjoy"]"##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        let idx = ctx.text_index(t)?;
        texts(ctx, idx.list_items().iter().map(|i| i.content.get(t)))
    },
};

fn sections(args: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let t = text_arg(args, 0)?;
    let splitter = text_arg(args, 1)?;
    if splitter.trim().is_empty() {
        return Err(invalid("the section splitter must not be empty"));
    }
    let re = ctx.regex(&format!(
        r"(?m)^[^\p{{L}}\p{{N}}\n]*?{}[ \t]*\d+[ \t]*[:.)\-–—]?[*_]*",
        regex::escape(splitter.trim())
    ))?;
    let marks: Vec<_> = re.find_iter(t).collect();
    let bodies = marks.iter().enumerate().map(|(i, m)| {
        let end = marks.get(i + 1).map_or(t.len(), |n| n.start());
        t[m.end()..end].trim()
    });
    texts(ctx, bodies)
}

pub(super) const SECTIONS: Intrinsic = Intrinsic {
    name: "sections",
    sig: "(text: Text, splitter: Text) -> List[Text]",
    doc: "The sections of `text` marked IFEval-style by a line starting with `splitter` and a \
          number (`SECTION 1`, `Section 2:`, `## Part 3`, `**Section 4**`): one entry per marker, \
          holding the trimmed text after the marker up to the next marker. Text before the first \
          marker is not a section. The splitter is matched case-sensitively, as IFEval does; \
          characters other than letters and digits (markdown `#`, `*`, `>`, a quote) may precede \
          it on its line, and `:`, `.`, `)` or a dash may follow the number.",
    examples: &[
        r##"sections("Intro\nSECTION 1\nalpha\nSECTION 2: beta", "SECTION") == ["alpha", "beta"]"##,
        r###"sections("## Part 1\nx\n## Part 2\ny\n## Part 3", "Part").len() == 3"###,
    ],
    imp: sections,
};

fn highlighted_count(args: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let t = text_arg(args, 0)?;
    let mut n = 0;
    for pattern in [r"\*[^\n*]*\*", r"\*\*[^\n*]*\*\*"] {
        let re = ctx.regex(pattern)?;
        n += re.find_iter(t).filter(|m| !m.as_str().trim_matches('*').trim().is_empty()).count();
    }
    Ok(number(n))
}

pub(super) const HIGHLIGHTED_COUNT: Intrinsic = Intrinsic {
    name: "highlighted_count",
    sig: "(text: Text) -> Number",
    doc: "The number of highlighted spans in `text`, counted exactly as IFEval's \
          `detectable_format:number_highlighted_sections`: non-empty `*italic*` spans plus \
          non-empty `**bold**` spans, each on one line.",
    examples: &[
        r##"highlighted_count("*one* and **two** and ** **") == 2"##,
        r##"highlighted_count("no highlights") == 0"##,
    ],
    imp: highlighted_count,
};

fn code_blocks(args: &[Value], ctx: &mut EvalCtx) -> Result<Value, Trap> {
    let t = text_arg(args, 0)?;
    let lang = opt_text_arg(args, 1)?.map(|l| l.trim().to_lowercase());
    let idx = ctx.text_index(t)?;
    let bodies = idx.code_fences().iter().filter(|f| match &lang {
        None => true,
        Some(want) => f.lang.map_or("", |l| l.get(t)).to_lowercase() == *want,
    });
    texts(ctx, bodies.map(|f| f.body.get(t)))
}

pub(super) const CODE_BLOCKS: Intrinsic = Intrinsic {
    name: "code_blocks",
    sig: "(text: Text, lang: Text? = null) -> List[Text]",
    doc: "The bodies of the fenced code blocks (```` ``` ```` or `~~~`) of `text`, in order, \
          without the fence lines. With `lang`, only blocks whose language tag (the first word \
          after the opening fence) equals it, ignoring case; `lang: \"\"` selects untagged \
          blocks. A fence must open a line (after at most three spaces of indentation) and be \
          three or more backticks or tildes; a closing fence is at least as long as its opening \
          one; a fence after other text on its line opens no block. A fence that is \
          never closed runs to the end of the text, as in CommonMark.",
    examples: &[
        r##"code_blocks("```py\nx = 1\n```\n~~~\nplain\n~~~") == ["x = 1", "plain"]"##,
        r##"code_blocks("```Python\nprint(1)\n```\n```js\nf()\n```", lang: "python") == ["print(1)"]"##,
        r##"code_blocks("Run ```x = 1``` now") == []"##,
    ],
    imp: code_blocks,
};

pub(super) const CODE_BLOCK_LANGS: Intrinsic = Intrinsic {
    name: "code_block_langs",
    sig: "(text: Text) -> List[Text]",
    doc: "The language tag of every fenced code block of `text`, in order and as written (`\"\"` \
          for a block without one), so that it lines up with `code_blocks(text)`.",
    examples: &[r##"code_block_langs("```rust\nfn f() {}\n```\n```\nx\n```") == ["rust", ""]"##],
    imp: |a, ctx| {
        let t = text_arg(a, 0)?;
        let idx = ctx.text_index(t)?;
        texts(ctx, idx.code_fences().iter().map(|f| f.lang.map_or("", |l| l.get(t))))
    },
};

#[cfg(test)]
mod tests {
    use super::super::call;
    use super::*;

    fn t(s: &str) -> Value {
        Value::text(s)
    }

    #[test]
    fn heading_levels_are_validated() {
        assert!(call(HEADING_COUNT.imp, &[t("# a"), Value::Number(7.0)]).is_err());
        assert!(call(HEADING_COUNT.imp, &[t("# a"), Value::Number(1.5)]).is_err());
        assert_eq!(call(HEADING_COUNT.imp, &[t("# a"), Value::Null]).unwrap(), Value::Number(1.0));
    }

    #[test]
    fn sections_split_on_decorated_markers() {
        let got =
            call(SECTIONS.imp, &[t("pre\n**Section 1:** one\n\nSection 2\ntwo\nnot Section 3"), t("Section")]).unwrap();
        assert_eq!(got, Value::list(vec![t("one"), t("two\nnot Section 3")]));
        assert!(call(SECTIONS.imp, &[t("x"), t(" ")]).is_err());
    }

    #[test]
    fn code_blocks_filter_untagged() {
        let text = t("```\na\n```\n```py\nb\n```");
        let got = call(CODE_BLOCKS.imp, &[text, t("")]).unwrap();
        assert_eq!(got, Value::list(vec![t("a")]));
    }
}
