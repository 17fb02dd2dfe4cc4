//! The connection header: `key=value` fields, each behind a `u32 LE` length.
//!
//! Two forms: on TCP the field list is itself preceded by its total length; in UDPROS
//! negotiation the bare field list travels as an XML-RPC `<base64>` value. Parsing accepts
//! any key order, values containing `=`, and repeated keys (the last wins), as roscpp does;
//! encoding writes keys sorted, as roscpp and rospy do.

use std::collections::BTreeMap;
use std::fmt;

/// Bounds on what a peer may send, checked before anything is allocated for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderLimits {
    /// Largest field list, in bytes (message definitions of large types run to tens of kB).
    pub max_total: usize,
    /// Largest single field; roscpp refuses fields over 1,000,000 bytes.
    pub max_field: usize,
    /// Most fields in one header (roscpp sends five to eight).
    pub max_fields: usize,
}

impl Default for HeaderLimits {
    fn default() -> Self {
        HeaderLimits {
            max_total: 4 << 20,
            max_field: 1_000_000,
            max_fields: 256,
        }
    }
}

/// Why bytes are not a connection header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// The input ends inside a length or a field.
    Truncated,
    /// The TCP total length disagrees with the fields that follow.
    TotalMismatch {
        /// The total the 4-byte prefix announced.
        total: usize,
        /// The bytes that follow it.
        actual: usize,
    },
    /// A header or field over its limit ([`HeaderLimits`]), refused before it is copied.
    TooLarge {
        /// The announced length.
        len: usize,
        /// The limit it exceeds.
        limit: usize,
    },
    /// More fields than [`HeaderLimits::max_fields`].
    TooManyFields,
    /// A field without `=`, an empty key, or bytes that are not UTF-8.
    BadField(String),
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Truncated => f.write_str("connection header ends inside a field"),
            HeaderError::TotalMismatch { total, actual } => {
                write!(
                    f,
                    "connection header claims {total} bytes but holds {actual}"
                )
            }
            HeaderError::TooLarge { len, limit } => {
                write!(f, "connection header part of {len} bytes exceeds {limit}")
            }
            HeaderError::TooManyFields => f.write_str("connection header has too many fields"),
            HeaderError::BadField(why) => write!(f, "invalid connection header field: {why}"),
        }
    }
}

impl std::error::Error for HeaderError {}

/// A connection header's fields, sorted by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionHeader {
    fields: BTreeMap<String, String>,
}

impl ConnectionHeader {
    /// An empty header, to be filled with [`ConnectionHeader::with`].
    pub fn new() -> ConnectionHeader {
        ConnectionHeader::default()
    }

    /// Builds a header from `(key, value)` pairs.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        ConnectionHeader {
            fields: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// Sets a field (replacing an earlier value), builder style.
    pub fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        self.insert(key, value);
        self
    }

    /// Sets `key` to `value`, replacing an earlier value (as peers do: the last duplicate wins).
    pub fn insert(&mut self, key: &str, value: impl Into<String>) {
        self.fields.insert(key.to_string(), value.into());
    }

    /// The value of `key`, if the header has it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// The peer's refusal (`error=...`), which ends the connection.
    pub fn error(&self) -> Option<&str> {
        self.get("error")
    }

    /// Fields in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// How many fields the header has.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether the header has no field at all.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The bare field list (the UDPROS form, carried as XML-RPC base64).
    pub fn encode_fields(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_fields_len());
        for (k, v) in &self.fields {
            let len = (k.len() + 1 + v.len()) as u32;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(k.as_bytes());
            out.push(b'=');
            out.extend_from_slice(v.as_bytes());
        }
        out
    }

    /// The TCP form: total length, then the field list.
    pub fn encode_tcp(&self) -> Vec<u8> {
        let fields = self.encode_fields();
        let mut out = Vec::with_capacity(4 + fields.len());
        out.extend_from_slice(&(fields.len() as u32).to_le_bytes());
        out.extend_from_slice(&fields);
        out
    }

    fn encoded_fields_len(&self) -> usize {
        self.fields
            .iter()
            .map(|(k, v)| 4 + k.len() + 1 + v.len())
            .sum()
    }

    /// Parses a bare field list (the UDPROS form, or a TCP header's body).
    pub fn decode_fields(
        mut data: &[u8],
        limits: &HeaderLimits,
    ) -> Result<ConnectionHeader, HeaderError> {
        if data.len() > limits.max_total {
            return Err(HeaderError::TooLarge {
                len: data.len(),
                limit: limits.max_total,
            });
        }
        let mut fields = BTreeMap::new();
        let mut count = 0;
        while !data.is_empty() {
            let (len_bytes, rest) = data
                .split_first_chunk::<4>()
                .ok_or(HeaderError::Truncated)?;
            let len = u32::from_le_bytes(*len_bytes) as usize;
            if len > limits.max_field {
                return Err(HeaderError::TooLarge {
                    len,
                    limit: limits.max_field,
                });
            }
            if len > rest.len() {
                return Err(HeaderError::Truncated);
            }
            count += 1;
            if count > limits.max_fields {
                return Err(HeaderError::TooManyFields);
            }
            let (field, rest) = rest.split_at(len);
            let text = std::str::from_utf8(field)
                .map_err(|_| HeaderError::BadField("not UTF-8".into()))?;
            let (key, value) = text
                .split_once('=')
                .ok_or_else(|| HeaderError::BadField(format!("no '=' in '{}'", truncate(text))))?;
            if key.is_empty() {
                return Err(HeaderError::BadField(format!(
                    "empty key in '{}'",
                    truncate(text)
                )));
            }
            fields.insert(key.to_string(), value.to_string());
            data = rest;
        }
        Ok(ConnectionHeader { fields })
    }

    /// Parses the TCP form: the total length must match the field list that follows.
    pub fn decode_tcp(data: &[u8], limits: &HeaderLimits) -> Result<ConnectionHeader, HeaderError> {
        let (len_bytes, rest) = data
            .split_first_chunk::<4>()
            .ok_or(HeaderError::Truncated)?;
        let total = u32::from_le_bytes(*len_bytes) as usize;
        if total > limits.max_total {
            return Err(HeaderError::TooLarge {
                len: total,
                limit: limits.max_total,
            });
        }
        if total != rest.len() {
            return Err(HeaderError::TotalMismatch {
                total,
                actual: rest.len(),
            });
        }
        ConnectionHeader::decode_fields(rest, limits)
    }
}

