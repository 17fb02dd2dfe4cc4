//! The TCPROS frame decoder fed arbitrary bytes in arbitrary chunks: no panic, frames never
//! over the limit, and the bytes of the frames it returns are exactly the stream's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udpros::wire::tcpros::FrameDecoder;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let limit = 4096;
    let mut decoder = FrameDecoder::new(limit);
    let mut consumed = 0;
    for piece in stream.chunks(chunk) {
        decoder.extend(piece);
        loop {
            match decoder.next_frame() {
                Ok(Some(body)) => {
                    assert!(body.len() <= limit);
                    assert_eq!(&stream[consumed + 4..consumed + 4 + body.len()], &body[..]);
                    consumed += 4 + body.len();
                }
                Ok(None) => break,
                Err(e) => {
                    assert!(e.len > limit);
                    return;
                }
            }
        }
    }
});
