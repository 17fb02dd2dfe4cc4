//! The Ping decoder on streams of valid frames mixed with noise: every valid frame comes
//! out, in order, whatever the noise and however the stream is chunked.

use proptest::prelude::*;
use udpros_bridges::ping::{encode_frame, Decoder, Message};

fn frame_strategy() -> impl Strategy<Value = (u16, Vec<u8>)> {
    (any::<u16>(), proptest::collection::vec(any::<u8>(), 0..300))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_valid_frame_survives_noise(
        parts in proptest::collection::vec((frame_strategy(), proptest::collection::vec(any::<u8>(), 0..40)), 1..12),
        chunk in 1usize..64,
    ) {
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for ((id, payload), noise) in &parts {
            stream.extend_from_slice(noise);
            let frame = encode_frame(*id, 0, 0, payload);
            stream.extend_from_slice(&frame);
            expected.push((*id, payload.clone()));
        }
        // Whatever a noise "BR" claims, enough bytes follow to settle it.
        stream.extend(std::iter::repeat_n(0u8, 4200));
        let mut decoder = Decoder::default();
        let mut got = Vec::new();
        for piece in stream.chunks(chunk) {
            decoder.extend(piece);
            while let Some(f) = decoder.next_frame() {
                got.push((f.id, f.payload.to_vec()));
            }
        }
        // Noise may, by chance, hold a valid frame of its own: look for ours in order.
        let mut rest = got.iter();
        for want in &expected {
            prop_assert!(rest.any(|g| g == want), "lost frame {}", want.0);
        }
        prop_assert!(decoder.buffered() < 20);
    }

    #[test]
    fn arbitrary_payloads_never_panic(id in any::<u16>(), payload in proptest::collection::vec(any::<u8>(), 0..2000)) {
        if let Ok(m) = Message::decode(id, &payload) {
            // What decodes encodes to bytes that decode to the same message.
            prop_assert_eq!(Message::decode(id, &m.encode()), Ok(m));
        }
        let _ = udpros_bridges::ping::draft2017::DraftMessage::decode(id, &payload);
    }
}