fn truncate(text: &str) -> &str {
    match text.char_indices().nth(40) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(text: &[u8]) -> Vec<u8> {
        let mut out = (text.len() as u32).to_le_bytes().to_vec();
        out.extend_from_slice(text);
        out
    }

    #[test]
    fn encodes_sorted_keys_with_lengths() {
        let h = ConnectionHeader::new()
            .with("topic", "/t")
            .with("callerid", "/n");
        let mut want = field(b"callerid=/n");
        want.extend(field(b"topic=/t"));
        assert_eq!(h.encode_fields(), want);
        let tcp = h.encode_tcp();
        assert_eq!(&tcp[..4], &(want.len() as u32).to_le_bytes());
        assert_eq!(
            ConnectionHeader::decode_tcp(&tcp, &HeaderLimits::default()),
            Ok(h)
        );
    }

    #[test]
    fn accepts_any_order_equals_in_values_and_last_duplicate() {
        let mut data = field(b"type=std_msgs/String");
        data.extend(field(b"message_definition=int32 X=5\nstring data"));
        data.extend(field(b"type=std_msgs/Other"));
        let h = ConnectionHeader::decode_fields(&data, &HeaderLimits::default()).expect("parses");
        assert_eq!(h.get("message_definition"), Some("int32 X=5\nstring data"));
        assert_eq!(h.get("type"), Some("std_msgs/Other"));
        assert_eq!(
            h.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            ["message_definition", "type"]
        );
    }

    #[test]
    fn surfaces_the_error_field() {
        let h = ConnectionHeader::decode_fields(
            &field(b"error=md5 mismatch"),
            &HeaderLimits::default(),
        )
        .unwrap();
        assert_eq!(h.error(), Some("md5 mismatch"));
    }

    #[test]
    fn refuses_malformed_input() {
        let limits = HeaderLimits::default();
        let no_equals = ConnectionHeader::decode_fields(&field(b"no-equals"), &limits).unwrap_err();
        assert!(no_equals.to_string().contains("no '='"), "{no_equals}");
        assert!(matches!(
            ConnectionHeader::decode_fields(&field(b"=v"), &limits),
            Err(HeaderError::BadField(_))
        ));
        assert!(matches!(
            ConnectionHeader::decode_fields(&field(b""), &limits),
            Err(HeaderError::BadField(_))
        ));
        assert!(matches!(
            ConnectionHeader::decode_fields(&field(b"k=\xff"), &limits),
            Err(HeaderError::BadField(_))
        ));
        assert_eq!(
            ConnectionHeader::decode_fields(&[5, 0, 0], &limits),
            Err(HeaderError::Truncated)
        );
        assert_eq!(
            ConnectionHeader::decode_fields(&[9, 0, 0, 0, b'a', b'='], &limits),
            Err(HeaderError::Truncated)
        );
        let huge = [0xff, 0xff, 0xff, 0x7f, b'a'];
        assert!(matches!(
            ConnectionHeader::decode_fields(&huge, &limits),
            Err(HeaderError::TooLarge { .. })
        ));
        let mut tcp = field(b"a=b");
        tcp[0] += 1;
        assert!(matches!(
            ConnectionHeader::decode_tcp(&tcp, &limits),
            Err(HeaderError::TotalMismatch { .. })
        ));
        let tight = HeaderLimits {
            max_fields: 1,
            ..limits
        };
        let two = [field(b"a=1"), field(b"b=2")].concat();
        assert_eq!(
            ConnectionHeader::decode_fields(&two, &tight),
            Err(HeaderError::TooManyFields)
        );
    }

    #[test]
    fn decodes_a_header_captured_from_roscpp() {
        // The UDPROS header of the reference's captured requestTopic (wire reference §1.1).
        let mut data = field(b"callerid=/udp_sub");
        data.extend(field(b"md5sum=82373f1612381bb6ee473b5cd6f5d89c"));
        data.extend(field(b"topic=/big"));
        data.extend(field(b"type=std_msgs/UInt8MultiArray"));
        let h = ConnectionHeader::decode_fields(&data, &HeaderLimits::default()).unwrap();
        assert_eq!(
            h.encode_fields(),
            data,
            "re-encoding keeps roscpp's sorted order"
        );
        assert_eq!(h.get("topic"), Some("/big"));
    }
}
