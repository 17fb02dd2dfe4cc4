//! The server's side of WebSocket framing (RFC 6455 §5.2), written by the view itself so
//! that a message goes to the socket as it is: the frame's header, the Message Data
//! header and the publisher's bytes in one vectored write, with no copy into a frame
//! buffer (tungstenite's writer copies every payload; at 250 kB per image that was a
//! tenth of the view's CPU). Reading stays tungstenite's, with its limits.

use std::io::IoSlice;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Frame opcodes the server sends.
pub(crate) mod opcode {
    pub(crate) const TEXT: u8 = 0x1;
    pub(crate) const BINARY: u8 = 0x2;
    pub(crate) const CLOSE: u8 = 0x8;
    pub(crate) const PONG: u8 = 0xA;
}

/// The header of a final, unmasked frame (a server's) of `opcode` carrying `len` bytes:
/// its bytes and how many of them are used (2, 4 or 10).
pub(crate) fn header(opcode: u8, len: usize) -> ([u8; 10], usize) {
    let mut h = [0u8; 10];
    h[0] = 0x80 | (opcode & 0x0f);
    let used = if len < 126 {
        h[1] = len as u8;
        2
    } else if len <= usize::from(u16::MAX) {
        h[1] = 126;
        h[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        4
    } else {
        h[1] = 127;
        h[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    (h, used)
}

/// Writes one frame whose payload is `parts`, one after the other, with vectored writes.
pub(crate) async fn write_frame<W: AsyncWrite + Unpin>(
    out: &mut W,
    opcode: u8,
    parts: &[&[u8]],
) -> std::io::Result<()> {
    let len = parts.iter().map(|p| p.len()).sum();
    let (h, used) = header(opcode, len);
    let mut pieces: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
    pieces.push(&h[..used]);
    pieces.extend(parts.iter().copied().filter(|p| !p.is_empty()));
    let (mut piece, mut offset) = (0, 0);
    while piece < pieces.len() {
        let slices: Vec<IoSlice<'_>> = std::iter::once(&pieces[piece][offset..])
            .chain(pieces[piece + 1..].iter().copied())
            .map(IoSlice::new)
            .collect();
        let mut written = out.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        // Past the pieces written whole, into the one written in part.
        while piece < pieces.len() && written >= pieces[piece].len() - offset {
            written -= pieces[piece].len() - offset;
            piece += 1;
            offset = 0;
        }
        offset += written;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_take_the_three_encodings_at_their_edges() {
        assert_eq!(
            header(opcode::TEXT, 0),
            ([0x81, 0, 0, 0, 0, 0, 0, 0, 0, 0], 2)
        );
        assert_eq!(header(opcode::BINARY, 125).0[..2], [0x82, 125]);
        assert_eq!(header(opcode::BINARY, 126).0[..4], [0x82, 126, 0, 126]);
        assert_eq!(
            header(opcode::BINARY, 65535).0[..4],
            [0x82, 126, 0xff, 0xff]
        );
        let (h, used) = header(opcode::BINARY, 65536);
        assert_eq!(used, 10);
        assert_eq!(h[..10], [0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0]);
    }

    /// A writer that takes at most `chunk` bytes a call: partial vectored writes resume
    /// where they stopped, inside a piece or at its edge.
    struct Trickle {
        got: Vec<u8>,
        chunk: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(self.chunk);
            self.got.extend_from_slice(&buf[..n]);
            std::task::Poll::Ready(Ok(n))
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn a_frame_arrives_whole_whatever_the_writes_take() {
        let body: Vec<u8> = (0..70_000u32).map(|i| i as u8).collect();
        for chunk in [1, 7, 13, 4096, 1 << 20] {
            let mut out = Trickle {
                got: Vec::new(),
                chunk,
            };
            write_frame(&mut out, opcode::BINARY, &[b"0123456789abc", &[], &body])
                .await
                .unwrap();
            assert_eq!(out.got[..10], header(opcode::BINARY, 13 + body.len()).0);
            assert_eq!(&out.got[10..23], b"0123456789abc");
            assert_eq!(out.got[23..], body[..], "chunk {chunk}");
        }
    }
}
