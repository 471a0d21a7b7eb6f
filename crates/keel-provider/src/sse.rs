//! An incremental decoder for Server-Sent Events (the `text/event-stream` format).
//!
//! Bytes go in as they arrive, in chunks of any size; whole events come out. Lines may end in
//! `\n`, `\r\n` or `\r`, a leading byte-order mark is dropped, comments (`:`) and `id`/`retry`
//! fields are skipped, and an event left pending when the stream ends is still delivered (some
//! recordings omit the final blank line).

use crate::error::ProviderError;
use crate::http::WireParser;
use crate::stream::StreamEvent;

/// One decoded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, empty when the server sent none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// Decodes a byte stream into [`SseEvent`]s.
///
/// Linear in its input: each byte is searched for a line end once, however the stream is cut
/// into chunks, and a line longer than a chunk is gathered in one buffer (at most about twice
/// the line, which then becomes the event's data without another copy).
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// The start of a line whose end has not arrived yet. It never holds `\n` or `\r`: every
    /// byte in it has been searched already, so a new chunk is searched from its own start.
    buf: Vec<u8>,
    event: String,
    data: Vec<u8>,
    has_data: bool,
    /// The previous chunk ended in `\r`: a `\n` at the start of the next one ends no line.
    skip_lf: bool,
    /// The stream's first bytes have been seen (and a leading byte-order mark dropped).
    past_start: bool,
    /// How many bytes of a leading byte-order mark have arrived, held back until it is whole.
    bom_seen: usize,
}

/// The UTF-8 byte-order mark a stream may start with (the SSE standard says to drop it).
const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next chunk; complete events are appended to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        let mut input = chunk;
        if !self.past_start {
            let matched = input
                .iter()
                .zip(&BOM[self.bom_seen..])
                .take_while(|(byte, bom)| byte == bom)
                .count();
            self.bom_seen += matched;
            input = &input[matched..];
            if self.bom_seen < BOM.len() {
                if input.is_empty() {
                    return Ok(());
                }
                // Not a byte-order mark after all: what was held back starts the first line
                // (it holds no line end).
                self.buf.extend_from_slice(&BOM[..self.bom_seen]);
            }
            self.past_start = true;
        }
        // An empty chunk leaves a pending `\r` pending: the `\n` may still come.
        if self.skip_lf && !input.is_empty() {
            self.skip_lf = false;
            if let Some(rest) = input.strip_prefix(b"\n") {
                input = rest;
            }
        }
        if !self.buf.is_empty() {
            // Only the new bytes are searched: the buffer holds no line end.
            let Some(end) = memchr::memchr2(b'\n', b'\r', input) else {
                self.buf.extend_from_slice(input);
                return Ok(());
            };
            self.buf.extend_from_slice(&input[..end]);
            let line = std::mem::take(&mut self.buf);
            let next = self.after_line_end(input, end);
            self.owned_line(line, out)?;
            input = &input[next..];
        }
        let used = self.lines(input, out)?;
        self.buf.extend_from_slice(&input[used..]);
        Ok(())
    }

    /// Ends the stream: a last line without its newline, and an event without its blank
    /// line, are still delivered.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        if !self.past_start {
            self.past_start = true;
            self.buf.extend_from_slice(&BOM[..self.bom_seen]);
        }
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.owned_line(line, out)?;
        }
        self.dispatch(out)
    }

    /// Handles every complete line in `input`; returns how many bytes were used.
    fn lines(&mut self, input: &[u8], out: &mut Vec<SseEvent>) -> Result<usize, ProviderError> {
        let mut start = 0;
        while let Some(offset) = memchr::memchr2(b'\n', b'\r', &input[start..]) {
            let end = start + offset;
            self.line(&input[start..end], out)?;
            start = self.after_line_end(input, end);
        }
        Ok(start)
    }

    /// Where the next line starts after the line end at `input[end]`: past a `\r\n` pair, or
    /// past a `\r` whose `\n` may start the next chunk.
    fn after_line_end(&mut self, input: &[u8], end: usize) -> usize {
        let next = end + 1;
        if input[end] == b'\r' {
            match input.get(next) {
                Some(b'\n') => return next + 1,
                Some(_) => {}
                None => self.skip_lf = true,
            }
        }
        next
    }

    /// A line gathered across chunks. A data line that starts an event becomes the event's
    /// data in place, so a huge line is not copied again; the buffer is otherwise kept for
    /// reuse.
    fn owned_line(
        &mut self,
        mut line: Vec<u8>,
        out: &mut Vec<SseEvent>,
    ) -> Result<(), ProviderError> {
        if !self.has_data
            && let Some(value) = data_value_offset(&line)
        {
            line.drain(..value);
            self.data = line;
            self.has_data = true;
            return Ok(());
        }
        self.line(&line, out)?;
        line.clear();
        self.buf = line;
        Ok(())
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        if line.is_empty() {
            return self.dispatch(out);
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event = utf8(value.to_vec())?;
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        let event = std::mem::take(&mut self.event);
        if !self.has_data {
            return Ok(());
        }
        self.has_data = false;
        let data = utf8(std::mem::take(&mut self.data))?;
        out.push(SseEvent { event, data });
        Ok(())
    }
}

