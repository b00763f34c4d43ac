//! Newline-delimited JSON framing with a size bound.
//!
//! MCP over stdio is one JSON message per line. A peer can send a line of any length, so the
//! reader holds at most `max` bytes of one message: a longer line is skipped to its end, and
//! what remains of it is its head and tail, enough to find its id and answer the request (or
//! fail the call waiting for that reply) instead of letting it hang.
//!
//! Memory comes back after a spike: a buffer grown for a large line is replaced by a small one
//! once the line is out, and the allocator is asked to hand the freed memory back
//! (`memory.rs`), so one huge message does not leave the process at its high-water mark.

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};

/// What kept from an oversized message to find its id.
const KEEP: usize = 64 * 1024;

/// The read buffer's usual size (and what each read asks for).
const CHUNK: usize = 64 * 1024;

/// One frame read from a stream.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A whole line, without its newline.
    Line(BytesMut),
    /// A line longer than the bound: its first and last bytes and its full length.
    TooLarge {
        /// The first bytes.
        head: Vec<u8>,
        /// The last bytes.
        tail: Vec<u8>,
        /// The line's length.
        len: usize,
    },
}

/// A frame from a transport that is not line-delimited (an HTTP body, an SSE event), made safe
/// to relay as one line: a raw CR or LF cannot occur inside a JSON string, so each is
/// insignificant whitespace and becomes a space (pretty-printed JSON would otherwise break the
/// stdio side's framing).
pub(crate) fn one_line(frame: Frame) -> Frame {
    match frame {
        Frame::Line(mut line) => {
            for b in line.iter_mut() {
                if *b == b'\n' || *b == b'\r' {
                    *b = b' ';
                }
            }
            Frame::Line(line)
        }
        other => other,
    }
}

