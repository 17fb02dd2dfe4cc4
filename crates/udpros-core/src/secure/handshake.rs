//! How two ends agree on a secure link from their connection headers alone, as they agree
//! on FEC: the subscriber's offer says it can ([`SECURE_FIELD`], its nonce, its key's
//! id, a proof), the publisher settles ([`settle`]) and its answer says how, the
//! subscriber checks the answer ([`accept`]). A stock ROS peer ignores the fields and
//! sends none, so under [`Policy::Prefer`] it gets a plain link.
//!
//! The link uses the stronger of the two ends' modes: encryption when either asks for it;
//! and AES-256-GCM when both ends would rather use it, ChaCha20-Poly1305 otherwise
//! ([`Cipher::agree`]). Each end signs its whole header ([`proof`]); the publisher's proof
//! covers the subscriber's nonce, so an answer recorded from one link fails on another.

use super::proof::{self, ProofError, Role};
use super::{
    nonce_text, parse_nonce, Cipher, GraphKey, KeyId, LinkKeys, LinkSecurity, Mode, Policy,
    NONCE_LEN,
};
use crate::header::ConnectionHeader;
use std::fmt;

/// The offer's modes, or the answer's chosen mode.
pub const SECURE_FIELD: &str = "secure";
/// The end's nonce, in hex.
pub const NONCE_FIELD: &str = "secure_nonce";
/// The end's key's id, so that "another key" can be told from "no key".
pub const KEY_ID_FIELD: &str = "secure_key";
/// The offer's preferred cipher, or the answer's chosen one (absent: ChaCha20-Poly1305).
pub const CIPHER_FIELD: &str = "secure_cipher";

/// One end's settings, as the handshake needs them.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// Toward peers.
    pub policy: Policy,
    /// The graph's key (`None` under [`Policy::Off`]).
    pub key: Option<&'a GraphKey>,
    /// The mode this end asks for.
    pub mode: Mode,
    /// The cipher this end would rather use ([`Cipher::of_this_host`]).
    pub cipher: Cipher,
}

/// How a link goes, as one end settled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// A plain ROS1 link (a stock peer under [`Policy::Prefer`], or security off).
    Plain,
    /// A secure link.
    Secure(LinkSecurity),
}

/// Why an end refuses a link: said to the other end as the header's `error`, and
/// logged, so that both sides know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// This end requires secure links and the peer offered none (a stock ROS node, or a
    /// udpros node with security off or without the key).
    PeerPlain,
    /// The peer asks for a secure link and this end has security off.
    WeAreOff,
    /// The peer holds another key.
    OtherKey {
        /// This end's key's id.
        ours: KeyId,
        /// The peer's key's id, as it said (`None`: not said in a readable form).
        theirs: Option<String>,
    },
    /// The peer's proof of its header failed.
    Proof(ProofError),
    /// A secure field the peer sent is not what it must be.
    Malformed(&'static str),
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::PeerPlain => f.write_str(
                "secure links are required here and the peer offered none (a stock ROS node, or udpros without the graph key)",
            ),
            Refused::WeAreOff => {
                f.write_str("the peer requires a secure link and this node's security is off")
            }
            Refused::OtherKey { ours, theirs } => write!(
                f,
                "the peer holds another graph key (its id {}, ours {ours})",
                theirs.as_deref().unwrap_or("unreadable")
            ),
            Refused::Proof(e) => e.fmt(f),
            Refused::Malformed(field) => write!(f, "the peer's {field} field is malformed"),
        }
    }
}

impl std::error::Error for Refused {}

/// What names a topic's link in its keys' derivation: its topic and connection id, which
/// both ends know once the publisher has answered.
pub fn link_context(topic: &str, connection_id: u32) -> Vec<u8> {
    format!("topic {topic} connection {connection_id}").into_bytes()
}

/// The fields a subscriber's offer adds under `side` with its fresh `nonce` (none when
/// its policy is off). Sign the whole header with [`proof::sign`] as
/// [`Role::Subscriber`] once every other field is in.
pub fn offer_fields(side: Side<'_>, nonce: &[u8; NONCE_LEN]) -> Vec<(&'static str, String)> {
    let Some(key) = side.key.filter(|_| side.policy != Policy::Off) else {
        return Vec::new();
    };
    vec![
        (SECURE_FIELD, side.mode.to_string()),
        (NONCE_FIELD, nonce_text(nonce)),
        (KEY_ID_FIELD, key.id().to_string()),
        (CIPHER_FIELD, side.cipher.to_string()),
    ]
}

