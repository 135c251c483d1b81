//! Any `:authority` on the socket. A Unix socket has no host, so clients put
//! whatever they like in HTTP/2's `:authority`: gRPC's C core (Python, Ruby,
//! C++, C#) sends the socket path percent-encoded (`tmp%2Fx%2Fr.sock`),
//! which the `http` crate refuses as an authority, so `h2` resets every
//! stream before tonic sees it. The socket has exactly one service, so the
//! authority carries no meaning here: [`AnyAuthority`] wraps the accepted
//! stream and, in the client's header blocks, overwrites each byte of an
//! unparseable `:authority` literal that no authority may hold with `-`.
//!
//! The rewrite never changes a length, so frame lengths stay right and the
//! HPACK dynamic table (entry sizes are name + value lengths) stays in step
//! with the client's encoder: a later request naming the entry by index
//! gets the rewritten value. A Huffman-coded value is left as it is.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const PREFACE_LEN: usize = 24;
const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// A header block larger than this is passed on untouched (h2 limits it).
const MAX_BLOCK: usize = 1 << 20;

/// The accepted socket stream, with its `:authority` made acceptable.
#[derive(Debug)]
pub struct AnyAuthority<S> {
    inner: S,
    /// Bytes read from `inner` not yet handed on; `buf[..ready]` are final.
    buf: Vec<u8>,
    ready: usize,
    /// Where the parser is: preface, then frame by frame.
    preface_left: usize,
    /// Payload bytes of a frame that is passed on as it comes.
    skip_left: usize,
    /// Past a header block too large to hold: everything passes untouched.
    passthrough: bool,
    /// What each read of `inner` lands in, zeroed once per connection (a
    /// fresh array per read would zero 8 KiB on every call, a read that
    /// finds nothing included).
    scratch: Box<[u8]>,
}

impl<S> AnyAuthority<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            ready: 0,
            preface_left: PREFACE_LEN,
            skip_left: 0,
            passthrough: false,
            scratch: vec![0; 8192].into_boxed_slice(),
        }
    }

    /// Marks as final every byte the parser can decide on now.
    fn advance(&mut self) {
        loop {
            let avail = self.buf.len() - self.ready;
            if avail == 0 {
                return;
            }
            if self.passthrough {
                self.ready = self.buf.len();
                return;
            }
            if self.preface_left > 0 {
                let n = self.preface_left.min(avail);
                self.preface_left -= n;
                self.ready += n;
                continue;
            }
            if self.skip_left > 0 {
                let n = self.skip_left.min(avail);
                self.skip_left -= n;
                self.ready += n;
                continue;
            }
            let Some(header) = frame_header(&self.buf[self.ready..]) else {
                return;
            };
            if header.kind != HEADERS {
                self.ready += FRAME_HEADER_LEN;
                self.skip_left = header.len;
                continue;
            }
            // A header block: HEADERS, then CONTINUATIONs up to END_HEADERS.
            match block_end(&self.buf[self.ready..]) {
                Block::Complete(end) => {
                    let start = self.ready;
                    rewrite_block(&mut self.buf[start..start + end]);
                    self.ready += end;
                }
                Block::Incomplete(have) if have > MAX_BLOCK => self.passthrough = true,
                Block::Incomplete(_) => return,
                Block::Malformed => self.passthrough = true,
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct FrameHeader {
    len: usize,
    kind: u8,
    flags: u8,
}

fn frame_header(b: &[u8]) -> Option<FrameHeader> {
    let h = b.get(..FRAME_HEADER_LEN)?;
    Some(FrameHeader {
        len: usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]),
        kind: h[3],
        flags: h[4],
    })
}

enum Block {
    /// The block's frames end this many bytes in.
    Complete(usize),
    /// Not all of it has arrived; this many bytes have.
    Incomplete(usize),
    /// Not a HEADERS frame followed by CONTINUATIONs: leave it to h2.
    Malformed,
}

fn block_end(b: &[u8]) -> Block {
    let mut at = 0;
    let mut first = true;
    loop {
        let Some(h) = frame_header(&b[at..]) else {
            return Block::Incomplete(b.len());
        };
        if (first && h.kind != HEADERS) || (!first && h.kind != CONTINUATION) {
            return Block::Malformed;
        }
        first = false;
        at += FRAME_HEADER_LEN + h.len;
        if at > b.len() {
            return Block::Incomplete(b.len());
        }
        if h.flags & END_HEADERS != 0 {
            return Block::Complete(at);
        }
    }
}

/// Where a HEADERS frame's fragment lies in `frames` (past its padding
/// length and priority fields, before its padding); `None` when the frame
/// does not hold what its header says.
fn fragment_of(frames: &[u8], at: usize, h: FrameHeader) -> Option<(usize, usize)> {
    let mut start = at + FRAME_HEADER_LEN;
    let mut end = start + h.len;
    if end > frames.len() {
        return None;
    }
    if h.kind == HEADERS {
        if h.flags & PADDED != 0 {
            let pad = *frames.get(start)?;
            start += 1;
            end = end.saturating_sub(usize::from(pad));
        }
        if h.flags & PRIORITY != 0 {
            start += 5;
        }
    }
    Some((start, end.max(start)))
}

/// Overwrites the bytes no authority may hold at `positions` of `frames`.
fn overwrite(frames: &mut [u8], positions: impl Iterator<Item = usize>) {
    for i in positions {
        if !authority_byte(frames[i]) {
            frames[i] = b'-';
        }
    }
}

/// Rewrites the `:authority` of one complete header block in place: `frames`
/// is a HEADERS frame and its CONTINUATIONs, whole.
fn rewrite_block(frames: &mut [u8]) {
    let Some(first) = frame_header(frames) else { return };
    if first.flags & END_HEADERS != 0 {
        // One frame, as clients send a request's headers: the fragment is
        // one run of bytes, read where it lies (nothing copied, nothing
        // allocated unless an authority needs rewriting).
        let Some((start, end)) = fragment_of(frames, 0, first) else { return };
        for (offset, len) in bad_authorities(&frames[start..end]) {
            overwrite(frames, start + offset..start + offset + len);
        }
        return;
    }
    // Where each byte of the concatenated fragment lives in `frames`.
    let mut map: Vec<usize> = Vec::new();
    let mut at = 0;
    while let Some(h) = frame_header(&frames[at..]) {
        let Some((start, end)) = fragment_of(frames, at, h) else { return };
        map.extend(start..end);
        at += FRAME_HEADER_LEN + h.len;
    }
    let fragment: Vec<u8> = map.iter().map(|&i| frames[i]).collect();
    for (offset, len) in bad_authorities(&fragment) {
        overwrite(frames, map[offset..offset + len].iter().copied());
    }
}

/// Bytes a host name may hold as they are.
fn authority_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'.' || b == b'-'
}