/// A back end's handling of decoded events.
pub(crate) trait SseHandler: Default + Send {
    /// Handles one event.
    fn event(&mut self, sse: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError>;
    /// The body ended: close the reply, or fail if it is incomplete.
    fn end_of_body(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError>;
}

/// Bytes in, [`StreamEvent`]s out: an [`SseDecoder`] feeding a back end's handler.
#[derive(Debug, Default)]
pub(crate) struct SseDriver<H> {
    sse: SseDecoder,
    pending: Vec<SseEvent>,
    handler: H,
}

impl<H: SseHandler> SseDriver<H> {
    /// Takes the next chunk of the body.
    pub(crate) fn feed(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ProviderError> {
        self.sse.push(chunk, &mut self.pending)?;
        self.drain(out)
    }

    /// Ends the body.
    pub(crate) fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.sse.finish(&mut self.pending)?;
        self.drain(out)?;
        self.handler.end_of_body(out)
    }

    /// Hands the decoded events to the handler, keeping the buffer for reuse.
    fn drain(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        let result = self
            .pending
            .iter()
            .try_for_each(|event| self.handler.event(event, out));
        self.pending.clear();
        result
    }
}

impl<H: SseHandler> WireParser for SseDriver<H> {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        SseDriver::feed(self, chunk, out)
    }

    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        SseDriver::finish(self, out)
    }
}

/// Where the value of a `data` line starts (after `data:` and one optional space); `None`
/// for any other line.
fn data_value_offset(line: &[u8]) -> Option<usize> {
    let rest = line.strip_prefix(b"data")?;
    match rest {
        [] => Some(4),
        [b':', b' ', ..] => Some(6),
        [b':', ..] => Some(5),
        _ => None,
    }
}

fn utf8(bytes: Vec<u8>) -> Result<String, ProviderError> {
    String::from_utf8(bytes).map_err(|err| ProviderError::Stream {
        message: format!("the event stream is not valid UTF-8: {err}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_chunks(input: &[u8], size: usize) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in input.chunks(size) {
            decoder.push(chunk, &mut out).unwrap();
        }
        decoder.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn every_chunking_gives_the_same_events() {
        let input = b"event: a\ndata: 1\n\n: comment\r\nevent: b\r\ndata: x\r\ndata:y\r\n\r\nid: 3\rdata: z\r\r";
        let whole = decode_in_chunks(input, input.len());
        assert_eq!(
            whole,
            vec![
                SseEvent {
                    event: "a".into(),
                    data: "1".into()
                },
                SseEvent {
                    event: "b".into(),
                    data: "x\ny".into()
                },
                SseEvent {
                    event: String::new(),
                    data: "z".into()
                },
            ]
        );
        for size in 1..input.len() {
            assert_eq!(decode_in_chunks(input, size), whole, "chunk size {size}");
        }
    }

    #[test]
    fn an_event_without_its_blank_line_is_delivered_at_the_end() {
        let events = decode_in_chunks(b"event: message_stop\ndata: {}", 7);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event, "message_stop");
        assert_eq!(events[0].data, "{}");
    }

    #[test]
    fn an_event_with_no_data_is_not_delivered() {
        assert!(decode_in_chunks(b"event: ping\n\n\n", 3).is_empty());
    }

    #[test]
    fn invalid_utf8_is_a_stream_error() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        let err = decoder.push(b"data: \xff\xfe\n\n", &mut out).unwrap_err();
        assert!(matches!(err, ProviderError::Stream { .. }), "{err:?}");
    }
}
