//! Keeping the head and the tail of a long output: keel's one implementation, used for tool
//! results ([`ToolOutput`](crate::ToolOutput)'s size limit), `run_command`'s streamed output,
//! a background task's output and error tails, and the long tool results a compaction
//! summary request quotes.

/// How far from the ideal cut a line break is looked for, so cuts fall between lines.
pub const LINE_SLACK: usize = 400;

/// The first and the last bytes of a stream, pushed in pieces, in bounded memory (at most
/// `head_bytes + 2 × tail_bytes`, whatever was pushed), cut between lines when a line break is
/// near (within [`LINE_SLACK`]) and never inside a UTF-8 character.
///
/// ```
/// use keel_tool::HeadTail;
///
/// let mut output = HeadTail::new(16, 16);
/// for n in 0..1000 {
///     output.push(format!("line {n}\n").as_bytes());
/// }
/// let (text, omitted) = output.render(|omitted, total| {
///     format!("[... {omitted} bytes omitted ({total} in total) ...]")
/// });
/// assert_eq!(text, "line 0\nline 1\n[... 8867 bytes omitted (8890 in total) ...]\nline 999\n");
/// assert_eq!(omitted, 8867);
///
/// // Only the end: the last lines.
/// let mut errors = HeadTail::new(0, 20);
/// for n in 0..1000 {
///     errors.push(format!("line {n}\n").as_bytes());
/// }
/// assert_eq!(errors.last_lines(5), "line 998\nline 999");
/// ```
#[derive(Debug, Clone, Default)]
pub struct HeadTail {
    head: Vec<u8>,
    tail: Vec<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

/// What a [`HeadTail`] keeps, cut: the head up to a line break (or a character boundary), the
/// tail from one, and how much lies between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut<'a> {
    /// The start of the stream.
    pub head: &'a [u8],
    /// The end of the stream (right after `head` when nothing was left out).
    pub tail: &'a [u8],
    /// Bytes left out between them.
    pub omitted: u64,
    /// Bytes pushed in all.
    pub total: u64,
}

impl HeadTail {
    /// Keeps the first `head_bytes` and the last `tail_bytes` pushed.
    pub fn new(head_bytes: usize, tail_bytes: usize) -> Self {
        Self {
            head: Vec::new(),
            tail: Vec::new(),
            head_cap: head_bytes,
            tail_cap: tail_bytes,
            total: 0,
        }
    }

    /// Adds the next piece of the stream.
    pub fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        let room = self
            .head_cap
            .saturating_sub(self.head.len())
            .min(data.len());
        let (head, rest) = data.split_at(room);
        self.head.extend_from_slice(head);
        if rest.len() >= self.tail_cap {
            self.tail.clear();
            self.tail
                .extend_from_slice(rest.get(rest.len() - self.tail_cap..).unwrap_or_default());
        } else if !rest.is_empty() {
            self.tail.extend_from_slice(rest);
            if self.tail.len() > 2 * self.tail_cap {
                self.tail.drain(..self.tail.len() - self.tail_cap);
            }
        }
    }

    /// Bytes pushed in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes held now (at most `head_bytes + 2 × tail_bytes`).
    pub fn held(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// The last `tail_bytes` kept (of what did not fit in the head).
    fn kept_tail(&self) -> &[u8] {
        let from = self.tail.len().saturating_sub(self.tail_cap);
        self.tail.get(from..).unwrap_or_default()
    }

    /// Whether some of the stream was left out.
    pub fn is_cut(&self) -> bool {
        (self.head.len() + self.kept_tail().len()) as u64 != self.total
    }

    /// The head and the tail: all of the stream when nothing was left out; else the head
    /// ending after a line break within [`LINE_SLACK`] of its end (else at a character's end)
    /// and the tail starting after one within [`LINE_SLACK`] of its start (else at a
    /// character's start).
    pub fn cut(&self) -> Cut<'_> {
        let tail = self.kept_tail();
        if !self.is_cut() {
            return Cut {
                head: &self.head,
                tail,
                omitted: 0,
                total: self.total,
            };
        }
        let head_from = self.head.len().saturating_sub(LINE_SLACK);
        let head_end = self
            .head
            .get(head_from..)
            .unwrap_or_default()
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or_else(|| char_end(&self.head), |pos| head_from + pos + 1);
        let head = self.head.get(..head_end).unwrap_or_default();
        let tail_start = tail
            .get(..tail.len().min(LINE_SLACK))
            .unwrap_or_default()
            .iter()
            .position(|&b| b == b'\n')
            .map_or_else(
                // No line break near the cut: start at a character boundary.
                || {
                    tail.iter()
                        .take(3)
                        .take_while(|&&b| b & 0xC0 == 0x80)
                        .count()
                },
                |pos| pos + 1,
            );
        let tail = tail.get(tail_start..).unwrap_or_default();
        Cut {
            head,
            tail,
            omitted: self.total - (head.len() + tail.len()) as u64,
            total: self.total,
        }
    }

    /// The text kept and how many bytes were left out: all of it when nothing was; else the
    /// head (its last line break dropped), a line `marker(omitted, total)`, and the tail.
    pub fn render(&self, marker: impl FnOnce(u64, u64) -> String) -> (String, u64) {
        let cut = self.cut();
        if cut.omitted == 0 {
            let mut all = cut.head.to_vec();
            all.extend_from_slice(cut.tail);
            return (String::from_utf8_lossy(&all).into_owned(), 0);
        }
        let text = format!(
            "{}\n{}\n{}",
            String::from_utf8_lossy(cut.head).trim_end_matches('\n'),
            marker(cut.omitted, cut.total),
            String::from_utf8_lossy(cut.tail),
        );
        (text, cut.omitted)
    }

    /// The last `n` lines kept, joined by line breaks (no break after the last): for a
    /// stream kept by its tail alone (`HeadTail::new(0, bytes)`). The kept tail starts at a
    /// line's start when one is near (see [`cut`](Self::cut)).
    pub fn last_lines(&self, n: usize) -> String {
        let cut = self.cut();
        let mut bytes = cut.head.to_vec();
        bytes.extend_from_slice(cut.tail);
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        if text.is_empty() {
            return String::new();
        }
        let lines: Vec<&str> = text.split('\n').collect();
        let start = lines.len().saturating_sub(n);
        lines.get(start..).unwrap_or_default().join("\n")
    }
}

/// The length of `bytes` without a character cut off at its end.
fn char_end(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(4) {
        let byte = bytes[len - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let needs = match byte {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needs > back { len - back } else { len };
    }
    len
}