/// RFC 7541 §5.1: an integer with an `n`-bit prefix at `b[*at]`.
fn integer(b: &[u8], at: &mut usize, n: u8) -> Option<usize> {
    let mask = (1u16 << n) as u8 - 1;
    let mut v = usize::from(*b.get(*at)? & mask);
    *at += 1;
    if v < usize::from(mask) {
        return Some(v);
    }
    let mut shift = 0u32;
    loop {
        let byte = *b.get(*at)?;
        *at += 1;
        v = v.checked_add(usize::from(byte & 0x7f).checked_shl(shift)?)?;
        if byte & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
}

/// RFC 7541 §5.2: a string literal at `b[*at]`: (Huffman-coded, start, len).
fn string(b: &[u8], at: &mut usize) -> Option<(bool, usize, usize)> {
    let huffman = *b.get(*at)? & 0x80 != 0;
    let len = integer(b, at, 7)?;
    let start = *at;
    *at = start.checked_add(len).filter(|&e| e <= b.len())?;
    Some((huffman, start, len))
}

/// The (offset, length) of every plain `:authority` value in a header block
/// fragment that does not parse as an authority. Stops at anything it
/// cannot read (h2 then refuses the block as it would have).
fn bad_authorities(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let first = b[at];
        let prefix = if first & 0x80 != 0 {
            // Indexed field: nothing literal to rewrite.
            if integer(b, &mut at, 7).is_none() {
                break;
            }
            continue;
        } else if first & 0x40 != 0 {
            6
        } else if first & 0x20 != 0 {
            // Dynamic table size update.
            if integer(b, &mut at, 5).is_none() {
                break;
            }
            continue;
        } else {
            4
        };
        let Some(index) = integer(b, &mut at, prefix) else { break };
        let is_authority = match index {
            // The static table's entry 1 is `:authority`.
            1 => true,
            0 => match string(b, &mut at) {
                Some((false, start, len)) => &b[start..start + len] == b":authority",
                Some((true, ..)) => false,
                None => break,
            },
            _ => false,
        };
        let Some((huffman, start, len)) = string(b, &mut at) else { break };
        if is_authority && !huffman && len > 0 && http::uri::Authority::try_from(&b[start..start + len]).is_err() {
            out.push((start, len));
        }
    }
    out
}