/// Reads frames from `R`, holding at most `max` bytes of one line.
#[derive(Debug)]
pub(crate) struct LineReader<R> {
    inner: R,
    buf: BytesMut,
    scanned: usize,
    max: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader for lines of at most `max` bytes.
    pub(crate) fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            buf: BytesMut::with_capacity(CHUNK),
            scanned: 0,
            max: max.max(1),
        }
    }

    /// The next frame; `None` at end of stream (a partial last line is returned first).
    pub(crate) async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        self.shrink();
        loop {
            if let Some(p) = memchr::memchr(b'\n', &self.buf[self.scanned..]) {
                let end = self.scanned + p;
                let mut line = self.buf.split_to(end + 1);
                line.truncate(end);
                if line.last() == Some(&b'\r') {
                    line.truncate(end - 1);
                }
                self.scanned = 0;
                if line.len() > self.max {
                    let len = line.len();
                    let frame = Frame::TooLarge {
                        head: line[..KEEP.min(len)].to_vec(),
                        tail: line[len.saturating_sub(KEEP)..].to_vec(),
                        len,
                    };
                    drop(line);
                    self.shrink();
                    super::memory::release_soon();
                    return Ok(Some(frame));
                }
                if line.len() >= super::memory::LARGE {
                    super::memory::release_soon();
                }
                return Ok(Some(Frame::Line(line)));
            }
            self.scanned = self.buf.len();
            if self.buf.len() > self.max {
                let frame = self.skip_oversized().await;
                self.shrink();
                super::memory::release_soon();
                return frame.map(Some);
            }
            self.buf.reserve(CHUNK);
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                self.scanned = 0;
                if self.buf.is_empty() {
                    return Ok(None);
                }
                let line = self.buf.split();
                return Ok(Some(Frame::Line(line)));
            }
        }
    }

    /// Lets go of a buffer grown for a large line: what is left of it moves to a small one,
    /// so the large allocation is freed once the line handed out is dropped (a buffer split
    /// from it keeps it alive otherwise, and reuses it for every later line).
    fn shrink(&mut self) {
        if self.buf.capacity() > 4 * CHUNK && self.buf.len() <= CHUNK {
            let mut small = BytesMut::with_capacity(CHUNK);
            small.extend_from_slice(&self.buf);
            self.buf = small;
        }
    }

    /// Reads the rest of an oversized line, keeping its head and a rolling tail.
    async fn skip_oversized(&mut self) -> std::io::Result<Frame> {
        let head = self.buf[..KEEP.min(self.buf.len())].to_vec();
        let mut len = self.buf.len();
        let mut tail = self.buf[self.buf.len().saturating_sub(KEEP)..].to_vec();
        // The buffer grew to the bound; the rest of the line is read in small chunks.
        self.buf = BytesMut::with_capacity(CHUNK);
        self.scanned = 0;
        loop {
            self.buf.reserve(CHUNK);
            if self.inner.read_buf(&mut self.buf).await? == 0 {
                return Ok(Frame::TooLarge { head, tail, len });
            }
            let newline = memchr::memchr(b'\n', &self.buf);
            let chunk_end = newline.unwrap_or(self.buf.len());
            len += chunk_end;
            tail.extend_from_slice(&self.buf[..chunk_end]);
            if tail.len() > 2 * KEEP {
                tail.drain(..tail.len() - KEEP);
            }
            match newline {
                Some(p) => {
                    let _ = self.buf.split_to(p + 1);
                    let keep_from = tail.len().saturating_sub(KEEP);
                    return Ok(Frame::TooLarge {
                        head,
                        tail: tail[keep_from..].to_vec(),
                        len,
                    });
                }
                None => self.buf.clear(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], max: usize) -> Vec<String> {
        let mut r = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(f) = r.next().await.unwrap() {
            out.push(match f {
                Frame::Line(l) => String::from_utf8_lossy(&l).into_owned(),
                Frame::TooLarge { len, .. } => format!("<{len} bytes>"),
            });
        }
        out
    }

    #[test]
    fn pretty_printed_json_from_http_becomes_one_line() {
        let body =
            "{\r\n  \"jsonrpc\": \"2.0\",\n  \"id\": 3,\n  \"result\": {\"t\": \"a\\nb\"}\n}";
        let Frame::Line(line) = one_line(Frame::Line(BytesMut::from(body))) else {
            unreachable!()
        };
        assert!(!line.contains(&b'\n') && !line.contains(&b'\r'));
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            v["result"]["t"], "a\nb",
            "escaped newlines in strings are kept"
        );
    }

    #[tokio::test]
    async fn lines_are_split_and_oversized_ones_skipped_whole() {
        let big = "x".repeat(300_000);
        let input = format!("a\r\n{big}\nb\n{big}");
        assert_eq!(
            frames(input.as_bytes(), 1000).await,
            vec!["a", "<300000 bytes>", "b", "<300000 bytes>"]
        );
    }

    #[tokio::test]
    async fn a_buffer_grown_for_a_large_line_is_let_go() {
        use tokio::io::AsyncWriteExt;
        let big = "z".repeat(3_000_000);
        let input = format!("{big}\nsmall\n{}\nlast\n", "w".repeat(5_000_000));
        // A pipe's reads: at most 64 KiB each.
        let (mut tx, rx) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move { tx.write_all(input.as_bytes()).await });
        let mut r = LineReader::new(rx, 4_000_000);
        assert!(matches!(r.next().await.unwrap(), Some(Frame::Line(l)) if l.len() == big.len()));
        assert!(matches!(r.next().await.unwrap(), Some(Frame::Line(l)) if &l[..] == b"small"));
        assert!(r.buf.capacity() <= 4 * CHUNK, "{}", r.buf.capacity());
        assert!(matches!(
            r.next().await.unwrap(),
            Some(Frame::TooLarge { len: 5_000_000, .. })
        ));
        assert!(r.buf.capacity() <= 4 * CHUNK, "{}", r.buf.capacity());
        assert!(matches!(r.next().await.unwrap(), Some(Frame::Line(l)) if &l[..] == b"last"));
    }

    #[tokio::test]
    async fn an_oversized_line_keeps_its_head_and_tail() {
        let input = format!(
            "{{\"result\":\"{}\",\"id\":77}}\nnext\n",
            "y".repeat(500_000)
        );
        let mut r = LineReader::new(input.as_bytes(), 10_000);
        match r.next().await.unwrap().unwrap() {
            Frame::TooLarge { head, tail, len } => {
                assert!(head.starts_with(b"{\"result\""));
                assert!(tail.ends_with(b"\"id\":77}"));
                assert_eq!(len, input.len() - "\nnext\n".len());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(r.next().await.unwrap(), Some(Frame::Line(l)) if &l[..] == b"next"));
    }
}
