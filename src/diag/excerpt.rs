//! The source a rendered diagnostic shows: only the lines around its labels, each line of any
//! length cut to a window around the label it holds. miette is given this excerpt instead of
//! the whole file, so that rendering costs the size of the excerpt (not of the file: a file
//! with 20,000 errors renders in linear time) and no line handed to it is long enough to
//! overflow its formatting (a label past column 65,535 used to panic inside miette).

use crate::source::SourceFile;
use miette::{MietteError, MietteSpanContents, SourceCode, SourceSpan, SpanContents};

/// Lines of context kept around each label (miette shows one; two more let it choose).
const CONTEXT: usize = 2;
/// Lines of a label over many lines shown (from its first); the rest are left out.
const LABEL_LINES: usize = 24;
/// A line longer than this many characters is shown cut around its label.
const LONG_LINE: usize = 160;
/// Characters of a cut line shown before its label's start.
const BEFORE_LABEL: usize = 40;
/// Characters of a cut line shown in all.
const SHOWN: usize = 120;

/// The lines of one file around a diagnostic's labels, as miette's source.
pub(super) struct Excerpt {
    name: String,
    text: String,
    pieces: Vec<Piece>,
}

/// A run of consecutive lines of the file.
struct Piece {
    /// Where the piece starts and ends in the excerpt's text.
    start: usize,
    end: usize,
    /// Its first line in the file (0-based).
    first_line: usize,
    lines: Vec<Shown>,
}

/// One line of the file as the excerpt shows it.
struct Shown {
    /// Where the shown line starts in the excerpt's text, and how long it is there.
    at: usize,
    len: usize,
    /// The file's bytes of the line, and the part of them shown (all of a short line).
    line: std::ops::Range<usize>,
    kept: std::ops::Range<usize>,
    /// Bytes of the marker `…` put before a cut line's kept part.
    marker: usize,
    /// Bytes of the line left out before the kept part, less the marker's.
    column_shift: isize,
}

impl Excerpt {
    /// The excerpt of `file` around the byte ranges `spans` (the labels in it).
    pub(super) fn new(file: &SourceFile, spans: &[(usize, usize)]) -> Excerpt {
        let text_len = file.text.len();
        let last_line = file.line_of(text_len);
        let mut ranges: Vec<(usize, usize)> = spans
            .iter()
            .map(|&(s, e)| {
                let first = file.line_of(s.min(text_len));
                // A label over very many lines is cut after its first few (miette draws it to
                // the end of what it is given).
                let last = file.line_of(e.min(text_len)).min(first + LABEL_LINES);
                (first.saturating_sub(CONTEXT), (last + CONTEXT).min(last_line))
            })
            .collect();
        ranges.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for (a, b) in ranges {
            match merged.last_mut() {
                // Labels a few lines apart share one piece, lines between included, so that
                // miette can show them in one snippet as it would from the whole file.
                Some((_, end)) if a <= *end + 1 + LABEL_LINES => *end = (*end).max(b),
                _ => merged.push((a, b)),
            }
        }
        let mut text = String::new();
        let mut pieces = Vec::with_capacity(merged.len());
        for (first, last) in merged {
            let start = text.len();
            let mut lines = Vec::with_capacity(last - first + 1);
            for n in first..=last {
                let line = file.line_range(n);
                let focus = spans
                    .iter()
                    .flat_map(|&(s, e)| [s, e])
                    .find(|o| (line.start..=line.end).contains(o))
                    .unwrap_or(line.start);
                let shown = Shown::of(&file.text, line, focus, text.len());
                if shown.marker > 0 {
                    text.push('…');
                }
                text.push_str(&file.text[shown.kept.clone()]);
                if shown.kept.end < shown.line.end {
                    text.push('…');
                }
                let len = text.len() - shown.at;
                // The file's last line has no line break after it (and is empty when the file
                // ends with one), as miette would read it from the whole file.
                if n < last_line {
                    text.push('\n');
                }
                lines.push(Shown { len, ..shown });
            }
            pieces.push(Piece { start, end: text.len(), first_line: first, lines });
        }
        Excerpt { name: file.name.clone(), text, pieces }
    }