impl<S: AsyncRead + Unpin> AsyncRead for AnyAuthority<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, out: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.ready > 0 {
                let n = this.ready.min(out.remaining());
                out.put_slice(&this.buf[..n]);
                this.buf.drain(..n);
                this.ready -= n;
                return Poll::Ready(Ok(()));
            }
            let mut rb = ReadBuf::new(&mut this.scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) if rb.filled().is_empty() => {
                    // End of stream: hand on whatever is held, as it is.
                    this.ready = this.buf.len();
                    if this.ready == 0 {
                        return Poll::Ready(Ok(()));
                    }
                }
                Poll::Ready(Ok(())) => {
                    this.buf.extend_from_slice(rb.filled());
                    this.advance();
                }
                other => return other,
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AnyAuthority<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags, 0, 0, 0, 1];
        f.extend_from_slice(payload);
        f
    }

    /// What grpc-core sends: `:path`, then `:authority` as literals with
    /// incremental indexing and new names, plain (no Huffman).
    fn grpc_core_block(authority: &[u8]) -> Vec<u8> {
        let mut b = vec![0x40, 5];
        b.extend_from_slice(b":path");
        b.push(9);
        b.extend_from_slice(b"/x.Y/Call");
        b.extend_from_slice(&[0x40, 10]);
        b.extend_from_slice(b":authority");
        b.push(authority.len() as u8);
        b.extend_from_slice(authority);
        // An indexed field (:method POST) and a static-name literal (index 1).
        b.push(0x83);
        b.push(0x01);
        b.push(authority.len() as u8);
        b.extend_from_slice(authority);
        b
    }

    async fn through(input: Vec<u8>, chunk: usize) -> Vec<u8> {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let feed = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for c in input.chunks(chunk) {
                client.write_all(c).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let mut out = Vec::new();
        let mut s = AnyAuthority::new(server);
        let mut buf = [0u8; 7];
        loop {
            let n = tokio::time::timeout(std::time::Duration::from_millis(200), s.read(&mut buf)).await;
            match n {
                Ok(Ok(0)) | Err(_) => break,
                Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
                Ok(Err(e)) => panic!("{e}"),
            }
        }
        feed.await.unwrap();
        out
    }

    #[tokio::test]
    async fn an_unparseable_authority_is_rewritten_in_place_across_frames_and_chunks() {
        let block = grpc_core_block(b"tmp%2Fx%2Fr.sock");
        let (a, b) = block.split_at(20);
        let mut input = PREFACE.to_vec();
        input.extend(frame(0x4, 0, &[])); // SETTINGS
        input.extend(frame(HEADERS, PADDED, &[&[3u8][..], a, &[0, 0, 0]].concat()));
        input.extend(frame(CONTINUATION, END_HEADERS, b));
        input.extend(frame(0x0, 0x1, b"tmp%2F data is not touched"));
        let mut want = input.clone();
        let at = want.windows(16).position(|w| w == b"tmp%2Fx%2Fr.sock").unwrap();
        want[at..at + 16].copy_from_slice(b"tmp-2Fx-2Fr.sock");
        let second = want.windows(16).skip(at + 1).position(|w| w == b"tmp%2Fx%2Fr.sock").unwrap() + at + 1;
        want[second..second + 16].copy_from_slice(b"tmp-2Fx-2Fr.sock");
        for chunk in [1, 5, 9, 64, 4096] {
            assert_eq!(through(input.clone(), chunk).await, want, "chunks of {chunk}");
        }
        assert!(http::uri::Authority::try_from("tmp-2Fx-2Fr.sock").is_ok());
    }

    #[tokio::test]
    async fn an_unparseable_authority_in_one_padded_prioritized_frame_is_rewritten_in_place() {
        let block = grpc_core_block(b"tmp%2Fx%2Fr.sock");
        // Pad length 2, then the priority fields (stream dependency, weight).
        let payload = [&[2u8][..], &[0, 0, 0, 0, 16], &block, &[0, 0]].concat();
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, PADDED | PRIORITY | END_HEADERS, &payload));
        input.extend(frame(0x0, 0x1, b"tmp%2F data is not touched"));
        // Both `:authority` literals of the block; the DATA frame stays.
        let mut want = input.clone();
        for _ in 0..2 {
            let at = want.windows(16).position(|w| w == b"tmp%2Fx%2Fr.sock").unwrap();
            want[at..at + 16].copy_from_slice(b"tmp-2Fx-2Fr.sock");
        }
        for chunk in [1, 7, 4096] {
            assert_eq!(through(input.clone(), chunk).await, want, "chunks of {chunk}");
        }
    }

    #[tokio::test]
    async fn a_valid_authority_and_huffman_values_pass_untouched() {
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, END_HEADERS, &grpc_core_block(b"localhost:50051")));
        let mut huff = vec![0x41, 0x80 | 3, 0xff, 0xff, 0xff];
        huff.extend_from_slice(&[0x82]);
        input.extend(frame(HEADERS, END_HEADERS, &huff));
        assert_eq!(through(input.clone(), 3).await, input);
    }

    #[test]
    fn truncated_blocks_are_read_as_far_as_they_go() {
        assert!(bad_authorities(&[0x40, 10, b':']).is_empty());
        assert!(bad_authorities(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_empty());
        assert_eq!(bad_authorities(&[0x01, 3, b'a', b'/', b'b']), vec![(2, 3)]);
    }
}
