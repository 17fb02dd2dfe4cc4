//! The Ping decoder, message parsers and Ping Viewer log reader on arbitrary bytes: no
//! panic, bounded buffering, and every frame it yields decodes (or is refused) without
//! panicking; every log record is within the frame bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udpros_bridges::ping::draft2017::DraftMessage;
use udpros_bridges::ping::{Decoder, Message};

fuzz_target!(|data: &[u8]| {
    use udpros_bridges::ping::log::{LogReader, MAX_FRAME};
    if let Ok(mut log) = LogReader::new(data) {
        while let Ok(Some(record)) = log.next_record() {
            assert!(record.frame.len() <= MAX_FRAME);
        }
    }
    let mut decoder = Decoder::new(1024);
    for chunk in data.chunks(7) {
        decoder.extend(chunk);
        while let Some(frame) = decoder.next_frame() {
            if let Ok(m) = Message::decode(frame.id, &frame.payload) {
                assert_eq!(Message::decode(frame.id, &m.encode()), Ok(m));
            }
            let _ = DraftMessage::decode(frame.id, &frame.payload);
        }
        assert!(decoder.buffered() <= 1024 + 10 + 7);
    }
});
