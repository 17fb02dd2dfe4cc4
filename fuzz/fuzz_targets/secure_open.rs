//! What a secure link's receiver and a secured node take from anyone: datagrams of any
//! bytes (some sealed by the link's own sender, so the fuzzer gets past the tag into the
//! replay window), sealed TCPROS and service streams of any bytes, connection headers and
//! XML-RPC proof headers of any text. Nothing panics; a forged datagram or record is
//! never opened; a sealed one opens to what was sealed, once.

#![no_main]

use libfuzzer_sys::fuzz_target;
use udpros::wire::header::ConnectionHeader;
use udpros::wire::secure::datagram::{Opener, Sealer};
use udpros::wire::secure::proof::{self, Role};
use udpros::wire::secure::request::RequestVerifier;
use udpros::wire::secure::stream::{StreamOpener, StreamSealer};
use udpros::wire::service::ResponseDecoder;
use udpros::wire::secure::{Cipher, GraphKey, Mode};

fuzz_target!(|data: &[u8]| {
    let key = [7u8; 32];
    let mode = if data.first().is_some_and(|b| b & 1 == 1) {
        Mode::Authenticate
    } else {
        Mode::Encrypt
    };
    let cipher = if data.first().is_some_and(|b| b & 2 == 2) {
        Cipher::ChaCha20Poly1305
    } else {
        Cipher::Aes256Gcm
    };
    let mut sealer = Sealer::new(&key, cipher, mode);
    let mut opener = Opener::new(&key, cipher, mode);
    let mut sealed_log: Vec<Vec<u8>> = Vec::new();
    for chunk in data.split(|b| *b == 0xff).take(256) {
        match chunk.first() {
            // Seal this chunk (as a datagram of our own), and open it: it must come back.
            Some(0) if chunk.len() >= 8 => {
                let sealed = sealer.seal(chunk);
                assert_eq!(opener.open(&sealed).as_deref(), Ok(chunk));
                sealed_log.push(sealed);
            }
            // Replay one sealed before: refused.
            Some(1) if !sealed_log.is_empty() => {
                let old = &sealed_log[usize::from(chunk.len() as u8) % sealed_log.len()];
                assert!(opener.open(old).is_err());
            }
            // Anything else: forged, so never opened.
            _ => assert!(opener.open(chunk).is_err()),
        }
    }
    // A stream: records sealed in order open in order; anything else fails, and a
    // response stream of any bytes is read without a panic.
    let mut streamer = StreamSealer::new(&key, cipher, mode);
    let mut reader = StreamOpener::new(&key, cipher, mode);
    for chunk in data.split(|b| *b == 0xfe).take(64) {
        if chunk.first() == Some(&0) {
            let mut record = Vec::new();
            streamer.seal_into(chunk, &mut record);
            assert_eq!(reader.open(&record[4..]).as_deref(), Ok(chunk));
        } else {
            assert!(reader.open(chunk).is_err());
        }
    }
    let mut responses = ResponseDecoder::new(1 << 16);
    responses.open_with(StreamOpener::new(&key, cipher, mode));
    responses.buffer_mut().extend_from_slice(data);
    while let Ok(Some(_)) = responses.next_response() {}

    let text = String::from_utf8_lossy(data);
    let graph_key = GraphKey::from_bytes(key);
    let header = ConnectionHeader::from_pairs([(proof::PROOF_FIELD, text.as_ref()), ("topic", "/t")]);
    assert!(proof::verify(&graph_key, Role::Subscriber, &header, None).is_err());
    let mut verifier = RequestVerifier::new();
    assert!(verifier.verify(&graph_key, 1_800_000_000_000, Some(&text), data).is_err());
    let _ = GraphKey::parse(&text);
});