/// Whether the peer's header asks for security: its mode when it does.
fn asked(header: &ConnectionHeader) -> Result<Option<Mode>, Refused> {
    match header.get(SECURE_FIELD) {
        None => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| Refused::Malformed(SECURE_FIELD)),
    }
}

/// The cipher the peer's header names: ChaCha20-Poly1305 when it names none (or one this
/// end does not know, in an offer: a later version's that only it can use).
fn named_cipher(header: &ConnectionHeader) -> Option<Cipher> {
    match header.get(CIPHER_FIELD) {
        None => Some(Cipher::ChaCha20Poly1305),
        Some(text) => text.parse().ok(),
    }
}

/// The peer's nonce, after its key id was found to be ours and its proof checked.
fn checked_peer(
    key: &GraphKey,
    header: &ConnectionHeader,
    role: Role,
    answering: Option<&[u8; NONCE_LEN]>,
) -> Result<[u8; NONCE_LEN], Refused> {
    let ours = key.id();
    let theirs = header.get(KEY_ID_FIELD);
    if theirs != Some(ours.to_string().as_str()) {
        let theirs = theirs.filter(|t| t.len() <= 64).map(String::from);
        return Err(Refused::OtherKey { ours, theirs });
    }
    proof::verify(key, role, header, answering).map_err(Refused::Proof)?;
    let nonce = header
        .get(NONCE_FIELD)
        .ok_or(Refused::Malformed(NONCE_FIELD))?;
    parse_nonce(nonce).ok_or(Refused::Malformed(NONCE_FIELD))
}

/// The publisher's side: how the link with the subscriber whose header is `offer` goes,
/// under `side`, with the publisher's fresh `nonce`; `context` names the link (the same
/// bytes at both ends: the topic and the connection id). For a secure link, the
/// subscriber's nonce comes back too: the answer carries [`answer_fields`] and is signed
/// as [`Role::Publisher`] in answer to it.
pub fn settle(
    side: Side<'_>,
    offer: &ConnectionHeader,
    context: &[u8],
    nonce: &[u8; NONCE_LEN],
) -> Result<(Settled, Option<[u8; NONCE_LEN]>), Refused> {
    let wanted = asked(offer)?;
    let key = side.key.filter(|_| side.policy != Policy::Off);
    match (wanted, key) {
        (None, _) if side.policy == Policy::Require => Err(Refused::PeerPlain),
        (None, _) => Ok((Settled::Plain, None)),
        // Security off here: a plain answer; a subscriber that requires security
        // refuses it and says why.
        (Some(_), None) => Ok((Settled::Plain, None)),
        (Some(theirs), Some(key)) => {
            let peer = match checked_peer(key, offer, Role::Subscriber, None) {
                Ok(peer) => peer,
                // Another key under prefer: both can still talk plainly (the subscriber
                // decides whether that is enough for it).
                Err(Refused::OtherKey { .. }) if side.policy == Policy::Prefer => {
                    return Ok((Settled::Plain, None));
                }
                Err(refused) => return Err(refused),
            };
            let mode = theirs.max(side.mode);
            let theirs = named_cipher(offer).unwrap_or(Cipher::ChaCha20Poly1305);
            let cipher = Cipher::agree(side.cipher, theirs);
            let keys = LinkKeys::derive(key, &peer, nonce, &cipher_context(context, cipher));
            let link = LinkSecurity { mode, cipher, keys };
            Ok((Settled::Secure(link), Some(peer)))
        }
    }
}

/// What names a link in its keys' derivation: `context` and the link's cipher (the keys of
/// one link under two ciphers would have nothing in common).
fn cipher_context(context: &[u8], cipher: Cipher) -> Vec<u8> {
    [context, b" ", cipher.as_str().as_bytes()].concat()
}