    /// Where byte `offset` of the file is in the excerpt (a byte of a line's cut part is
    /// placed at the nearer end of what is shown).
    pub(super) fn place(&self, offset: usize) -> usize {
        let line = self.pieces.iter().flat_map(|p| &p.lines).find(|l| offset <= l.line.end);
        let Some(l) = line.or_else(|| self.pieces.last().and_then(|p| p.lines.last())) else { return 0 };
        if offset < l.kept.start {
            l.at
        } else if offset > l.kept.end {
            l.at + l.len
        } else {
            l.at + l.marker + (offset - l.kept.start)
        }
    }
}

impl Shown {
    /// Line `line` of `text`, cut around byte `focus` when it is long; `at` is where it goes
    /// in the excerpt. The length is filled in once the line is written.
    fn of(text: &str, line: std::ops::Range<usize>, focus: usize, at: usize) -> Shown {
        let whole = &text[line.clone()];
        let chars = whole.chars().count();
        if chars <= LONG_LINE {
            return Shown { at, len: 0, kept: line.clone(), line, marker: 0, column_shift: 0 };
        }
        let mut focus = focus.clamp(line.start, line.end);
        while !text.is_char_boundary(focus) {
            focus -= 1;
        }
        let focus_char = text[line.start..focus].chars().count();
        let first = focus_char.saturating_sub(BEFORE_LABEL).min(chars - SHOWN);
        let byte_at = |c: usize| whole.char_indices().nth(c).map_or(whole.len(), |(i, _)| i) + line.start;
        let kept = byte_at(first)..byte_at(first + SHOWN);
        let marker = if first > 0 { '…'.len_utf8() } else { 0 };
        // miette counts columns in bytes: the bytes cut, less the marker's.
        let column_shift = (kept.start - line.start) as isize - marker as isize;
        Shown { at, len: 0, line, kept, marker, column_shift }
    }
}

impl SourceCode for Excerpt {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, MietteError> {
        let at = span.offset();
        let piece = self.pieces.iter().find(|p| at < p.end).or(self.pieces.last()).ok_or(MietteError::OutOfBounds)?;
        let local = SourceSpan::new((at.saturating_sub(piece.start)).into(), span.len());
        let piece_text = &self.text[piece.start..piece.end];
        let inner = piece_text.read_span(&local, context_lines_before, context_lines_after)?;
        let line = inner.line();
        // The header's `line:column` reads the label alone: give it the column in the file.
        let column = match (context_lines_before, context_lines_after, piece.lines.get(line)) {
            (0, 0, Some(l)) => inner.column().saturating_add_signed(l.column_shift),
            _ => inner.column(),
        };
        let data: &'a [u8] = inner.data();
        let span = SourceSpan::new((inner.span().offset() + piece.start).into(), inner.span().len());
        Ok(Box::new(MietteSpanContents::new_named(
            self.name.clone(),
            data,
            span,
            piece.first_line + line,
            column,
            // miette's own sources count the lines from the start of the file here (it decides
            // from this whether two labels share a snippet): so does the excerpt.
            piece.first_line + inner.line_count(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use crate::diag::Diagnostic;
    use crate::source::{SourceMap, Span};

    /// Labels anywhere, even inside a character of a long line or past the end of the file
    /// (a forged site), render without a panic; far-apart labels keep their true line numbers.
    #[test]
    fn labels_render_from_an_excerpt_wherever_they_point() {
        let mut sources = SourceMap::new();
        let long = "é".repeat(5000);
        let text = format!("first line\n{long}\n{}tail\n", "middle\n".repeat(500));
        let f = sources.add("x.rubric", text.clone());
        for (start, end) in
            [(0, 5), (12, 13), (11 + 5001, 11 + 5003), (text.len() - 5, text.len()), (text.len() + 9, text.len() + 20)]
        {
            let d = Diagnostic::error("rubric::parse::syntax", "m")
                .with_label(Span::new(f, start, end), "here")
                .with_label(Span::new(f, 0, 5), "and here");
            let out = d.render(&sources, false);
            assert!(out.contains("x.rubric:"), "{out}");
            assert!(out.lines().all(|l| l.chars().count() < 200), "{out}");
        }
        let far = Diagnostic::error("rubric::parse::syntax", "m")
            .with_label(Span::new(f, text.len() - 5, text.len() - 1), "end")
            .with_label(Span::new(f, 0, 5), "start");
        let out = far.render(&sources, false);
        assert!(out.contains(" 503 │ tail") && out.contains(" 1 │ first line"), "{out}");
    }
}
