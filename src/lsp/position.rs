//! Byte offsets (what every `Span` holds) to LSP positions and back. LSP counts a position's
//! `character` in UTF-16 code units of its line (the protocol's default encoding, the only one
//! this server offers), so `é` is one unit and `🙂` two, while a span counts bytes.

use lsp_types::{Position, Range};

/// The line starts of one text, for converting positions in it.
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> LineIndex<'a> {
        let starts = std::iter::once(0)
            .chain(text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, starts }
    }

    /// The position of byte `offset` (clamped to the text; an offset inside a character counts
    /// from that character's start).
    pub fn position(&self, offset: usize) -> Position {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line];
        let mut at = offset;
        while !self.text.is_char_boundary(at) {
            at -= 1;
        }
        let character = self.text[start..at].encode_utf16().count();
        Position { line: line as u32, character: character as u32 }
    }

    pub fn range(&self, start: usize, end: usize) -> Range {
        Range { start: self.position(start), end: self.position(end.max(start)) }
    }

    /// The byte offset of `pos`: a line past the end is the end of the text, a character past
    /// the end of its line (or inside a surrogate pair) the nearest character boundary before.
    pub fn offset(&self, pos: Position) -> usize {
        let Some(&start) = self.starts.get(pos.line as usize) else {
            return self.text.len();
        };
        let end = self.starts.get(pos.line as usize + 1).map_or(self.text.len(), |&next| next - 1);
        let mut units = 0usize;
        for (i, c) in self.text[start..end].char_indices() {
            if units + c.len_utf16() > pos.character as usize {
                return start + i;
            }
            units += c.len_utf16();
        }
        end
    }

    /// The position just past the last character (the end of a whole-document edit).
    pub fn end(&self) -> Position {
        self.position(self.text.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_positions_count_units_not_bytes() {
        let text = "ab\ncé🙂x\n";
        let ix = LineIndex::new(text);
        let x = text.find('x').unwrap();
        assert_eq!(ix.position(x), Position { line: 1, character: 4 });
        assert_eq!(ix.offset(Position { line: 1, character: 4 }), x);
        assert_eq!(ix.position(0), Position { line: 0, character: 0 });
        assert_eq!(ix.position(text.len()), Position { line: 2, character: 0 });
        // inside the emoji's bytes: its start
        let emoji = text.find('🙂').unwrap();
        assert_eq!(ix.position(emoji + 2), Position { line: 1, character: 2 });
        // inside its surrogate pair, past a line's end, past the last line
        assert_eq!(ix.offset(Position { line: 1, character: 3 }), emoji);
        assert_eq!(ix.offset(Position { line: 0, character: 99 }), 2);
        assert_eq!(ix.offset(Position { line: 9, character: 0 }), text.len());
    }
}