/// The fields a publisher's answer adds for the secure `link` it settled, with its
/// `nonce`. Sign the whole answer with [`proof::sign`] as [`Role::Publisher`], answering
/// the subscriber's nonce.
pub fn answer_fields(
    key: &GraphKey,
    link: &LinkSecurity,
    nonce: &[u8; NONCE_LEN],
) -> Vec<(&'static str, String)> {
    vec![
        (SECURE_FIELD, link.mode.to_string()),
        (NONCE_FIELD, nonce_text(nonce)),
        (KEY_ID_FIELD, key.id().to_string()),
        (CIPHER_FIELD, link.cipher.to_string()),
    ]
}

/// The subscriber's side: how the link goes given the publisher's `answer` to the offer
/// this end made under `side` with `nonce` (its own); `context` as the publisher used.
pub fn accept(
    side: Side<'_>,
    nonce: &[u8; NONCE_LEN],
    answer: &ConnectionHeader,
    context: &[u8],
) -> Result<Settled, Refused> {
    let chosen = asked(answer)?;
    let key = side.key.filter(|_| side.policy != Policy::Off);
    match (chosen, key) {
        (None, _) if side.policy == Policy::Require => Err(Refused::PeerPlain),
        (None, _) => Ok(Settled::Plain),
        // A publisher that answers securely to an offer that was not: nothing here can
        // open what it sends.
        (Some(_), None) => Err(Refused::WeAreOff),
        (Some(mode), Some(key)) => {
            let peer = checked_peer(key, answer, Role::Publisher, Some(nonce))?;
            // Weaker than this end asked for is not what it agreed to.
            if mode < side.mode {
                return Err(Refused::Malformed(SECURE_FIELD));
            }
            // Either cipher is strong: the publisher's choice stands, if it is one.
            let cipher = named_cipher(answer).ok_or(Refused::Malformed(CIPHER_FIELD))?;
            let keys = LinkKeys::derive(key, nonce, &peer, &cipher_context(context, cipher));
            Ok(Settled::Secure(LinkSecurity { mode, cipher, keys }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTEXT: &[u8] = b"/chatter 7";

    fn key(n: u8) -> GraphKey {
        GraphKey::from_bytes([n; 32])
    }

    fn side(policy: Policy, key: Option<&GraphKey>, mode: Mode) -> Side<'_> {
        Side {
            policy,
            key,
            mode,
            cipher: Cipher::Aes256Gcm,
        }
    }

    /// The subscriber's signed offer, as its driver builds it.
    fn offer(side: Side<'_>, nonce: &[u8; 16]) -> ConnectionHeader {
        let mut header =
            ConnectionHeader::from_pairs([("topic", "/chatter"), ("callerid", "/sub")]);
        for (field, value) in offer_fields(side, nonce) {
            header.insert(field, value);
        }
        if let (Some(key), Policy::Prefer | Policy::Require) = (side.key, side.policy) {
            proof::sign(key, Role::Subscriber, &mut header, None);
        }
        header
    }

    /// The publisher's answer to `offer`, signed, as its driver builds it.
    fn answer(
        pub_side: Side<'_>,
        offer: &ConnectionHeader,
    ) -> Result<(Settled, ConnectionHeader), Refused> {
        let nonce = [0x22; 16];
        let (settled, peer) = settle(pub_side, offer, CONTEXT, &nonce)?;
        let mut header =
            ConnectionHeader::from_pairs([("topic", "/chatter"), ("callerid", "/pub")]);
        if let Settled::Secure(link) = &settled {
            let key = pub_side.key.unwrap();
            for (field, value) in answer_fields(key, link, &nonce) {
                header.insert(field, value);
            }
            proof::sign(key, Role::Publisher, &mut header, peer.as_ref());
        }
        Ok((settled, header))
    }

    #[test]
    fn two_ends_with_the_key_agree_on_the_same_keys_and_the_stronger_mode() {
        let k = key(1);
        for (sub_mode, pub_mode, expected) in [
            (Mode::Encrypt, Mode::Encrypt, Mode::Encrypt),
            (Mode::Authenticate, Mode::Encrypt, Mode::Encrypt),
            (Mode::Encrypt, Mode::Authenticate, Mode::Encrypt),
            (Mode::Authenticate, Mode::Authenticate, Mode::Authenticate),
        ] {
            let sub = side(Policy::Prefer, Some(&k), sub_mode);
            let sub_nonce = [0x11; 16];
            let offered = offer(sub, &sub_nonce);
            let (pub_settled, answered) =
                answer(side(Policy::Require, Some(&k), pub_mode), &offered).unwrap();
            let sub_settled = accept(sub, &sub_nonce, &answered, CONTEXT).unwrap();
            assert_eq!(pub_settled, sub_settled, "both ends hold the same keys");
            assert!(matches!(sub_settled, Settled::Secure(link) if link.mode == expected));
        }
    }

    /// AES-256-GCM only when both ends would rather use it; ChaCha20-Poly1305 when either
    /// lacks AES instructions, or names no cipher (or one this end does not know).
    #[test]
    fn the_link_takes_aes_only_when_both_ends_prefer_it() {
        use Cipher::*;
        let k = key(1);
        let with = |cipher| Side {
            cipher,
            ..side(Policy::Prefer, Some(&k), Mode::Encrypt)
        };
        for (sub_cipher, pub_cipher, expected) in [
            (Aes256Gcm, Aes256Gcm, Aes256Gcm),
            (Aes256Gcm, ChaCha20Poly1305, ChaCha20Poly1305),
            (ChaCha20Poly1305, Aes256Gcm, ChaCha20Poly1305),
            (ChaCha20Poly1305, ChaCha20Poly1305, ChaCha20Poly1305),
        ] {
            let offered = offer(with(sub_cipher), &[0x11; 16]);
            let (pub_settled, answered) = answer(with(pub_cipher), &offered).unwrap();
            let sub_settled = accept(with(sub_cipher), &[0x11; 16], &answered, CONTEXT);
            assert_eq!(Ok(&pub_settled), sub_settled.as_ref());
            let Settled::Secure(link) = pub_settled else {
                panic!("a secure link")
            };
            assert_eq!(
                link.cipher, expected,
                "{sub_cipher} offered, {pub_cipher} here"
            );
            assert_eq!(answered.get(CIPHER_FIELD), Some(expected.as_str()));
        }
        // The same nonces under the two ciphers make unrelated keys.
        let settled = |sub_cipher| {
            let offered = offer(with(sub_cipher), &[0x11; 16]);
            match answer(with(Aes256Gcm), &offered).unwrap().0 {
                Settled::Secure(link) => link.keys,
                Settled::Plain => panic!("a secure link"),
            }
        };
        assert_ne!(
            settled(Aes256Gcm).downstream,
            settled(ChaCha20Poly1305).downstream
        );
        // An offer that names no cipher, or a cipher unknown here: ChaCha20-Poly1305.
        for named in [None, Some("aes512ocb")] {
            let mut offered = ConnectionHeader::from_pairs([("topic", "/chatter")]);
            for (field, value) in offer_fields(with(Aes256Gcm), &[0x11; 16]) {
                match (field, named) {
                    (CIPHER_FIELD, None) => {}
                    (CIPHER_FIELD, Some(name)) => offered.insert(field, name),
                    _ => offered.insert(field, value),
                }
            }
            proof::sign(&k, Role::Subscriber, &mut offered, None);
            let (settled, _) = answer(with(Aes256Gcm), &offered).unwrap();
            assert!(
                matches!(settled, Settled::Secure(ref l) if l.cipher == ChaCha20Poly1305),
                "{named:?}"
            );
        }
        // An answer naming a cipher the subscriber does not know is refused.
        let offered = offer(with(Aes256Gcm), &[0x11; 16]);
        let (_, mut answered) = answer(with(Aes256Gcm), &offered).unwrap();
        answered.insert(CIPHER_FIELD, "aes512ocb");
        proof::sign(&k, Role::Publisher, &mut answered, Some(&[0x11; 16]));
        assert_eq!(
            accept(with(Aes256Gcm), &[0x11; 16], &answered, CONTEXT),
            Err(Refused::Malformed(CIPHER_FIELD))
        );
    }

    #[test]
    fn prefer_talks_plainly_with_stock_peers_and_require_refuses_them() {
        let k = key(1);
        let stock = ConnectionHeader::from_pairs([("topic", "/chatter")]);
        let prefer = side(Policy::Prefer, Some(&k), Mode::Encrypt);
        let require = side(Policy::Require, Some(&k), Mode::Encrypt);
        // A roscpp subscriber's offer; a roscpp publisher's answer.
        assert_eq!(
            settle(prefer, &stock, CONTEXT, &[0; 16]).unwrap().0,
            Settled::Plain
        );
        assert_eq!(
            settle(require, &stock, CONTEXT, &[0; 16]),
            Err(Refused::PeerPlain)
        );
        assert_eq!(
            accept(prefer, &[0; 16], &stock, CONTEXT),
            Ok(Settled::Plain)
        );
        assert_eq!(
            accept(require, &[0; 16], &stock, CONTEXT),
            Err(Refused::PeerPlain)
        );
        // A udpros node with security off sends no fields, and answers a secure offer
        // plainly: a subscriber that requires security refuses that answer.
        let off = side(Policy::Off, None, Mode::Encrypt);
        assert!(offer_fields(off, &[0; 16]).is_empty());
        let offered = offer(require, &[5; 16]);
        let (settled, plain_answer) = answer(off, &offered).unwrap();
        assert_eq!(settled, Settled::Plain);
        assert_eq!(
            accept(require, &[5; 16], &plain_answer, CONTEXT),
            Err(Refused::PeerPlain)
        );
        assert!(Refused::PeerPlain.to_string().contains("stock ROS node"));
    }

    #[test]
    fn another_key_a_forged_or_replayed_header_is_refused() {
        let (k, other) = (key(1), key(2));
        let sub = side(Policy::Require, Some(&k), Mode::Encrypt);
        let offered = offer(sub, &[0x11; 16]);
        // A publisher with another key: refused under require, plain under prefer.
        let refused = answer(side(Policy::Require, Some(&other), Mode::Encrypt), &offered);
        assert!(
            matches!(refused, Err(Refused::OtherKey { ref theirs, .. }) if theirs.as_deref() == Some(&k.id().to_string()[..]))
        );
        let (settled, _) =
            answer(side(Policy::Prefer, Some(&other), Mode::Encrypt), &offered).unwrap();
        assert_eq!(settled, Settled::Plain);
        // An offer changed on the way (another topic) fails its proof.
        let mut changed = offered.clone();
        changed.insert("topic", "/cmd_vel");
        let refused = answer(side(Policy::Prefer, Some(&k), Mode::Encrypt), &changed);
        assert_eq!(refused.err(), Some(Refused::Proof(ProofError::Wrong)));
        // An answer recorded for another offer (another nonce) fails at the subscriber.
        let (_, answered) =
            answer(side(Policy::Prefer, Some(&k), Mode::Encrypt), &offered).unwrap();
        assert_eq!(
            accept(sub, &[0x12; 16], &answered, CONTEXT),
            Err(Refused::Proof(ProofError::Wrong))
        );
        // An answer that downgrades the mode this end asked for is refused.
        let weak = side(Policy::Prefer, Some(&k), Mode::Authenticate);
        let mut downgraded = ConnectionHeader::new();
        let weak_link = LinkSecurity {
            mode: Mode::Authenticate,
            cipher: Cipher::Aes256Gcm,
            keys: LinkKeys::derive(&k, &[0x11; 16], &[0x22; 16], CONTEXT),
        };
        for (field, value) in answer_fields(&k, &weak_link, &[0x22; 16]) {
            downgraded.insert(field, value);
        }
        proof::sign(&k, Role::Publisher, &mut downgraded, Some(&[0x11; 16]));
        assert_eq!(
            accept(weak, &[0x11; 16], &downgraded, CONTEXT).map(|_| ()),
            Ok(())
        );
        assert_eq!(
            accept(sub, &[0x11; 16], &downgraded, CONTEXT),
            Err(Refused::Malformed(SECURE_FIELD))
        );
        // A security field that is not one.
        let mut garbage = ConnectionHeader::new();
        garbage.insert(SECURE_FIELD, "rot13");
        assert_eq!(
            settle(sub, &garbage, CONTEXT, &[0; 16]),
            Err(Refused::Malformed(SECURE_FIELD))
        );
        // A huge key id is not echoed back whole.
        let mut huge = offered.clone();
        huge.insert(KEY_ID_FIELD, "f".repeat(100_000));
        let refused = answer(side(Policy::Require, Some(&k), Mode::Encrypt), &huge);
        assert!(matches!(
            refused,
            Err(Refused::OtherKey { theirs: None, .. })
        ));
    }
}
